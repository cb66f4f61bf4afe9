import Dispatch
import Synchronization
import Testing

@testable import Evented

/// The overload bound for subscriptions that deliver on a dispatch queue.
@Suite struct QueueOverloadTests {
  @Test func overloadAQueueSubscriptionHoldsAtMostTheBacklogLimit() async {
    // The handler is held until the writer has committed `limit` values, then runs
    // slowly; it measures how many committed values wait behind the one it receives.
    let limit = 8
    let property = Property(0, backlogLimit: limit)
    let queue = DispatchQueue(label: "slow")
    let reachedLimit = Gate()
    let peakBacklog = Atomic<Int>(0)
    let last = Number(-1)
    let subscription = property.observeChanges(on: .queue(queue)) { change in
      reachedLimit.wait()
      peakBacklog.max(property.value - change.newValue, ordering: .relaxed)
      last.store(change.newValue)
      work(microseconds: 20)
    }
    #expect(
      completesOnAnotherThread {
        for value in 1...400 {
          property.value = value
          if value == limit { reachedLimit.open() }
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
    // A block on the subscription's own queue writes far beyond the limit: the
    // handler cannot run before the block returns, so waiting would never end.
    let property = Property(0, backlogLimit: 2)
    let queue = DispatchQueue(label: "shared")
    let last = Number(-1)
    let subscription = property.observeChanges(on: .queue(queue)) { last.store($0.newValue) }
    #expect(completesOnAnotherThread { queue.sync { for value in 1...50 { property.value = value } } })
    let targeting = DispatchQueue(label: "targeting", target: queue)
    #expect(completesOnAnotherThread { targeting.sync { for value in 51...100 { property.value = value } } })
    #expect(await settles { last.value == 100 })
    subscription.cancel()
  }

  /// The same from a block of a queue that targets the delivery queue, when that queue
  /// is itself used for a delivery (it then carries a mark of its own, which the lookup
  /// of the current queue found first, and the writer waited for its own queue).
  @Test func overloadCodeRunningOnAQueueThatTargetsTheDeliveryQueueNeverWaitsForIt() async {
    let base = DispatchQueue(label: "base")
    let child = DispatchQueue(label: "child", target: base)
    let property = Property(0, backlogLimit: 1)
    let last = Number(-1)
    let subscription = property.observe(on: .queue(base)) { last.store($0) }
    let other = Property(0).observe(on: .queue(child)) { _ in }  // marks `child`
    let wrote = Gate()
    child.async {
      for value in 1...20 { property.value = value }
      wrote.open()
    }
    #expect(wrote.wait())
    #expect(await settles { last.value == 20 })
    subscription.cancel()
    other.cancel()
  }

  @Test func overloadAQueueHandlerWritingItsOwnSourceNeverWaits() async {
    let property = Property(0, backlogLimit: 1)
    let last = Number(-1)
    let subscription = property.observeChanges(on: .queue(DispatchQueue(label: "writer"))) { change in
      if change.newValue < 100 { property.value = change.newValue + 1 }
      last.store(change.newValue)
    }
    #expect(completesOnAnotherThread { property.value = 1 })
    #expect(await settles { last.value == 100 })
    subscription.cancel()
  }

  @Test func overloadAWriterWaitingForAQueueDoesNotHoldTheLock() async {
    // The queue's handler reads the value while the writer waits for room.
    let property = Property(0, backlogLimit: 2)
    let reads = Number(0)
    let subscription = property.observeChanges(on: .queue(DispatchQueue(label: "reader"))) { _ in
      _ = property.value
      reads.increment()
      work(microseconds: 50)
    }
    #expect(completesOnAnotherThread { for value in 1...100 { property.value = value } })
    #expect(await settles { reads.value == 100 })
    subscription.cancel()
  }
}
