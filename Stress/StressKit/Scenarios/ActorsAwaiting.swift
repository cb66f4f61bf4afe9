// Part of scenario "actors": handlers that suspend. Eight sending tasks send to an
// `ActorEventSource` and increment an `ActorProperty`; each source has three handlers,
// one awaiting `Task.yield()`, one awaiting another actor, one running on the main
// actor. A suspended handler resumes on whatever thread the executor picks, so this is
// where a thread's identity read before an `await` and used after it shows (in release
// builds, where the optimizer may reuse it): the lock reports "locked twice", or two
// threads hold one lock.
//
// Invariants:
// - a handler never runs while it is already running (across its suspension);
// - each sender's events reach every event handler consecutively, and all of them;
// - the values a property handler receives only grow, and it ends on the final value.

import Evented
import Synchronization

/// Another actor for a handler to await.
private actor Elsewhere {
  var visits = 0

  func visit() {
    visits += 1
  }
}

/// How a handler suspends.
private enum Suspension: CaseIterable {
  case yield, otherActor, mainActor
}

/// Checks one suspending handler.
private final class AwaitingWatcher: @unchecked Sendable {
  // @unchecked Sendable: `seen` is touched only by the handler, whose invocations run
  // one at a time (`running` checks it); the rest is atomic.
  let run: ScenarioRun
  let running = Atomic<Bool>(false)
  /// The newest property value seen, or -1.
  let lastValue = Atomic<Int>(-1)
  /// Events received in all.
  let received = Atomic<Int>(0)
  private var seen: [Int]

  init(run: ScenarioRun, senders: Int) {
    self.run = run
    seen = Array(repeating: 0, count: senders)
  }

  func enter() {
    ThreadState.current.count()
    if running.exchange(true, ordering: .acquiringAndReleasing) {
      run.violation("actors: a suspending handler ran while already running")
    }
  }

  func leave() {
    running.store(false, ordering: .releasing)
  }

  func see(_ event: StormEvent) {
    let previous = seen[event.producer]
    if event.seq != previous + 1 {
      run.violation("actors: a suspending handler got sender \(event.producer)'s event \(event.seq) after \(previous)")
    }
    seen[event.producer] = event.seq
    received.wrappingAdd(1, ordering: .relaxed)
  }

  func see(_ value: Int) {
    let previous = lastValue.load(ordering: .relaxed)
    if value <= previous { run.violation("actors: a suspending handler got \(value) after \(previous)") }
    lastValue.store(value, ordering: .releasing)
  }
}

/// The suspending-handler part of the `actors` scenario, started beside the rest.
final class AwaitingHandlers: Sendable {
  static let senders = 8

  private let run: ScenarioRun
  private let events = ActorEventSource<StormEvent>()
  private let counter = ActorProperty(0)
  private let elsewhere = Elsewhere()
  private let eventWatchers: [AwaitingWatcher]
  private let valueWatchers: [AwaitingWatcher]
  private let subscriptions = Guarded<[Subscription]>([])
  private let stop = Atomic<Bool>(false)
  private let sendersRunning = Atomic<Int>(0)
  private let sent = Atomic<Int>(0)
  private let ready = Atomic<Int>(0)

  init(run: ScenarioRun) {
    self.run = run
    eventWatchers = Suspension.allCases.map { _ in AwaitingWatcher(run: run, senders: Self.senders) }
    valueWatchers = Suspension.allCases.map { _ in AwaitingWatcher(run: run, senders: Self.senders) }
  }

  /// Suspends as `suspension` says.
  private static func suspend(_ suspension: Suspension, _ elsewhere: Elsewhere) async {
    switch suspension {
    case .yield: await Task.yield()
    case .otherActor: await elsewhere.visit()
    case .mainActor: await MainActor.run {}
    }
  }

  /// Subscribes the handlers, then starts the senders.
  func start() {
    for (suspension, watcher) in zip(Suspension.allCases, eventWatchers) {
      subscribe(suspension, watcher) { [events] handler in
        await events.observe(handler)
      } see: {
        watcher.see($0)
      }
    }
    for (suspension, watcher) in zip(Suspension.allCases, valueWatchers) {
      subscribe(suspension, watcher) { [counter] handler in
        await counter.observe(handler)
      } see: {
        watcher.see($0)
      }
    }
    let handlers = 2 * Suspension.allCases.count
    if !run.eventually(within: 10, { ready.load(ordering: .acquiring) == handlers }) {
      run.violation("actors: the suspending handlers were not subscribed in time")
    }
    for sender in 0..<Self.senders {
      sendersRunning.wrappingAdd(1, ordering: .relaxed)
      Task.detached { [self] in
        var seq = 0
        while !stop.load(ordering: .relaxed) {
          for _ in 0..<4 {
            seq += 1
            await events.send(StormEvent(producer: sender, seq: seq, depth: 0))
          }
          await counter.modify { $0 += 1 }
          ThreadState.current.count(5)
        }
        sent.wrappingAdd(seq, ordering: .relaxed)
        sendersRunning.wrappingSubtract(1, ordering: .releasing)
      }
    }
  }

  /// Subscribes, with `observe`, a handler that suspends as `suspension` says, in a
  /// task of its own.
  private func subscribe<Message: Sendable>(
    _ suspension: Suspension, _ watcher: AwaitingWatcher,
    _ observe: @escaping @Sendable (@escaping @Sendable (Message) async -> Void) async -> Subscription,
    see: @escaping @Sendable (Message) -> Void
  ) {
    let elsewhere = elsewhere
    Task.detached { [self] in
      let subscription: Subscription
      if suspension == .mainActor {
        subscription = await observe { @MainActor message in
          watcher.enter()
          await Task.yield()
          see(message)
          watcher.leave()
        }
      } else {
        subscription = await observe { message in
          watcher.enter()
          await Self.suspend(suspension, elsewhere)
          see(message)
          watcher.leave()
        }
      }
      subscriptions.withLock { $0.append(subscription) }
      ready.wrappingAdd(1, ordering: .releasing)
    }
  }

  /// Stops the senders and checks that every handler received everything.
  func finish(value: (ActorProperty<Int>) -> Int?) {
    stop.store(true, ordering: .relaxed)
    if !run.eventually(within: 20, { sendersRunning.load(ordering: .acquiring) == 0 }) {
      run.violation("actors: suspending handlers' senders did not finish")
      return
    }
    let total = sent.load(ordering: .acquiring)
    for watcher in eventWatchers
    where !run.eventually(within: 20, { watcher.received.load(ordering: .acquiring) == total }) {
      run.violation(
        "actors: a suspending handler received \(watcher.received.load(ordering: .acquiring)) of \(total) events")
    }
    let final = value(counter) ?? -2
    for watcher in valueWatchers
    where !run.eventually(within: 20, { watcher.lastValue.load(ordering: .acquiring) == final }) {
      run.violation(
        "actors: a suspending handler ended on \(watcher.lastValue.load(ordering: .acquiring)), the value is \(final)")
    }
    for subscription in subscriptions.withLock({ $0 }) { subscription.cancel() }
  }
}
