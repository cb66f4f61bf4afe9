// The watchdog: one thread that watches the operation counts of the scenario in
// progress. If none moves for the allowed time, the scenario is deadlocked: it prints
// which threads stopped and where, and ends the process with status 2. On a terminal
// it also refreshes the live progress line.

import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Watches the scenario in progress for a lack of progress.
final class Watchdog: Sendable {
  private struct Watched {
    var run: ScenarioRun?
    var operationsBefore = 0
  }

  private let limit: UInt64
  private let output: Output
  private let watched = Guarded(Watched())
  private let finished = Atomic<Bool>(false)
  private let thread = Guarded<StartedThread?>(nil)

  private init(seconds: Double, output: Output) {
    limit = UInt64(seconds * 1e9)
    self.output = output
  }

  /// Starts a watchdog thread; `finish()` ends it.
  static func start(seconds: Double, output: Output) -> Watchdog {
    let dog = Watchdog(seconds: seconds, output: output)
    let thread = StartedThread { dog.loop() }
    dog.thread.withLock { $0 = thread }
    return dog
  }

  /// A number for a new scenario run, unique in the process.
  func nextRunID() -> Int {
    runIDs.wrappingAdd(1, ordering: .relaxed).newValue
  }

  /// Ends the watchdog thread and waits for it.
  func finish() {
    finished.store(true, ordering: .relaxed)
    thread.withLock { $0.take() }?.join()
  }

  /// Starts watching `run`; nil stops watching.
  func watch(_ run: ScenarioRun?, operationsBefore: Int) {
    watched.withLock {
      $0.run = run
      $0.operationsBefore = operationsBefore
    }
  }

  private func loop() {
    var lastTotal = -1
    var lastMove = now()
    var lastRunID = -1
    var counts: [Int: (count: Int, moved: UInt64)] = [:]
    var lastLive: UInt64 = 0
    while !finished.load(ordering: .relaxed) {
      pause(microseconds: 100_000)
      let (run, before) = watched.withLock { ($0.run, $0.operationsBefore) }
      guard let run else { continue }
      let states = allThreadStates.withLock { $0 }
      let time = now()
      var total = 0
      for state in states {
        let count = state.published.load(ordering: .relaxed)
        total += count
        if counts[state.id]?.count != count { counts[state.id] = (count, time) }
      }
      if run.id != lastRunID || total != lastTotal {
        lastRunID = run.id
        lastTotal = total
        lastMove = time
      }
      if time - lastLive > 250_000_000 {
        lastLive = time
        let report = ScenarioReport(
          name: run.name, operations: total - before, violations: run.violations,
          elapsed: Double(time - run.started) / 1e9, messages: [], skipped: nil)
        output.live(StressSuite.describe(report, live: true))
      }
      if time - lastMove > limit {
        stall(run, states: states, counts: counts, since: lastMove)
      }
    }
  }

  private func stall(
    _ run: ScenarioRun, states: [ThreadState], counts: [Int: (count: Int, moved: UInt64)], since: UInt64
  ) {
    var lines = [
      "",
      "evented-stress: watchdog: \(run.name) made no progress for \(format(Double(limit) / 1e9)) s: deadlock.",
      "  threads that stopped, and where:",
    ]
    for state in states {
      let site = Site(rawValue: state.site.load(ordering: .relaxed)) ?? .idle
      let name = state.name.load(ordering: .relaxed)
      let ours = state.run.load(ordering: .relaxed) == run.id
      guard ours || (name == -1 && site != .idle && site != .done) else { continue }
      guard site != .done, (counts[state.id]?.moved ?? 0) <= since else { continue }
      let label = name == -2 ? "coordinator" : name >= 0 ? "worker \(name)" : "handler thread \(state.id)"
      lines.append("    \(label): \(site.label)")
    }
    lines.append("  violations so far: \(run.violations)")
    for message in run.firstMessages { lines.append("    violation: \(message)") }
    output.alarm(lines.joined(separator: "\n"))
    _exit(2)
  }
}

private let runIDs = Atomic<Int>(0)
