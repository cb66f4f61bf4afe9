// Scenario "cancel-race": subscriptions are cancelled from one thread while other
// threads send, write and deliver to them, synchronously or on a queue; one thread
// also ends whole rounds of subscriptions with `removeAllObservers()`.
//
// Invariants (cancellation is final):
// - after `cancel()` returns, the handler never starts again: the first statement of
//   every handler reads a flag set right after `cancel()` returned;
// - when `cancel()` returns, no invocation is still running on another thread: every
//   handler counts its starts and finishes, and the two must match when `cancel()`
//   returns; a running handler also watches the flag while it works.
//
// - the same for `removeAllObservers()`, including handlers whose subscription had
//   already ended while they ran (once-only handlers, handlers that cancelled
//   themselves) and with a subscribe between their start and the removal.
//
// Cancellers wait, at random, until the handler is running right now, so that most
// cancels land in the middle of an invocation on another thread.

import Dispatch
import Evented
import Synchronization

/// The start and finish counts of the handlers that one call ends (`cancel()` of one
/// subscription, or `removeAllObservers()` of a round), and whether that call returned.
private final class Probe: Sendable {
  let started = Atomic<Int>(0)
  let finished = Atomic<Int>(0)
  let returned = Atomic<Bool>(false)
  /// How long each invocation works, in spin steps.
  let work: Int
  /// The call that ends the handlers, for the messages.
  let call: String

  init(work: Int, call: String) {
    self.work = work
    self.call = call
  }

  func handle(_ run: ScenarioRun) {
    started.wrappingAdd(1, ordering: .acquiringAndReleasing)
    ThreadState.current.count()
    if returned.load(ordering: .acquiring) {
      run.violation("a handler started after \(call) had returned")
    }
    if spin(work, until: { returned.load(ordering: .acquiring) }) {
      run.violation("a handler was still running on another thread after \(call) had returned")
    }
    finished.wrappingAdd(1, ordering: .acquiringAndReleasing)
  }

  /// Marks the call returned and checks that no handler is running.
  func callReturned(_ run: ScenarioRun) {
    returned.store(true, ordering: .releasing)
    let started = started.load(ordering: .acquiring)
    let finished = finished.load(ordering: .acquiring)
    if started != finished {
      run.violation(
        "\(call) returned while a handler was running on another thread (\(started) started, \(finished) finished)")
    }
  }
}

/// The handle of a subscription whose handler cancels it.
private final class SelfCancelling: Sendable {
  let subscription = Guarded<Subscription?>(nil)

  func cancel() {
    subscription.withLock { $0 }?.cancel()
  }
}

/// Subscribes a round of handlers to `source` (plain, once-only and self-cancelling;
/// the last one always ends itself, so that it is at the end of the list when it
/// runs), waits (boundedly) until one runs, subscribes once more, and ends them all
/// with `removeAllObservers()`: when it returns, none may be running.
private func removalRound(_ source: EventSource<Int>, _ queue: DispatchQueue, _ worker: Worker, _ run: ScenarioRun) {
  var random = worker.thread.random
  let round = Probe(work: 2_000 + random.below(20_000), call: "removeAllObservers()")
  var handles: [Subscription] = []
  worker.at(.subscribe)
  let count = 1 + random.below(4)
  for index in 0..<count {
    let delivery: Delivery = random.chance(20) ? .queue(queue) : .synchronous
    switch index == count - 1 ? random.below(2) : random.below(3) {
    case 0:
      handles.append(source.observeOnce(on: delivery) { _ in round.handle(run) })
    case 1:
      let holder = SelfCancelling()
      let subscription = source.observe(on: delivery) { _ in
        holder.cancel()
        round.handle(run)
      }
      holder.subscription.withLock { $0 = subscription }
      handles.append(subscription)
    default:
      handles.append(source.observe(on: delivery) { _ in round.handle(run) })
    }
  }
  worker.thread.random = random
  _ = spin(200_000) { round.started.load(ordering: .acquiring) > round.finished.load(ordering: .acquiring) }
  // A subscribe between the handlers' start and the removal meets the ended ones.
  handles.append(source.observe { _ in round.handle(run) })
  worker.at(.removeAll)
  source.removeAllObservers()
  round.callReturned(run)
  worker.at(.dropOwner)
  handles.removeAll()
}

let cancelRace = Scenario(
  name: "cancel-race",
  summary: "cancel() races delivery on other threads; the handler never starts or runs after cancel() returns",
  unavailable: nil
) { run in
  let sources = [EventSource<Int>(), EventSource<Int>()]
  let property = Property(0, skipsDuplicates: false)
  // Only the remover (the first worker that is not a sender) subscribes here.
  let removal = EventSource<Int>()
  let queue = DispatchQueue(label: "stress.cancel-race", attributes: .concurrent)
  let senders = max(1, run.threads / 2)

  run.work(workers: run.threads) { worker in
    if worker.index < senders {
      var value = 0
      while worker.proceed() {
        value += 1
        let target = worker.thread.random.below(4)
        if target < 2 {
          worker.at(.send)
          sources[target].send(value)
        } else if target == 3 {
          worker.at(.send)
          removal.send(value)
        } else {
          worker.at(.write)
          property.value = value
        }
      }
      return
    }
    while worker.proceed() {
      if worker.index == senders, worker.thread.random.chance(30) {
        removalRound(removal, queue, worker, run)
        continue
      }
      var random = worker.thread.random
      let probe = Probe(work: 20 + random.below(400), call: "cancel()")
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
      probe.callReturned(run)
    }
  }
  let counts = [sources[0].observerCount, sources[1].observerCount, property.observerCount, removal.observerCount]
  if counts != [0, 0, 0, 0] { run.violation("subscriptions left after every one was cancelled: \(counts)") }
}
