// Scenario "owner-churn": owners are made, subscribed and released on different
// threads while other threads send and write without pause.
//
// Invariants:
// - a handler never runs for an owner whose deinit has begun (owners clear a flag in
//   deinit; the handler checks it);
// - a handler never starts after `cancel()` returned, and an `observeOnce` handler
//   runs at most once;
// - at every checkpoint, after one send, `observerCount` equals the subscriptions whose
//   owner (an object or the `Subscription` handle) is alive and that were not cancelled
//   (dead owners are purged), and the captured objects still alive equal
//   those live subscriptions (the handlers of ended subscriptions were released);
// - at the end, every owner and every captured object made was released.

import Dispatch
import Evented
import Synchronization

/// Counts of the objects made and released in one run.
private final class Tally: Sendable {
  let ownersMade = Atomic<Int>(0)
  let ownersFreed = Atomic<Int>(0)
  let capturesMade = Atomic<Int>(0)
  let capturesFreed = Atomic<Int>(0)
}

/// An owner that records its own death.
private final class ChurnOwner: Sendable {
  let alive = Atomic<Bool>(true)
  let tally: Tally

  init(_ tally: Tally) {
    self.tally = tally
    tally.ownersMade.wrappingAdd(1, ordering: .relaxed)
  }

  deinit {
    alive.store(false, ordering: .releasing)
    tally.ownersFreed.wrappingAdd(1, ordering: .relaxed)
  }
}

/// An object captured by a handler, to count handler releases.
private final class Capture: Sendable {
  let tally: Tally

  init(_ tally: Tally) {
    self.tally = tally
    tally.capturesMade.wrappingAdd(1, ordering: .relaxed)
  }

  deinit {
    tally.capturesFreed.wrappingAdd(1, ordering: .relaxed)
  }
}

/// What the scenario knows about one subscription.
private final class Tracked: Sendable {
  /// 0: the event source; 1: the property.
  let source: Int
  let isOnce: Bool
  let fired = Atomic<Int>(0)
  /// Set after `cancel()` returned.
  let ended = Atomic<Bool>(false)

  init(source: Int, isOnce: Bool) {
    self.source = source
    self.isOnce = isOnce
  }

  /// Whether the subscription should be counted by `observerCount`.
  var isLive: Bool {
    !ended.load(ordering: .acquiring) && !(isOnce && fired.load(ordering: .acquiring) > 0)
  }

  /// The checks every handler makes first.
  func enter(_ run: ScenarioRun) {
    ThreadState.current.count()
    if ended.load(ordering: .acquiring) {
      run.violation("a handler started after cancel() had returned")
    }
    if isOnce, fired.wrappingAdd(1, ordering: .relaxed).newValue > 1 {
      run.violation("an observeOnce handler ran twice")
    }
  }
}

/// A slot of the shared table: a subscription and whatever owns it.
private struct Held: Sendable {
  var owner: ChurnOwner?
  var subscription: Subscription
  let tracked: Tracked
}

let ownerChurn = Scenario(
  name: "owner-churn",
  summary: "owners subscribe and die on other threads while senders send; no handler for a dead owner, no leaks",
  unavailable: nil
) { run in
  let tally = Tally()
  let events = EventSource<Int>()
  let property = Property(0)
  let queue = DispatchQueue(label: "stress.owner-churn", attributes: .concurrent)
  let table = Guarded([Held?](repeating: nil, count: 256))

  /// Swaps `held` into a random slot; returns what was there, to release outside the lock.
  @Sendable func store(_ held: Held?, at slot: Int) -> Held? {
    table.withLock { slots in
      let old = slots[slot]
      slots[slot] = held
      return old
    }
  }

  /// Releases what a slot held; for an owner-less subscription, that ends it.
  ///
  /// Releasing a handle does not mark the subscription as ended for the handler's check:
  /// a handler that has just started holds the handle strongly (it is the owner), so the
  /// handle may outlive this release by an invocation. Dropped handles are checked by the
  /// counts instead: the subscription must be gone from `observerCount`.
  @Sendable func release(_ taken: consuming Held?) {
    guard let held = taken.take() else { return }
    ThreadState.current.at(.dropOwner)
    _ = consume held
  }

  @Sendable func subscribe(_ worker: Worker) -> Held {
    var random = worker.thread.random
    defer { worker.thread.random = random }
    let capture = Capture(tally)
    let onQueue = random.chance(25)
    let delivery: Delivery = onQueue ? .queue(queue) : .synchronous
    let toProperty = random.chance(30)
    let isOnce = !toProperty && !onQueue && random.chance(15)
    let tracked = Tracked(source: toProperty ? 1 : 0, isOnce: isOnce)
    worker.at(.subscribe)
    if random.chance(25) {
      // Owned by the returned handle.
      let subscription =
        toProperty
        ? property.observe(on: delivery) { _ in
          tracked.enter(run)
          withExtendedLifetime(capture) {}
        }
        : isOnce
          ? events.observeOnce(on: delivery) { _ in
            tracked.enter(run)
            withExtendedLifetime(capture) {}
          }
          : events.observe(on: delivery) { _ in
            tracked.enter(run)
            withExtendedLifetime(capture) {}
          }
      return Held(owner: nil, subscription: subscription, tracked: tracked)
    }
    let owner = ChurnOwner(tally)
    let handler: @Sendable (ChurnOwner, Int) -> Void = { owner, _ in
      tracked.enter(run)
      if !owner.alive.load(ordering: .acquiring) {
        run.violation("a handler ran for an owner whose deinit had begun")
      }
      withExtendedLifetime(capture) {}
    }
    let subscription =
      toProperty
      ? property.observe(with: owner, on: delivery, handler)
      : isOnce
        ? events.observeOnce(with: owner, on: delivery, handler)
        : events.observe(with: owner, on: delivery, handler)
    return Held(owner: owner, subscription: subscription, tracked: tracked)
  }

  /// One send to each source, then the counts at quiescence. After one failure, only
  /// the final check runs, so that a broken build fails fast.
  var failed = false
  func check(final: Bool) {
    if failed && !final { return }
    let settled = run.eventually {
      events.send(-1)
      property.modify { $0 += 1 }
      let live = table.withLock { slots in
        slots.reduce(into: [0, 0]) { counts, held in
          if let held, held.tracked.isLive { counts[held.tracked.source] += 1 }
        }
      }
      let owners = table.withLock { slots in slots.reduce(0) { $0 + ($1?.owner == nil ? 0 : 1) } }
      let counted = [events.observerCount, property.observerCount]
      let ownersAlive = tally.ownersMade.load(ordering: .relaxed) - tally.ownersFreed.load(ordering: .relaxed)
      let captures = tally.capturesMade.load(ordering: .relaxed) - tally.capturesFreed.load(ordering: .relaxed)
      return counted == live && ownersAlive == owners && captures == live[0] + live[1]
    }
    if !settled {
      failed = true
      let live = table.withLock { slots in
        slots.reduce(into: [0, 0]) { counts, held in
          if let held, held.tracked.isLive { counts[held.tracked.source] += 1 }
        }
      }
      let ownersAlive = tally.ownersMade.load(ordering: .relaxed) - tally.ownersFreed.load(ordering: .relaxed)
      let captures = tally.capturesMade.load(ordering: .relaxed) - tally.capturesFreed.load(ordering: .relaxed)
      run.violation(
        "\(final ? "at the end" : "at a checkpoint"), after a send: observerCount "
          + "\(events.observerCount)/\(property.observerCount), live subscriptions \(live[0])/\(live[1]); "
          + "owners alive \(ownersAlive); captured objects alive \(captures) for \(live[0] + live[1]) live subscriptions"
      )
    }
  }

  run.work(workers: run.threads, round: 250_000_000, checkpoint: { check(final: false) }) { worker in
    var value = 0
    while worker.proceed() {
      let roll = worker.thread.random.below(100)
      if roll < 45 {
        worker.at(.send)
        value += 1
        events.send(value)
      } else if roll < 55 {
        worker.at(.modify)
        property.modify { $0 += 1 }
      } else if roll < 78 {
        let held = subscribe(worker)
        release(store(held, at: worker.thread.random.below(256)))
      } else if roll < 95 {
        release(store(nil, at: worker.thread.random.below(256)))
      } else {
        let slot = worker.thread.random.below(256)
        guard let held = table.withLock({ $0[slot] }) else { continue }
        worker.at(.cancel)
        held.subscription.cancel()
        held.tracked.ended.store(true, ordering: .releasing)
      }
    }
  }

  // Drop everything, then everything made must be released.
  for slot in 0..<256 { release(store(nil, at: slot)) }
  check(final: true)
  let made = tally.ownersMade.load(ordering: .relaxed)
  let freed = tally.ownersFreed.load(ordering: .relaxed)
  if made != freed { run.violation("\(made - freed) of \(made) owners were never released") }
  let captured = tally.capturesMade.load(ordering: .relaxed)
  let released = tally.capturesFreed.load(ordering: .relaxed)
  if captured != released {
    run.violation("\(captured - released) of \(captured) captured objects were never released")
  }
}
