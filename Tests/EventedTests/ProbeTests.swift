// Adversarial probes of the single-entry subscriptions and lazy removal: cancel racing deliveries, handles dropped mid-delivery, sources that die
// with deliveries pending, once-only handlers under concurrent senders, and whether
// ended subscriptions that stay listed are ever removed. Every test passes on correct
// code and fails if a promise breaks; none sleeps to decide its result.

import Dispatch
import Foundation
import Synchronization
import Testing

#if FaultInjection
  @_spi(FaultInjection) @testable import Evented
#else
  @testable import Evented
#endif

/// The number of slots (live, ended-but-listed and tombstones) of a lock-based hub.
private func slotCount<M, S>(_ hub: Hub<M, S>) -> Int {
  hub.storage.withLock { $0.subscribers.slots.count }
}

/// Plants the bug named by `EVENTED_PROBE_PLANT` (a `FaultInjection.Bug` raw value),
/// to check that the probes fail on a broken promise. Unset in normal runs.
private func plantFromEnvironment() {
  #if FaultInjection
    if let raw = ProcessInfo.processInfo.environment["EVENTED_PROBE_PLANT"], let value = UInt8(raw) {
      FaultInjection.planted = FaultInjection.Bug(rawValue: value)
    }
  #endif
}

/// A weak reference to a derived node.
private final class WeakNode: @unchecked Sendable {
  weak var value: AnyObject?
  init(_ value: AnyObject?) { self.value = value }
}

@Suite struct ProbeTests {
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

  @Test func probeCancelRacingInlineDeliveryHandle() {
    cancelRace(delivery: .synchronous, owned: false, rounds: 150)
  }

  @Test func probeCancelRacingInlineDeliveryOwned() {
    cancelRace(delivery: .synchronous, owned: true, rounds: 150)
  }

  @Test func probeCancelRacingQueueDeliveryHandle() {
    cancelRace(delivery: .queue(DispatchQueue(label: "probe-q1")), owned: false, rounds: 80)
  }

  @Test func probeCancelRacingQueueDeliveryOwned() {
    cancelRace(delivery: .queue(DispatchQueue(label: "probe-q2", attributes: .concurrent)), owned: true, rounds: 80)
  }

  // MARK: - A handle dropped while its entry is mid-delivery on another thread

  /// The handle is the only thing keeping an owner-less subscription (besides the
  /// source's listing). Dropping it on one thread while the handler runs on another must
  /// wait for the invocation, never call it again, and release the capture once.
  @Test(arguments: [false, true]) func probeHandleDroppedMidInlineDelivery(viaQueue: Bool) {
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

  /// The handler drops its own (last) handle while it runs: in an inline pass, a queued
  /// delivery and a property's replay delivered by another thread's drain. The entry is
  /// then kept alive only by what the delivery holds; it must finish cleanly, release
  /// the capture once, and never run again.
  @Test func probeHandleDroppedFromInsideItsOwnHandler() {
    for mode in 0..<3 {
      let property = Property(0)
      let live = LiveCount()
      let calls = Counter()
      let box = SubscriptionBox()
      let queue = DispatchQueue(label: "probe-self-drop")
      do {
        let tracked = Tracked(live)
        let delivery: Delivery = mode == 1 ? .queue(queue) : .synchronous
        box.subscription = property.observeChanges(on: delivery) { _ in
          withExtendedLifetime(tracked) {}
          calls.increment()
          box.subscription = nil
        }
      }
      property.value = 1
      let drained = Gate()
      queue.async { drained.open() }
      #expect(drained.wait())
      #expect(calls.value == 1)
      #expect(live.wait(for: 0))
      property.value = 2
      property.value = 3
      #expect(calls.value == 1)
      #expect(property.observerCount == 0)
    }
    // Replay delivered by another thread's drain loop, to a handle dropped at once.
    let property = Property(0)
    let entered = Gate()
    let go = Gate()
    let keeper = property.observeChanges { change in
      if change.newValue == 1 {
        entered.open()
        _ = go.wait()
      }
    }
    let writer = Spawned { property.value = 1 }
    #expect(entered.wait())
    let live = LiveCount()
    let calls = Counter()
    do {
      let tracked = Tracked(live)
      // Queued behind the running pass: the replay is delivered by the writer thread.
      let handle = property.observe { _ in
        withExtendedLifetime(tracked) {}
        calls.increment()
      }
      _ = handle
    }
    // The handle is gone: the queued replay must not run.
    go.open()
    #expect(writer.join())
    property.value = 2
    #expect(calls.value == 0, "a replay ran for a subscription whose handle was dropped before it")
    #expect(live.wait(for: 0))
    withExtendedLifetime(keeper) {}
  }

  // MARK: - The source deinitialized with deliveries pending or running

  @Test func probeQueuedDeliveriesOfADeadSourceNeverRun() {
    let queue = DispatchQueue(label: "probe-dead-source")
    let blocker = Gate()
    queue.async { _ = blocker.wait() }
    let live = LiveCount()
    let calls = Counter()
    let owner = Owner()
    var source: EventSource<Int>? = EventSource<Int>()
    var property: Property<Int>? = Property(0)
    let handles: [Subscription]
    do {
      let tracked = Tracked(live)
      let handler: @Sendable (Int) -> Void = { _ in
        withExtendedLifetime(tracked) {}
        calls.increment()
      }
      handles = [
        source!.observe(on: .queue(queue), handler),
        source!.observe(with: owner, on: .queue(queue)) { _, event in handler(event) },
        source!.observeOnce(on: .queue(queue), handler),
        property!.observe(on: .queue(queue), handler),  // its replay is queued too
        property!.observeChanges(with: owner, on: .queue(queue)) { _, change in handler(change.newValue) },
      ]
    }
    for event in 1...5 {
      source!.send(event)
      property!.value = event
    }
    source = nil
    property = nil
    for (index, handle) in handles.enumerated() {
      #expect(!handle.isActive, "subscription \(index) active after its source is gone")
    }
    // Nothing ran (the queue is blocked), so the sources' deinit released every handler.
    #expect(live.value == 0, "captures kept after the source was deinitialized")
    blocker.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(calls.value == 0, "a source that is gone delivered")
    for handle in handles { handle.cancel() }
    withExtendedLifetime(owner) {}
  }

  @Test func probeSourceDeinitWhileHandlerRunsOnQueue() {
    let queue = DispatchQueue(label: "probe-running")
    let entered = Gate()
    let go = Gate()
    let live = LiveCount()
    let calls = Counter()
    var source: EventSource<Int>? = EventSource<Int>()
    let handle: Subscription
    do {
      let tracked = Tracked(live)
      handle = source!.observe(on: .queue(queue)) { event in
        withExtendedLifetime(tracked) {}
        calls.increment()
        if event == 1 {
          entered.open()
          _ = go.wait()
        }
      }
    }
    source!.send(1)
    source!.send(2)
    #expect(entered.wait())
    source = nil
    #expect(!handle.isActive)
    // Running on the queue: the runner releases it when it returns.
    #expect(live.value == 1)
    go.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(calls.value == 1)
    #expect(live.wait(for: 0))
    handle.cancel()  // safe and idempotent after the source is gone
    #expect(!handle.isActive)
  }

  @Test func probeIsActiveAfterSourceGone() {
    let owner = Owner()
    var source: EventSource<Int>? = EventSource<Int>()
    var property: Property<Int>? = Property(0)
    var array: ArrayProperty<Int>? = ArrayProperty([1])
    let handles = [
      source!.observe { _ in },
      source!.observe(with: owner) { _, _ in },
      source!.observeOnce { _ in },
      source!.observeOnce(with: owner) { _, _ in },
      property!.observe { _ in },
      property!.observe(with: owner) { _, _ in },
      property!.observeChanges { _ in },
      property!.observeOnce { _ in },
      array!.observe { _ in },
      array!.observeChanges(with: owner) { _, _ in },
    ]
    for handle in handles { #expect(handle.isActive) }
    source = nil
    property = nil
    array = nil
    for (index, handle) in handles.enumerated() {
      #expect(!handle.isActive, "handle \(index) active after its source is gone")
    }
    withExtendedLifetime(owner) {}
  }

  // MARK: - Once-only handlers

  @Test func probeObserveOnceUnderConcurrentSenders() {
    for round in 0..<60 {
      let source = EventSource<Int>()
      let property = Property(0)
      let live = LiveCount()
      let calls = [Counter(), Counter(), Counter(), Counter()]
      let owner = Owner()
      let queue = DispatchQueue(label: "probe-once", attributes: .concurrent)
      let handles: [Subscription]
      do {
        let tracked = Tracked(live)
        let delivery: Delivery = round % 2 == 0 ? .synchronous : .queue(queue)
        handles = [
          source.observeOnce(on: delivery) { _ in
            withExtendedLifetime(tracked) {}
            calls[0].increment()
          },
          source.observeOnce(with: owner, on: delivery) { _, _ in
            withExtendedLifetime(tracked) {}
            calls[1].increment()
          },
          property.observeOnce(on: delivery) { _ in
            withExtendedLifetime(tracked) {}
            calls[2].increment()
          },
          property.observeOnce(with: owner, on: delivery) { _, _ in
            withExtendedLifetime(tracked) {}
            calls[3].increment()
          },
        ]
      }
      #expect(
        onThreads { thread in
          for event in 1...100 {
            source.send(thread * 1000 + event)
            property.value = thread * 1000 + event
            if event == 50, thread == 0 { handles[round % 4].cancel() }
          }
        })
      let drained = Gate()
      queue.async(flags: .barrier) { drained.open() }
      #expect(drained.wait())
      for (index, counter) in calls.enumerated() {
        #expect(counter.value <= 1, "once handler \(index) ran \(counter.value) times")
        if index != round % 4 { #expect(counter.value == 1) }
      }
      #expect(live.wait(for: 0))
      #expect(source.observerCount == 0)
      #expect(property.observerCount == 0)
      for handle in handles { #expect(!handle.isActive) }
      withExtendedLifetime(owner) {}
    }
  }

  // MARK: - removeAllObservers concurrent with cancel and sends

  @Test func probeRemoveAllConcurrentWithCancelAndSend() {
    for _ in 0..<40 {
      let source = EventSource<Int>()
      let live = LiveCount()
      let calls = Counter()
      let removedAndCancelled = Atomic<Bool>(false)
      let lateStarts = Counter()
      let owner = Owner()
      var handles: [Subscription] = []
      for index in 0..<32 {
        let tracked = Tracked(live)
        let handler: @Sendable (Int) -> Void = { _ in
          if removedAndCancelled.load(ordering: .acquiring) { lateStarts.increment() }
          withExtendedLifetime(tracked) {}
          calls.increment()
        }
        if index % 2 == 0 {
          handles.append(source.observe(handler))
        } else {
          handles.append(source.observe(with: owner) { _, event in handler(event) })
        }
      }
      let stop = Atomic<Bool>(false)
      let fixed = handles
      let sender = Spawned {
        var event = 0
        while !stop.load(ordering: .relaxed) {
          source.send(event)
          event += 1
        }
      }
      #expect(calls.wait { $0 >= 64 })
      #expect(
        onThreads(3) { thread in
          switch thread {
          case 0: source.removeAllObservers()
          case 1: for handle in fixed where handle.hashValue % 2 == 0 { handle.cancel() }
          default: source.removeAllObservers()
          }
        })
      removedAndCancelled.store(true, ordering: .releasing)
      for event in 0..<20 { source.send(event) }
      stop.store(true, ordering: .relaxed)
      #expect(sender.join())
      #expect(lateStarts.value == 0, "a handler started after removeAllObservers() returned")
      #expect(live.wait(for: 0))
      #expect(source.observerCount == 0)
      for handle in handles { #expect(!handle.isActive) }
      withExtendedLifetime(owner) {}
    }
  }

  // MARK: - Ended subscriptions that stay listed are removed

  @Test func probeSubscribeAndCancelDoNotAccumulateEntries() {
    let source = EventSource<Int>()
    let keeper = source.observe { _ in }
    for _ in 0..<10_000 { source.observe { _ in }.cancel() }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
    for _ in 0..<10_000 { _ = source.observe { _ in } }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
    let property = Property(0)
    for _ in 0..<10_000 { property.observe { _ in }.cancel() }
    #expect(slotCount(property.hub) <= 64, "slots: \(slotCount(property.hub))")
    // Owners that die, never sent to.
    for _ in 0..<10_000 { source.observe(with: Owner()) { _, _ in } }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
    #expect(source.observerCount == 1)
    withExtendedLifetime(keeper) {}
  }

  @Test func probeSendOnlySourceRemovesEndedEntries() {
    let source = EventSource<Int>()
    let keeper = source.observe { _ in }
    var handles = (0..<1_000).map { _ in source.observe { _ in } }
    for handle in handles { handle.cancel() }
    let owner = Owner()
    for _ in 0..<100 { source.observeOnce(with: owner) { _, _ in } }
    source.send(1)
    source.send(2)
    #expect(slotCount(source.hub) == 1, "slots after sends: \(slotCount(source.hub))")
    handles.removeAll()
    withExtendedLifetime(keeper) {}
  }

  @Test func probeDeadOwnersReleasedByNextSend() {
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

  @Test func probeFlatMapLatestSwitchingDoesNotAccumulate() {
    let a = Property(1)
    let b = Property(2)
    let useA = Property(true)
    let chain = useA.flatMapLatest { $0 ? a : b }
    let seen = Recorder<Int>()
    let counts = Recorder<(Int, Int)>()
    let handle = chain.observe { value in
      seen.append(value)
      counts.append((a.observerCount, b.observerCount))
    }
    for index in 0..<4_000 { useA.value = index % 2 == 1 }
    #expect(chain.value == 1)
    #expect(a.observerCount == 1)
    #expect(b.observerCount == 0)
    #expect(slotCount(a.hub) <= 64, "a slots: \(slotCount(a.hub))")
    #expect(slotCount(b.hub) <= 64, "b slots: \(slotCount(b.hub))")
    // Every delivered value came with exactly one target attached.
    for (index, pair) in counts.values.enumerated() where pair.0 + pair.1 != 1 {
      Issue.record("delivery \(index): observerCounts \(pair)")
      break
    }
    withExtendedLifetime(handle) {}
  }

  @Test func probeDerivedNodeFreedAndLinksRemoved() {
    let source = Property(0)
    weak var weakNode: AnyObject?
    do {
      let mapped = source.map { $0 * 2 }
      weakNode = mapped.derived
      let handle = mapped.observe { _ in }
      source.value = 1
      #expect(source.observerCount == 1)
      handle.cancel()
    }
    #expect(weakNode == nil, "a derived value nobody references nor observes was kept")
    #expect(source.observerCount == 0)
    for _ in 0..<1_000 { _ = source.map { $0 + 1 } }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
  }

  // MARK: - Reentrant cancel inside a pass

  @Test func probeCancelInsideHandlerNotCalledLaterInPassAndReleasedAfter() {
    let source = EventSource<Int>()
    let live = LiveCount()
    let calls = Counter()
    let victim = SubscriptionBox()
    let me = SubscriptionBox()
    let first = source.observe { _ in
      victim.cancel()
      me.cancel()
    }
    me.subscription = first
    do {
      let tracked = Tracked(live)
      victim.subscription = source.observe { _ in
        withExtendedLifetime(tracked) {}
        calls.increment()
      }
    }
    source.send(1)
    source.send(2)
    #expect(calls.value == 0)
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  // MARK: - Cycles through a handle, and derived values under concurrency

  /// A handler that captures its own handle is a cycle (handle, entry, handler); the
  /// source's deinit ends the subscription and must break it.
  @Test func probeSourceDeinitBreaksAHandleCycle() {
    let live = LiveCount()
    var source: EventSource<Int>? = EventSource<Int>()
    do {
      let box = SubscriptionBox()
      let tracked = Tracked(live)
      box.subscription = source!.observe { _ in
        withExtendedLifetime(tracked) {}
        withExtendedLifetime(box) {}
      }
    }
    source!.send(1)
    #expect(live.value == 1)
    source = nil
    #expect(live.value == 0, "the handle cycle outlived its source")
  }

  /// Handles of a derived value's observers are dropped and remade on one thread while
  /// another sends upstream: every delivery visits entries unretained, and the node is
  /// kept alive only by its observers. Nothing may crash, and when everything is
  /// dropped the node is freed and the upstream count returns to zero.
  @Test func probeDerivedObserversChurnWhileUpstreamDelivers() {
    for round in 0..<20 {
      let upstream = EventSource<Int>()
      let property = Property(0)
      let stop = Atomic<Bool>(false)
      let calls = Counter()
      let nodes = Monitor<[WeakNode]>([])
      let sender = Spawned {
        var event = 0
        while !stop.load(ordering: .relaxed) {
          upstream.send(event)
          property.value = event
          event += 1
        }
      }
      let churn = Spawned {
        for index in 0..<200 {
          let mapped = upstream.map { $0 + 1 }.filter { $0 % 2 == 0 }
          let derived = property.map { $0 * 2 }.combineLatest(property.map { $0 + 1 })
          let node = WeakNode(derived.derived)
          nodes.withLock { $0.append(node) }
          var handles = [
            mapped.observe { _ in calls.increment() },
            derived.observe { _ in calls.increment() },
          ]
          if (index + round) % 3 == 0 {
            // Drop one from inside its own handler, on the delivering thread.
            let box = SubscriptionBox()
            box.subscription = derived.observeChanges { _ in box.subscription = nil }
          }
          handles.removeFirst((index + round) % 2)
          handles.removeAll()
        }
      }
      #expect(churn.join())
      stop.store(true, ordering: .relaxed)
      #expect(sender.join())
      upstream.send(-1)
      property.value = -1
      #expect(upstream.observerCount == 0)
      #expect(property.observerCount == 0)
      let kept = nodes.withLock { $0.filter { $0.value != nil }.count }
      #expect(kept == 0, "\(kept) derived nodes kept after all observers were dropped")
    }
  }

  /// flatMapLatest switches on one thread while both targets are written on others.
  /// When writers stop, the observer ends on the chain's value, and only the current
  /// target is observed.
  @Test func probeFlatMapLatestSwitchingUnderConcurrentWrites() {
    for round in 0..<10 {
      let a = Property(0)
      let b = Property(1_000_000)
      let useA = Property(true)
      let chain = useA.flatMapLatest { $0 ? a : b }
      let last = Monitor<Int?>(nil)
      let handle = chain.observe { value in last.withLock { $0 = value } }
      #expect(
        onThreads(3) { thread in
          for index in 0..<2_000 {
            switch thread {
            case 0: useA.value = (index + round) % 3 != 0
            case 1: a.value = index
            default: b.value = 1_000_000 + index
            }
          }
        })
      let expected = chain.value
      #expect(last.current == expected, "observer ended on \(String(describing: last.current)), value \(expected)")
      #expect(a.observerCount + b.observerCount == 1)
      #expect(useA.value ? a.observerCount == 1 : b.observerCount == 1)
      #expect(slotCount(a.hub) <= 64 && slotCount(b.hub) <= 64)
      withExtendedLifetime(handle) {}
    }
  }

  // MARK: - The per-thread delivering depth

  /// A handler running on a `.queue` target counts as delivering: a send it makes to
  /// another source whose backlog is full must not wait for room (the deliverer of
  /// that source is blocked until this send returns, so waiting would deadlock).
  @Test func probeQueueHandlerSendingToAFullSourceDoesNotWait() {
    let full = EventSource<Int>(backlogLimit: 1)
    let entered = Gate()
    let release = Gate()
    let fullHandle = full.observe { event in
      if event == 1 {
        entered.open()
        _ = release.wait()
      }
    }
    let deliverer = Spawned { full.send(1) }
    #expect(entered.wait())
    full.send(2)  // queued: the backlog is at its limit now
    let source = EventSource<Int>()
    let queue = DispatchQueue(label: "probe-depth")
    let returned = Gate()
    let handle = source.observe(on: .queue(queue)) { _ in
      full.send(3)
      returned.open()
    }
    // Spawned threads too, so the depth counter of fresh and exited threads is used.
    for index in 0..<8 { #expect(completesOnAnotherThread { source.send(index) }) }
    #expect(returned.wait(), "a queued handler waited for room in another source's backlog")
    release.open()
    #expect(deliverer.join())
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    withExtendedLifetime((fullHandle, handle)) {}
  }

  // MARK: - Documented consequences of lazy removal

  /// An ended subscription stays listed until its source next meets it, and a `.queue`
  /// subscription holds its private serial queue (which retains the given queue) until
  /// then, as Guarantees.md says: after `cancel()` the queue lives on until a send, a
  /// scan or `observerCount` removes the entry, and no longer.
  @Test func probeEndedQueueSubscriptionKeepsItsQueueUntilItsSourceRemovesIt() {
    let source = EventSource<Int>()
    let keeper = source.observe { _ in }
    let privateQueue = WeakNode(nil)
    do {
      let handle = source.observe(on: .queue(DispatchQueue(label: "probe-retained"))) { _ in }
      privateQueue.value = (handle.core as? Entry<Int>)?.target?.queue
      #expect(privateQueue.value != nil)
      handle.cancel()
    }
    #expect(privateQueue.value != nil, "the listed entry keeps its queue until its source removes it")
    _ = source.observerCount  // sweeps
    #expect(privateQueue.value == nil, "the queue outlived the removal of its subscription")
    withExtendedLifetime(keeper) {}
  }

  /// A handler that cancelled itself stays listed while it runs (at 87f417c `cancel()`
  /// removed it at once, and `removeAllObservers()` on another thread returned without
  /// waiting for it). Now `removeAllObservers()` waits for it, as its documentation
  /// says ("a handler that is running on another thread is waited for"). The other
  /// side of this change: a handler that cancels itself and then waits for the thread
  /// calling `removeAllObservers()` deadlocks now, where it did not before.
  @Test func probeRemoveAllWaitsForAHandlerThatCancelledItself() {
    let source = EventSource<Int>()
    let box = SubscriptionBox()
    let entered = Gate()
    let release = Gate()
    box.subscription = source.observe { _ in
      box.cancel()  // ends itself, from inside
      entered.open()
      _ = release.wait()
    }
    let sender = Spawned { source.send(1) }
    #expect(entered.wait())
    let removed = Gate()
    let remover = Spawned {
      source.removeAllObservers()
      removed.open()
    }
    let returnedWhileItRan = removed.wait(timeout: .milliseconds(300))
    release.open()
    #expect(remover.join())
    #expect(sender.join())
    #expect(!returnedWhileItRan, "removeAllObservers() returned while a handler of the source ran on another thread")
  }
}
