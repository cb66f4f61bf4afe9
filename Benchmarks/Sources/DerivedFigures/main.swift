// The figures of derived values' consistency and bounds, as plain measurements rather
// than ratios to a floor: deliveries per write on a diamond, a slow subscriber of a map
// that two threads write (how long `observe` takes to return, the memory it costs, how
// long the writers take to stop), and many screens whose derived values' observers'
// owners died (what is left behind). One line each:
//
//   swift run -c release --package-path Benchmarks evented-figures
//
// A program of its own, so that it does not change how the benchmark's workloads are
// compiled (their instruction counts).

import Evented
import Foundation
import Synchronization

print(diamondFigure())
for sources in [1, 2] { print(hostageFigure(sources: sources)) }
for combined in [false, true] { print(screensFigure(combined: combined)) }

/// Resident bytes of this process, from /proc/self/statm.
func residentBytes() -> Int {
  guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return -1 }
  let fields = text.split(separator: " ")
  guard fields.count > 1, let pages = Int(fields[1]) else { return -1 }
  return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// `a` → two maps → `combineLatest`, observed; 1,000 writes.
func diamondFigure() -> String {
  let a = Property(0)
  let b = a.map { $0 * 10 }
  let c = a.map { $0 + 1 }
  let deliveries = Atomic<Int>(0)
  let glitches = Atomic<Int>(0)
  let subscription = b.combineLatest(c).observe { pair in
    deliveries.add(1, ordering: .relaxed)
    if pair.0 != (pair.1 - 1) * 10 { glitches.add(1, ordering: .relaxed) }
  }
  let writes = 1_000
  for value in 1...writes { a.value = value }
  subscription.cancel()
  let perWrite = Double(deliveries.load(ordering: .relaxed) - 1) / Double(writes)
  return "diamond: \(perWrite) deliveries per write, \(glitches.load(ordering: .relaxed)) states that never existed"
}

/// Two threads write as fast as they can (one source: both write `p`; two sources: one
/// writes `p`, the other `q`) while this thread subscribes a 200 µs handler to a map of
/// them, keeps it 2 s, then tells the writers to stop.
func hostageFigure(sources: Int) -> String {
  let p = Property(0)
  let q = Property(0)
  let mapped = sources == 1 ? p.map { $0 } : p.combineLatest(q).map { $0 + $1 }
  let stop = Atomic<Bool>(false)
  let writes = Atomic<Int>(0)
  let writers = (0..<2).map { index in
    let target = sources == 1 || index == 0 ? p : q
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      while !stop.load(ordering: .relaxed) {
        target.modify { $0 += 1 }
        writes.add(1, ordering: .relaxed)
      }
      done.signal()
    }
    return done
  }
  while writes.load(ordering: .relaxed) < 10_000 { sched_yield() }
  let baseline = residentBytes()
  var peak = baseline
  let calls = Atomic<Int>(0)
  let subscribing = ContinuousClock.now
  let subscription = mapped.observe { _ in
    calls.add(1, ordering: .relaxed)
    let end = ContinuousClock.now.advanced(by: .microseconds(200))
    while ContinuousClock.now < end {}
  }
  let observeTook = ContinuousClock.now - subscribing
  let holding = ContinuousClock.now
  while ContinuousClock.now - holding < .seconds(2) {
    peak = max(peak, residentBytes())
    Thread.sleep(forTimeInterval: 0.05)
  }
  let stopping = ContinuousClock.now
  stop.store(true, ordering: .relaxed)
  var stopped = true
  for done in writers where done.wait(timeout: .now() + 60) == .timedOut { stopped = false }
  let stopTook = ContinuousClock.now - stopping
  subscription.cancel()
  let kind = sources == 1 ? "a map of one property" : "a map of a combineLatest of two"
  return
    "slow subscriber of \(kind), two writers: observe returned in \(milliseconds(observeTook)) ms; "
    + "\(calls.load(ordering: .relaxed)) handler calls and \(writes.load(ordering: .relaxed)) writes; "
    + "peak memory +\((peak - baseline) / 1_048_576) MB; writers "
    + (stopped ? "stopped in \(milliseconds(stopTook)) ms" : "still writing 60 s after being told to stop")
}

/// 100,000 screens, each observing a derived value of one property with itself as the
/// owner, then dying; the property is never written again.
func screensFigure(combined: Bool) -> String {
  final class Screen: Sendable {}
  let p = Property(0)
  let other = Property(0)
  let baseline = residentBytes()
  for _ in 0..<100_000 {
    let screen = Screen()
    let derived = combined ? p.combineLatest(other).map { $0 + $1 } : p.map { $0 + 1 }
    derived.observe(with: screen) { _, _ in }
  }
  let count = p.observerCount
  let grown = residentBytes() - baseline
  let kind = combined ? "a map of a combineLatest" : "a map"
  return "100,000 screens observing \(kind), gone: observerCount \(count), memory +\(grown / 1_048_576) MB"
}

private func milliseconds(_ duration: Duration) -> String {
  String(format: "%.1f", Double(duration.components.attoseconds) / 1e15 + Double(duration.components.seconds) * 1e3)
}
