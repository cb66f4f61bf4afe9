// The measuring core: clocks, calibration, interleaved repetitions and medians.

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Nanoseconds on `clock`.
@inline(__always)
func now(_ clock: clockid_t) -> UInt64 {
  var time = timespec()
  clock_gettime(clock, &time)
  return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Wall and CPU time of one sample.
struct Sample {
  var wall: UInt64
  var cpu: UInt64
}

/// Runs `body` and measures it with the wall clock and the calling thread's CPU clock.
@inline(__always)
func measureOnThisThread(_ body: () -> Void) -> Sample {
  let wall0 = now(CLOCK_MONOTONIC)
  let cpu0 = now(CLOCK_THREAD_CPUTIME_ID)
  body()
  let cpu1 = now(CLOCK_THREAD_CPUTIME_ID)
  let wall1 = now(CLOCK_MONOTONIC)
  return Sample(wall: wall1 - wall0, cpu: cpu1 - cpu0)
}

/// Runs `body` and measures it with the wall clock and the CPU clock of the whole
/// process, for work spread over several threads.
@inline(__always)
func measureProcess(_ body: () -> Void) -> Sample {
  let wall0 = now(CLOCK_MONOTONIC)
  let cpu0 = now(CLOCK_PROCESS_CPUTIME_ID)
  body()
  let cpu1 = now(CLOCK_PROCESS_CPUTIME_ID)
  let wall1 = now(CLOCK_MONOTONIC)
  return Sample(wall: wall1 - wall0, cpu: cpu1 - cpu0)
}

/// Where handlers put what they receive, so that no delivery can be optimized away.
///
/// `count` is touched only by single-threaded workloads; `touch` only reads.
final class Sink: @unchecked Sendable {
  // @unchecked Sendable: `count` is written from one thread at a time (workloads with
  // concurrent senders call `touch`, which writes nothing).
  @exclusivity(unchecked) var count = 0
  /// A value no workload sends; unknown to the optimizer.
  let trap: Int

  init() {
    trap = CommandLine.arguments.count &- 1_000_000_007
  }

  @inline(__always)
  func add(_ value: Int) {
    count &+= 1
    if _slowPath(value == trap) { print("trap") }
  }

  @inline(__always)
  func touch(_ value: Int) {
    if _slowPath(value == trap) { print("trap") }
  }
}

/// One peer's implementation of one workload, ready to run.
struct Bench {
  /// Performs `n` operations and measures them.
  let measure: (Int) -> Sample
  /// A fixed number of operations per sample (no calibration).
  var fixedCount: Int?
  /// Counts deliveries, to check that the peer really delivers what it should.
  var sink: Sink?
  /// Deliveries expected per operation, checked with `sink`.
  var deliveriesPerOperation = 0
  /// Values lost by the last sample, for async rows.
  var lost: (() -> Int)?
  /// At most this many measured repetitions (for rows whose samples are long).
  var maxRepetitions: Int?
  /// Something to report about the samples taken (a stalled consumer).
  var note: (() -> String?)?
  /// Keeps the peer's objects alive until the workload ends.
  var keepAlive: [Any] = []

  /// A bench whose `n` operations run on the calling thread.
  static func onThisThread(sink: Sink?, deliveries: Int, keepAlive: [Any] = [], _ run: @escaping (Int) -> Void) -> Bench
  {
    Bench(
      measure: { n in measureOnThisThread { run(n) } }, sink: sink, deliveriesPerOperation: deliveries,
      keepAlive: keepAlive)
  }
}

/// The outcome of one peer on one workload.
enum Cell {
  case unavailable(String)
  case measured(Measured)
}

struct Measured {
  /// Median nanoseconds per operation, wall clock.
  var wall: Double
  /// Median nanoseconds per operation, CPU clock.
  var cpu: Double
  var operationsPerSample: Int
  var samples: Int
  /// Most values lost in any sample (async rows).
  var lost: Int?
  /// Set when the peer did not deliver what it should have.
  var warning: String?
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  guard !sorted.isEmpty else { return .nan }
  let middle = sorted.count / 2
  return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

struct HarnessOptions {
  var repetitions = 11
  /// Wall time aimed at for one sample, in nanoseconds.
  var sampleTarget: UInt64 = 10_000_000
}

/// Picks an operation count per sample so that one sample takes about `target`; the
/// doubling runs double as warm-up.
func calibrate(_ bench: Bench, target: UInt64) -> Int {
  var n = 1
  while true {
    let sample = bench.measure(n)
    if sample.wall >= target / 8 || n >= 1 << 30 {
      let scaled = Double(n) * Double(target) / Double(max(sample.wall, 1))
      return max(1, Int(scaled.rounded()))
    }
    n *= 2
  }
}

/// Measures every bench in `benches`, interleaving repetitions (A B C A B C …).
func runInterleaved(_ benches: [(key: Int, bench: Bench)], options: HarnessOptions) -> [Int: Measured] {
  var counts: [Int: Int] = [:]
  var warnings: [Int: String] = [:]
  for (key, bench) in benches {
    let n = bench.fixedCount ?? calibrate(bench, target: options.sampleTarget)
    counts[key] = n
    // Warm-up at full size, then a check that every expected delivery happened.
    let check = min(n, 10_000)
    _ = bench.measure(bench.fixedCount ?? check)
    if let sink = bench.sink {
      let before = sink.count
      _ = bench.measure(check)
      let delivered = sink.count - before
      let expected = check * bench.deliveriesPerOperation
      if delivered != expected { warnings[key] = "delivered \(delivered) of \(expected)" }
    }
  }
  var walls: [Int: [Double]] = [:]
  var cpus: [Int: [Double]] = [:]
  var lost: [Int: Int] = [:]
  for repetition in 0..<options.repetitions {
    for (key, bench) in benches where repetition < bench.maxRepetitions ?? Int.max {
      let n = counts[key]!
      let sample = bench.measure(n)
      walls[key, default: []].append(Double(sample.wall) / Double(n))
      cpus[key, default: []].append(Double(sample.cpu) / Double(n))
      if let lostNow = bench.lost?() { lost[key] = max(lost[key] ?? 0, lostNow) }
    }
  }
  var result: [Int: Measured] = [:]
  for (key, bench) in benches {
    let notes = [warnings[key], bench.note?()].compactMap { $0 }
    result[key] = Measured(
      wall: median(walls[key]!), cpu: median(cpus[key]!), operationsPerSample: counts[key]!,
      samples: walls[key]!.count, lost: lost[key], warning: notes.isEmpty ? nil : notes.joined(separator: "; "))
  }
  return result
}
