import Dispatch
import Synchronization
import Testing

@testable import Evented

/// The overload bound for event subscriptions that deliver on a dispatch queue (state
/// observers on a queue coalesce instead: StateCoalescingTests).
@Suite struct QueueOverloadTests {
  @Test func overloadAQueueSubscriptionHoldsAtMostTheBacklogLimit() async {
    // The handler is held until the sender has sent `limit` events, then runs slowly;
    // it measures how many sent events wait behind the one it receives.
    let limit = 8
    let source = EventSource<Int>(backlogLimit: limit)
    let queue = DispatchQueue(label: "slow")
    let reachedLimit = Gate()
    let sent = Atomic<Int>(0)
    let peakBacklog = Atomic<Int>(0)
    let last = Number(-1)
    let subscription = source.observe(on: .queue(queue)) { event in
      reachedLimit.wait()
      peakBacklog.max(sent.load(ordering: .acquiring) - event, ordering: .relaxed)
      last.store(event)
      work(microseconds: 20)
    }
    #expect(
      completesOnAnotherThread {
        for event in 1...400 {
          sent.store(event, ordering: .releasing)
          source.send(event)
          if event == limit { reachedLimit.open() }
        }
      })
    #expect(await settles { last.value == 400 })
    #expect(peakBacklog.load(ordering: .relaxed) <= limit + 1)
    subscription.cancel()
  }

  @Test func overloadAQueueSubscriptionWithAnOwnerHoldsAtMostTheBacklogLimit() async {
    let limit = 4
    let source = EventSource<Int>(backlogLimit: limit)
    let owner = Owner()
    let sent = Atomic<Int>(0)
    let peakBacklog = Atomic<Int>(0)
    let seen = Recorder<Int>()
    source.observe(with: owner, on: .queue(DispatchQueue(label: "slow"))) { _, event in
      peakBacklog.max(sent.load(ordering: .acquiring) - event, ordering: .relaxed)
      seen.append(event)
      work(microseconds: 20)
    }
    #expect(
      completesOnAnotherThread {
        for event in 1...200 {
          sent.store(event, ordering: .releasing)
          source.send(event)
        }
      })
    #expect(await settles { seen.values.count == 200 })
    #expect(seen.values == Array(1...200))
    #expect(peakBacklog.load(ordering: .relaxed) <= limit + 1)
  }

  @Test func overloadCodeRunningOnTheDeliveryQueueNeverWaitsForIt() async {
    // A block on the subscription's own queue sends far beyond the limit: the handler
    // cannot run before the block returns, so waiting would never end.
    let source = EventSource<Int>(backlogLimit: 2)
    let queue = DispatchQueue(label: "shared")
    let last = Number(-1)
    let subscription = source.observe(on: .queue(queue)) { last.store($0) }
    #expect(completesOnAnotherThread { queue.sync { for event in 1...50 { source.send(event) } } })
    let targeting = DispatchQueue(label: "targeting", target: queue)
    #expect(completesOnAnotherThread { targeting.sync { for event in 51...100 { source.send(event) } } })
    #expect(await settles { last.value == 100 })
    subscription.cancel()
  }

  /// The same from a block of a queue that targets the delivery queue, when that queue
  /// is itself used for a delivery (it then carries a mark of its own, which the lookup
  /// of the current queue found first, and the sender waited for its own queue).
  @Test func overloadCodeRunningOnAQueueThatTargetsTheDeliveryQueueNeverWaitsForIt() async {
    let base = DispatchQueue(label: "base")
    let child = DispatchQueue(label: "child", target: base)
    let source = EventSource<Int>(backlogLimit: 1)
    let last = Number(-1)
    let subscription = source.observe(on: .queue(base)) { last.store($0) }
    let other = EventSource<Int>().observe(on: .queue(child)) { _ in }  // marks `child`
    let sent = Gate()
    child.async {
      for event in 1...20 { source.send(event) }
      sent.open()
    }
    #expect(sent.wait())
    #expect(await settles { last.value == 20 })
    subscription.cancel()
    other.cancel()
  }

  @Test func overloadAQueueHandlerSendingToItsOwnSourceNeverWaits() async {
    let source = EventSource<Int>(backlogLimit: 1)
    let last = Number(-1)
    let subscription = source.observe(on: .queue(DispatchQueue(label: "sender"))) { event in
      if event < 100 { source.send(event + 1) }
      last.store(event)
    }
    #expect(completesOnAnotherThread { source.send(1) })
    #expect(await settles { last.value == 100 })
    subscription.cancel()
  }

  @Test func overloadASenderWaitingForAQueueDoesNotHoldTheLock() async {
    // The queue's handler takes the source's lock while the sender waits for room.
    let source = EventSource<Int>(backlogLimit: 2)
    let reads = Number(0)
    let subscription = source.observe(on: .queue(DispatchQueue(label: "reader"))) { _ in
      _ = source.observerCount
      reads.increment()
      work(microseconds: 50)
    }
    #expect(completesOnAnotherThread { for event in 1...100 { source.send(event) } })
    #expect(await settles { reads.value == 100 })
    subscription.cancel()
  }

  @Test func overloadAWriterNeverWaitsForAPropertyObserverOnAQueue() async {
    // A state observer on a queue holds one waiting state: the limit never applies.
    let property = Property(0, backlogLimit: 1)
    let release = Gate()
    let last = Number(-1)
    let subscription = property.observeChanges(on: .queue(DispatchQueue(label: "slow"))) { change in
      release.wait()
      last.store(change.newValue)
    }
    #expect(completesOnAnotherThread { for value in 1...400 { property.value = value } })
    release.open()
    #expect(await settles { last.value == 400 })
    subscription.cancel()
  }
}
