// Scenario "actors": writer tasks `modify` an `ActorProperty` and send to an
// `ActorEventSource`, while other tasks subscribe async handlers (with owners or
// owner-less), iterate `values`, cancel and drop owners at random. Beside them, eight
// senders feed handlers that suspend (ActorsAwaiting.swift, with its own invariants).
//
// Invariants:
// - each handler subscription sees the counter's commits in order (every write
//   increments it; a handler behind the writes skips to the newest), changes slide and
//   are never from x to x, and each writer's events arrive consecutively (nothing lost,
//   nothing reordered);
// - no invocation begins after `cancel()` returned (one that began before may reach
//   its first statement after it, since cancel does not wait for an async handler),
//   a handler never runs for an owner whose deinit has begun, and never runs while it
//   is already running;
// - `values` only grows, and the long-running `values` consumers and handler
//   subscriptions end on the latest value when writers stop;
// - once everything is cancelled and every owner released, `observerCount` is zero.

import Evented
import Synchronization

/// An owner that records its own death.
private final class ActorOwner: Sendable {
  let alive = Atomic<Bool>(true)

  deinit {
    alive.store(false, ordering: .releasing)
  }
}

/// Checks one async handler subscription.
private final class ActorWatcher: @unchecked Sendable {
  // @unchecked Sendable: `seen` is touched only by the handler, whose invocations run
  // one at a time (`inHandler` checks it); the rest is atomic.
  let run: ScenarioRun
  let cancelled = Atomic<Bool>(false)
  /// Handler entries seen after `cancel()` returned: at most the one already begun.
  let entriesAfterCancel = Atomic<Int>(0)
  let inHandler = Atomic<Bool>(false)
  /// The last commit seen, or -1.
  let last = Atomic<Int>(-1)
  /// Each writer's last sequence number seen.
  private var seen: [Int]

  init(run: ScenarioRun, writers: Int) {
    self.run = run
    seen = Array(repeating: 0, count: writers)
  }

  private func enter() {
    ThreadState.current.count()
    // An async handler that began before cancel() may reach its first statement after
    // cancel() returned (cancel does not wait for async handlers); no second one may.
    if cancelled.load(ordering: .acquiring), entriesAfterCancel.add(1, ordering: .relaxed).newValue > 1 {
      run.violation("actors: a handler started after cancel() had returned")
    }
    if inHandler.exchange(true, ordering: .acquiringAndReleasing) {
      run.violation("actors: a handler ran while already running")
    }
  }

  private func leave() {
    inHandler.store(false, ordering: .releasing)
  }

  func see(_ value: Int) {
    enter()
    // State: a handler behind the writes skips to the newest value, never back.
    let previous = last.load(ordering: .relaxed)
    if value <= previous { run.violation("actors: saw commit \(value) after \(previous)") }
    last.store(value, ordering: .releasing)
    leave()
  }

  func see(_ change: Change<Int>) {
    enter()
    let previous = last.load(ordering: .relaxed)
    if change.oldValue == change.newValue { run.violation("actors: received a change from x to x") }
    if change.newValue <= change.oldValue { run.violation("actors: a change reverses commits") }
    if previous >= 0 && change.oldValue != previous { run.violation("actors: a change does not slide") }
    last.store(change.newValue, ordering: .releasing)
    leave()
  }

  func see(_ event: StormEvent) {
    enter()
    let previous = seen[event.producer]
    if previous != 0 && event.seq != previous + 1 {
      run.violation("actors: writer \(event.producer)'s event \(event.seq) arrived after \(previous)")
    }
    seen[event.producer] = event.seq
    leave()
  }
}

/// Flags and counts shared by the scenario's tasks.
private final class Shared: Sendable {
  let stop = Atomic<Bool>(false)
  let tasksRunning = Atomic<Int>(0)
  let valuesLast = Atomic<Int>(-1)
}

let actors = Scenario(
  name: "actors",
  summary: "ActorProperty and ActorEventSource under writer tasks and churning async handlers",
  unavailable: nil
) { run in
  let counter = ActorProperty(0)
  let events = ActorEventSource<StormEvent>()
  let shared = Shared()
  let writerCount = max(2, run.threads / 2)
  let steadyOwner = ActorOwner()
  let steady = ActorWatcher(run: run, writers: writerCount)

  @Sendable func spawn(_ body: @escaping @Sendable () async -> Void) {
    shared.tasksRunning.wrappingAdd(1, ordering: .relaxed)
    Task.detached {
      await body()
      shared.tasksRunning.wrappingSubtract(1, ordering: .relaxed)
    }
  }

  // Writers.
  for writer in 0..<writerCount {
    spawn {
      var seq = 0
      while !shared.stop.load(ordering: .relaxed) {
        await counter.modify { $0 += 1 }
        seq += 1
        await events.send(StormEvent(producer: writer, seq: seq, depth: 0))
        ThreadState.current.count(2)
      }
    }
  }
  // Steady subscriptions that must converge: a handler and a values consumer.
  let steadySubscription = Guarded<Subscription?>(nil)
  spawn {
    let subscription = await counter.observe(with: steadyOwner) { _, value in steady.see(value) }
    steadySubscription.withLock { $0 = subscription }
  }
  let consumer = Task.detached {
    for await value in await counter.values {
      ThreadState.current.count()
      let previous = shared.valuesLast.load(ordering: .relaxed)
      if value <= previous { run.violation("actors: values went from \(previous) to \(value)") }
      shared.valuesLast.store(value, ordering: .releasing)
    }
  }
  // Churners: subscribe, let it run a little, then cancel or drop the owner.
  for _ in 0..<max(1, run.threads - writerCount) {
    spawn {
      var random = Random(seed: run.seed &+ UInt64(shared.tasksRunning.load(ordering: .relaxed)))
      while !shared.stop.load(ordering: .relaxed) {
        let watcher = ActorWatcher(run: run, writers: writerCount)
        var owner: ActorOwner? = ActorOwner()
        let subscription: Subscription
        switch random.below(4) {
        case 0:
          subscription = await counter.observe { watcher.see($0) }
        case 1:
          subscription = await counter.observeChanges { watcher.see($0) }
        case 2:
          subscription = await events.observe { watcher.see($0) }
        default:
          subscription = await events.observe(with: owner!) { owner, event in
            if !owner.alive.load(ordering: .acquiring) {
              run.violation("actors: a handler ran for an owner whose deinit had begun")
            }
            watcher.see(event)
          }
        }
        ThreadState.current.count()
        for _ in 0..<random.below(20) { await Task.yield() }
        if random.chance(70) {
          subscription.cancel()
          watcher.cancelled.store(true, ordering: .releasing)
        } else {
          owner = nil  // ends an owned subscription; an owner-less one ends with its handle
        }
        withExtendedLifetime(owner) {}
      }
    }
  }

  // Handlers that suspend, beside the rest (ActorsAwaiting.swift).
  let awaiting = AwaitingHandlers(run: run)
  awaiting.start()

  run.work(workers: 0) { _ in }
  shared.stop.store(true, ordering: .relaxed)
  if !run.eventually(within: 10, { shared.tasksRunning.load(ordering: .relaxed) == 0 }) {
    run.violation("actors: writer or churn tasks did not finish")
  }

  /// Runs `body` in a task and waits for its result.
  func blockingResult<Result: Sendable>(_ body: @escaping @Sendable () async -> Result) -> Result? {
    let result = Guarded<Result?>(nil)
    Task.detached {
      let value = await body()
      result.withLock { $0 = value }
    }
    _ = run.eventually { result.withLock { $0 != nil } }
    return result.withLock { $0 }
  }

  awaiting.finish { property in blockingResult { await property.value } }
  let value = blockingResult { await counter.value } ?? -2
  if !run.eventually(within: 5, { steady.last.load(ordering: .acquiring) == value }) {
    run.violation("actors: a handler ended on \(steady.last.load(ordering: .acquiring)), the value is \(value)")
  }
  if !run.eventually(within: 5, { shared.valuesLast.load(ordering: .acquiring) == value }) {
    run.violation(
      "actors: a values consumer ended on \(shared.valuesLast.load(ordering: .acquiring)), the value is \(value)")
  }
  consumer.cancel()
  steadySubscription.withLock { $0 }?.cancel()
  let left = run.eventually {
    (blockingResult { await counter.observerCount + events.observerCount } ?? -1) == 0
  }
  if !left { run.violation("actors: subscriptions left after everything was cancelled") }
  withExtendedLifetime(steadyOwner) {}
}
