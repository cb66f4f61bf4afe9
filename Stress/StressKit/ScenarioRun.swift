// One scenario's run: its time budget, the violations it found, and the worker
// threads that drive it, with checkpoints where every worker is parked so that the
// coordinator can check invariants at quiescence.
//
// Workers call `Worker.proceed()` between operations. The checkpoint barrier is a
// generation counter: the coordinator makes it odd to ask workers to park, waits until
// all have arrived, checks, then resets the arrivals and makes it even again.

import Synchronization

/// A scenario in progress. Scenarios report broken invariants with `violation(_:)`.
public final class ScenarioRun: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is atomic or guarded.
  /// A number that identifies this run to the watchdog.
  let id: Int
  /// The scenario's name.
  public let name: String
  /// How many worker threads to start.
  let threads: Int
  /// The time budget, in nanoseconds.
  let budget: UInt64
  /// The seed, for scenarios that want their own generators.
  let seed: UInt64
  /// When the run started (monotonic nanoseconds).
  let started = now()

  let violationCount = Atomic<Int>(0)
  private let messages = Guarded<[String]>([])
  private let stopping = Atomic<Bool>(false)
  private let generation = Atomic<Int>(0)
  private let arrived = Atomic<Int>(0)

  init(id: Int, name: String, threads: Int, budget: UInt64, seed: UInt64) {
    self.id = id
    self.name = name
    self.threads = threads
    self.budget = budget
    self.seed = seed
  }

  /// The number of violations found so far.
  public var violations: Int { violationCount.load(ordering: .relaxed) }

  /// The first few violation messages.
  public var firstMessages: [String] { messages.withLock { $0 } }

  /// Records a broken invariant. Keeps the first few messages.
  func violation(_ message: @autoclosure () -> String) {
    let n = violationCount.wrappingAdd(1, ordering: .relaxed).newValue
    if n <= 5 {
      let text = message()
      messages.withLock { $0.append(text) }
    }
  }

  /// Whether the budget is spent.
  var isOver: Bool { now() - started >= budget }

  /// Marks the calling thread as this run's coordinator for the watchdog.
  func coordinate(_ site: Site) {
    let me = ThreadState.current
    me.name.store(-2, ordering: .relaxed)
    me.run.store(id, ordering: .relaxed)
    me.at(site)
    me.count()
    me.flush()
  }

  /// Starts `count` workers running `body`, and runs checkpoints every `round`
  /// nanoseconds until the budget is spent; then stops and joins the workers.
  ///
  /// `body` loops `while worker.proceed() { … }`. `checkpoint` runs on the calling
  /// thread while every worker is parked between two operations.
  func work(
    workers count: Int,
    round: UInt64? = nil,
    checkpoint: () -> Void = {},
    _ body: @escaping @Sendable (Worker) -> Void
  ) {
    stopping.store(false, ordering: .relaxed)
    let threads = (0..<count).map { index in
      StartedThread { [self] in
        let worker = Worker(index: index, run: self)
        body(worker)
        worker.thread.flush()
        worker.thread.at(.done)
      }
    }
    let end = started + budget
    var nextRound = round.map { now() + $0 }
    while now() < end {
      coordinate(.idle)
      pause(microseconds: 2_000)
      if let due = nextRound, now() >= due, now() + 50_000_000 < end {
        park(count)
        coordinate(.check)
        checkpoint()
        resume()
        nextRound = round.map { now() + $0 }
      }
    }
    stopping.store(true, ordering: .relaxed)
    coordinate(.join)
    for thread in threads { thread.join() }
    coordinate(.check)
  }

  private func park(_ count: Int) {
    coordinate(.barrier)
    generation.wrappingAdd(1, ordering: .acquiringAndReleasing)
    while arrived.load(ordering: .acquiring) < count { pause(microseconds: 100) }
  }

  private func resume() {
    arrived.store(0, ordering: .relaxed)
    generation.wrappingAdd(1, ordering: .acquiringAndReleasing)
  }

  fileprivate func proceed(_ thread: ThreadState) -> Bool {
    let parked = generation.load(ordering: .acquiring)
    if parked & 1 == 1 {
      thread.flush()
      thread.at(.barrier)
      arrived.wrappingAdd(1, ordering: .acquiringAndReleasing)
      while generation.load(ordering: .acquiring) == parked { pause(microseconds: 50) }
    }
    thread.at(.idle)
    return !stopping.load(ordering: .relaxed)
  }

  /// Polls `condition` until it holds or `seconds` pass, counting progress meanwhile.
  ///
  /// - Returns: whether it held.
  func eventually(within seconds: Double = 2, _ condition: () -> Bool) -> Bool {
    let limit = now() + UInt64(seconds * 1e9)
    while true {
      coordinate(.check)
      if condition() { return true }
      if now() > limit { return false }
      pause(microseconds: 1_000)
    }
  }
}

/// One worker thread of a scenario run.
final class Worker {
  let index: Int
  let run: ScenarioRun
  let thread: ThreadState

  init(index: Int, run: ScenarioRun) {
    self.index = index
    self.run = run
    thread = ThreadState.current
    thread.name.store(index, ordering: .relaxed)
    thread.run.store(run.id, ordering: .relaxed)
    thread.random = Random(seed: run.seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
  }

  /// Parks at a checkpoint if one is due; returns false when the run is stopping.
  @inline(__always)
  func proceed() -> Bool {
    run.proceed(thread)
  }

  /// Records what this worker is about to do, and counts it as an operation.
  @inline(__always)
  func at(_ site: Site) {
    thread.at(site)
    thread.count()
  }
}
