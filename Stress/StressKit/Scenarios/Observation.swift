// Scenario "observation": a third of the threads write a property, a third register
// Observation tracking scopes that read it, again and again, and a third subscribe to
// and cancel from a lazy event source.
//
// Invariants:
// - no commit is lost to a tracking scope: at every checkpoint and at the end, each
//   thread's latest scope whose read value is no longer the property's value has
//   fired (within two seconds), whichever thread wrote and whenever the scope
//   installed its tracking;
// - the lazy source's hooks never run concurrently, and alternate start, stop,
//   start, … (the count of observers crossed zero in that order);
// - at the end, with every subscription cancelled, the last hook was a stop and the
//   source counts no observer.

import Evented
import Observation
import Synchronization

/// One tracking scope: the value it read, and whether it fired.
private final class TrackedRead: Sendable {
  let read = Atomic<Int>(-1)
  let fired = Atomic<Bool>(false)
}

/// The lazy source's hooks, checked as they run.
private final class HookCheck: Sendable {
  let running = Atomic<Bool>(false)
  /// Starts minus stops so far: 1 while started.
  let started = Atomic<Int>(0)
  let hooks = Atomic<Int>(0)

  func hook(starting: Bool, _ run: ScenarioRun) {
    if running.exchange(true, ordering: .acquiringAndReleasing) {
      run.violation("lazy source: two hooks ran at once")
    }
    let now =
      starting
      ? started.add(1, ordering: .acquiringAndReleasing).newValue
      : started.subtract(1, ordering: .acquiringAndReleasing).newValue
    if now != (starting ? 1 : 0) {
      run.violation(
        "lazy source: a \(starting ? "start" : "stop") hook ran out of order (\(now) starts more than stops)")
    }
    hooks.add(1, ordering: .relaxed)
    running.store(false, ordering: .releasing)
  }
}

let observation = Scenario(
  name: "observation",
  summary: "writers, tracking scopes re-registered on other threads, churn on a lazy source; no lost notification",
  unavailable: nil
) { run in
  let value = Property(0)
  let check = HookCheck()
  let lazy = EventSource<Int>(
    onFirstObserver: { check.hook(starting: true, run) },
    onLastObserverGone: { check.hook(starting: false, run) })
  let latest = (0..<run.threads).map { _ in Guarded<TrackedRead?>(nil) }

  func noLostNotification(_ when: String) {
    for (thread, slot) in latest.enumerated() {
      guard let scope = slot.withLock({ $0 }) else { continue }
      if scope.read.load(ordering: .acquiring) == value.value { continue }
      if !run.eventually({ scope.fired.load(ordering: .acquiring) }) {
        run.violation(
          "\(when): thread \(thread)'s tracking scope read \(scope.read.load(ordering: .acquiring)), the value "
            + "is \(value.value), and the scope never fired")
      }
    }
  }

  run.work(workers: run.threads, round: 300_000_000, checkpoint: { noLostNotification("at a checkpoint") }) {
    worker in
    var held: [Subscription] = []
    while worker.proceed() {
      switch worker.index % 3 {
      case 0:
        worker.at(.modify)
        value.modify { $0 += 1 }
      case 1:
        worker.at(.read)
        let scope = TrackedRead()
        withObservationTracking {
          scope.read.store(value.value, ordering: .releasing)
        } onChange: {
          scope.fired.store(true, ordering: .releasing)
        }
        latest[worker.index].withLock { $0 = scope }
      default:
        if held.isEmpty || worker.thread.random.chance(50) {
          worker.at(.subscribe)
          held.append(lazy.observe { _ in ThreadState.current.count() })
        } else {
          worker.at(.cancel)
          held.removeLast().cancel()
        }
        if worker.thread.random.chance(10) {
          worker.at(.send)
          lazy.send(worker.index)
        }
      }
    }
    worker.at(.cancel)
    for subscription in held { subscription.cancel() }
  }

  noLostNotification("at the end")
  if !run.eventually({ check.started.load(ordering: .acquiring) == 0 && !check.running.load(ordering: .acquiring) }) {
    run.violation("lazy source: every subscription was cancelled, but the last hook was not a stop")
  }
  if lazy.observerCount != 0 {
    run.violation("lazy source: \(lazy.observerCount) observers left after every subscription was cancelled")
  }
}
