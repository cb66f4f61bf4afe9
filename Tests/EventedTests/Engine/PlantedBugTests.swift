// Cancellation is final, and the handlers of dead owners are released, even when the
// deliveries race. These are the tests that a planted bug must make fail: each plants
// the bug named by `EVENTED_PROBE_PLANT`, if set, so that a run with it shows the test
// failing. Every test passes on correct code; none sleeps to decide its result.

import Dispatch
import Foundation
import Synchronization
import Testing

#if FaultInjection
  @_spi(FaultInjection) @testable import Evented
#else
  @testable import Evented
#endif

/// Plants the bug named by `EVENTED_PROBE_PLANT` (a `FaultInjection.Bug` raw value),
/// to check that these tests fail on a broken promise. Unset in normal runs.
private func plantFromEnvironment() {
  #if FaultInjection
    if let raw = ProcessInfo.processInfo.environment["EVENTED_PROBE_PLANT"], let value = UInt8(raw) {
      FaultInjection.planted = FaultInjection.Bug(rawValue: value)
    }
  #endif
}

@Suite struct PlantedBugTests {
  // MARK: - Cancellation is final, and releases the handler before it returns

  /// Sender thread delivers continuously; another thread cancels at a random moment.
  /// After `cancel()` returns, no invocation may start, and the capture must already be
  /// released (the canceller waited for the running invocation, then released it).
  private func cancelRace(delivery: Delivery, owned: Bool, rounds: Int) {
    plantFromEnvironment()
    for round in 0..<rounds {
      let source = EventSource<Int>()
      let live = LiveCount()
      let cancelled = Atomic<Bool>(false)
      let lateStarts = Counter()
      let calls = Counter()
      let stop = Atomic<Bool>(false)
      let owner = Owner()
      let subscription: Subscription
      do {
        let tracked = Tracked(live)
        let handler: @Sendable (Int) -> Void = { _ in
          if cancelled.load(ordering: .acquiring) { lateStarts.increment() }
          withExtendedLifetime(tracked) {}
          // Stay a moment, so that cancel() often meets a running invocation.
          var spin = 0
          for _ in 0..<(round % 7) * 50 { spin &+= 1 }
          calls.increment()
        }
        if owned {
          subscription = source.observe(with: owner, on: delivery) { _, event in handler(event) }
        } else {
          subscription = source.observe(on: delivery, handler)
        }
      }
      let sender = Spawned {
        var event = 0
        while !stop.load(ordering: .relaxed) {
          source.send(event)
          event += 1
        }
      }
      let target = round % 5
      #expect(calls.wait(timeout: generousTimeout) { $0 >= target })
      let releasedAtReturn = Atomic<Int>(-1)
      let canceller = Spawned {
        subscription.cancel()
        cancelled.store(true, ordering: .releasing)
        releasedAtReturn.store(live.value, ordering: .releasing)
      }
      #expect(canceller.join())
      // Let a few more sends pass after the cancel.
      let after = calls.value
      for event in 0..<50 { source.send(-event) }
      stop.store(true, ordering: .relaxed)
      #expect(sender.join())
      if let queue = delivery.queue {
        let drained = Gate()
        queue.async(flags: .barrier) { drained.open() }
        #expect(drained.wait())
      }
      #expect(lateStarts.value == 0, "an invocation started after cancel() returned (round \(round))")
      #expect(calls.value == after, "handler called after cancel() returned (round \(round))")
      if delivery.queue == nil {
        // For an inline handler, cancel() waits for the running invocation and then
        // releases the handler itself: the capture is gone when it returns.
        #expect(releasedAtReturn.load(ordering: .acquiring) == 0, "capture alive when cancel() returned")
      }
      #expect(live.wait(for: 0), "capture never released")
      #expect(!subscription.isActive)
      withExtendedLifetime(owner) {}
    }
  }

  @Test func cancelRacingAnInlineDeliveryOfAHandleIsFinal() {
    cancelRace(delivery: .synchronous, owned: false, rounds: 150)
  }

  @Test func cancelRacingAnInlineDeliveryOfAnOwnedSubscriptionIsFinal() {
    cancelRace(delivery: .synchronous, owned: true, rounds: 150)
  }

  @Test func cancelRacingAQueueDeliveryOfAHandleIsFinal() {
    cancelRace(delivery: .queue(DispatchQueue(label: "probe-q1")), owned: false, rounds: 80)
  }

  @Test func cancelRacingAQueueDeliveryOfAnOwnedSubscriptionIsFinal() {
    cancelRace(delivery: .queue(DispatchQueue(label: "probe-q2", attributes: .concurrent)), owned: true, rounds: 80)
  }

  // MARK: - A handle dropped while its entry is mid-delivery on another thread

  /// The handle is the only thing keeping an owner-less subscription (besides the
  /// source's listing). Dropping it on one thread while the handler runs on another must
  /// wait for the invocation, never call it again, and release the capture once.
  @Test(arguments: [false, true]) func droppingTheLastHandleWaitsForItsRunningHandlerAndEndsIt(viaQueue: Bool) {
    plantFromEnvironment()
    let source = EventSource<Int>()
    let live = LiveCount()
    let entered = Gate()
    let go = Gate()
    let calls = Counter()
    let box = SubscriptionBox()
    let queue = DispatchQueue(label: "probe-drop")
    do {
      let tracked = Tracked(live)
      box.subscription = source.observe(on: viaQueue ? .queue(queue) : .synchronous) { event in
        withExtendedLifetime(tracked) {}
        calls.increment()
        if event == 1 {
          entered.open()
          _ = go.wait()
        }
      }
    }
    let sender = Spawned { source.send(1) }
    #expect(entered.wait())
    let aboutToDrop = Gate()
    let dropped = Gate()
    let dropper = Spawned {
      aboutToDrop.open()
      box.subscription = nil  // the last reference to the handle: its deinit cancels
      dropped.open()
    }
    #expect(aboutToDrop.wait())
    // The drop must wait for the running invocation: it must not finish meanwhile.
    #expect(!dropped.wait(timeout: .milliseconds(300)), "the handle's deinit returned while its handler ran")
    go.open()
    #expect(dropper.join())
    #expect(sender.join())
    // No reference to the subscription is left but the source's listing: it must not run.
    for event in 2...20 { source.send(event) }
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(calls.value == 1)
    #expect(live.wait(for: 0))
    #expect(source.observerCount == 0)
  }

  // MARK: - The handlers of dead owners

  @Test func nextSendReleasesTheHandlersOfDeadOwners() {
    plantFromEnvironment()
    let source = EventSource<Int>()
    let live = LiveCount()
    var owners: [Owner] = (0..<50).map { _ in Owner() }
    var handles: [Subscription] = []
    for owner in owners {
      let tracked = Tracked(live)
      handles.append(
        source.observe(with: owner) { _, _ in
          withExtendedLifetime(tracked) {}
        })
    }
    owners.removeAll()
    for handle in handles { #expect(!handle.isActive) }
    #expect(live.value == 50)
    source.send(1)
    #expect(live.value == 0, "captures of dead owners kept after the next send: \(live.value)")
    #expect(slotCount(source.hub) == 0)
  }
}
