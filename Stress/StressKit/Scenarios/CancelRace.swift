// Scenario "cancel-race": subscriptions are cancelled from one thread while other
// threads send, write and deliver to them, synchronously or on a queue.
//
// Invariants (cancellation is final):
// - after `cancel()` returns, the handler never starts again: the first statement of
//   every handler reads a flag set right after `cancel()` returned;
// - when `cancel()` returns, no invocation is still running on another thread: every
//   handler counts its starts and finishes, and the two must match when `cancel()`
//   returns; a running handler also watches the flag while it works.
//
// Cancellers wait, at random, until the handler is running right now, so that most
// cancels land in the middle of an invocation on another thread.

import Dispatch
import Evented
import Synchronization

/// One subscription's start and finish counts.
private final class Probe: Sendable {
  let started = Atomic<Int>(0)
  let finished = Atomic<Int>(0)
  let cancelReturned = Atomic<Bool>(false)
  /// How long each invocation works, in spin steps.
  let work: Int

  init(work: Int) {
    self.work = work
  }

  func handle(_ run: ScenarioRun) {
    started.wrappingAdd(1, ordering: .acquiringAndReleasing)
    ThreadState.current.count()
    if cancelReturned.load(ordering: .acquiring) {
      run.violation("a handler started after cancel() had returned")
    }
    if spin(work, until: { cancelReturned.load(ordering: .acquiring) }) {
      run.violation("a handler was still running on another thread after cancel() had returned")
    }
    finished.wrappingAdd(1, ordering: .acquiringAndReleasing)
  }
}

let cancelRace = Scenario(
  name: "cancel-race",
  summary: "cancel() races delivery on other threads; the handler never starts or runs after cancel() returns",
  unavailable: nil
) { run in
  let sources = [EventSource<Int>(), EventSource<Int>()]
  let property = Property(0, skipsDuplicates: false)
  let queue = DispatchQueue(label: "stress.cancel-race", attributes: .concurrent)
  let senders = max(1, run.threads / 2)

  run.work(workers: run.threads) { worker in
    if worker.index < senders {
      var value = 0
      while worker.proceed() {
        value += 1
        let target = worker.thread.random.below(3)
        if target < 2 {
          worker.at(.send)
          sources[target].send(value)
        } else {
          worker.at(.write)
          property.value = value
        }
      }
      return
    }
    while worker.proceed() {
      var random = worker.thread.random
      let probe = Probe(work: 20 + random.below(400))
      let delivery: Delivery = random.chance(20) ? .queue(queue) : .synchronous
      let target = random.below(3)
      let mode = random.below(4)
      worker.thread.random = random
      worker.at(.subscribe)
      let subscription =
        target < 2
        ? sources[target].observe(on: delivery) { _ in probe.handle(run) }
        : property.observeChanges(on: delivery) { _ in probe.handle(run) }
      // Wait (boundedly) for the moment to cancel: while the handler runs, after a few
      // invocations, or at once.
      switch mode {
      case 0, 1:
        _ = spin(200_000) { probe.started.load(ordering: .acquiring) > probe.finished.load(ordering: .acquiring) }
      case 2:
        _ = spin(200_000) { probe.started.load(ordering: .acquiring) >= 3 }
      default:
        break
      }
      worker.at(.cancel)
      subscription.cancel()
      probe.cancelReturned.store(true, ordering: .releasing)
      let started = probe.started.load(ordering: .acquiring)
      let finished = probe.finished.load(ordering: .acquiring)
      if started != finished {
        run.violation(
          "cancel() returned while the handler was running on another thread (\(started) started, \(finished) finished)"
        )
      }
    }
  }
  let counts = [sources[0].observerCount, sources[1].observerCount, property.observerCount]
  if counts != [0, 0, 0] { run.violation("subscriptions left after every one was cancelled: \(counts)") }
}
