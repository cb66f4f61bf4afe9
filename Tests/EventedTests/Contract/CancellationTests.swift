// Promise 6: when `cancel()` returns, the handler will not start again on any thread;
// if it is running on another thread, `cancel()` waits for it to finish; called from
// inside the handler, it returns at once. The same holds when the owner deinitializes.
//
// The actor variants run here for the part that applies to them: no delivery starts
// after `cancel()` returns or after the owner deinitializes. Their `cancel()` does not
// wait for an `async` handler that is already running (it cannot block on a task), so
// the tests of waiting, and of two handlers cancelling each other, are for the
// lock-based types only.

import Dispatch
import Synchronization
import Testing

@testable import Evented

@Suite struct CancellationContract {
  static let deliveries: [Delivery] = [
    .synchronous,
    .queue(DispatchQueue(label: "cancellation")),
    .queue(DispatchQueue(label: "cancellation-concurrent", attributes: .concurrent)),
  ]

  @Test(arguments: EventSubjectKind.allCases, deliveries)
  func cancellationIsFinalCancelWaitsForAHandlerRunningOnAnotherThread(
    _ kind: EventSubjectKind, _ delivery: Delivery
  ) {
    let subject = kind.make()
    let entered = Gate()
    let release = Gate()
    let cancelReturned = Gate()
    let log = Recorder<String>()
    let subscription = subject.observe(on: delivery) { event in
      log.append("start \(event)")
      entered.open()
      release.wait()
      log.append("finish \(event)")
    }
    let sender = Spawned { subject.send(1) }
    #expect(entered.wait())
    let canceller = Spawned {
      subscription.cancel()
      log.append("cancel returned")
      cancelReturned.open()
    }
    // The handler is blocked, so a cancel that waits cannot return. This bounded wait
    // only gives a cancel that does not wait the time to show it; the verdict comes
    // from the order of the log below.
    #expect(eventually { subscription.core.isEnded })
    #expect(!cancelReturned.wait(timeout: .milliseconds(100)))
    release.open()
    #expect(canceller.join())
    #expect(sender.join())
    #expect(log.values == ["start 1", "finish 1", "cancel returned"])
    #expect(!subscription.isActive)
    #expect(completesOnAnotherThread { for event in 2...20 { subject.send(event) } })
    subject.send(21)
    #expect(log.values == ["start 1", "finish 1", "cancel returned"])
  }

  @Test(arguments: EventSubjectKind.allCases, deliveries)
  func cancellationIsFinalNoHandlerStartsAfterCancelReturns(_ kind: EventSubjectKind, _ delivery: Delivery) {
    let subject = kind.make()
    let cancelled = Atomic<Bool>(false)
    let lateStarts = Atomic<Int>(0)
    let lateFinishes = Atomic<Int>(0)
    let started = Counter()
    let subscription = subject.observe(on: delivery) { _ in
      if cancelled.load(ordering: .acquiring) { lateStarts.add(1, ordering: .relaxed) }
      started.increment()
      spin(2_000)
      // A cancel that returned while this ran would have set the flag already.
      if cancelled.load(ordering: .acquiring) { lateFinishes.add(1, ordering: .relaxed) }
    }
    let stop = Atomic<Bool>(false)
    let sends = Atomic<Int>(0)
    let senders = (0..<contentionThreads).map { index in
      Spawned {
        var step = 0
        while !stop.load(ordering: .relaxed) {
          subject.send(index * 1_000_000 + step)
          sends.add(1, ordering: .relaxed)
          step += 1
        }
      }
    }
    #expect(started.wait { $0 >= 50 })
    subscription.cancel()
    cancelled.store(true, ordering: .releasing)
    let afterCancel = started.value
    let sendsAtCancel = sends.load(ordering: .relaxed)
    #expect(eventually { sends.load(ordering: .relaxed) >= sendsAtCancel + 400 })
    stop.store(true, ordering: .relaxed)
    for sender in senders { #expect(sender.join()) }
    #expect(lateStarts.load(ordering: .relaxed) == 0)
    #expect(lateFinishes.load(ordering: .relaxed) == 0)
    #expect(started.value == afterCancel)
  }

  @Test(arguments: EventSubjectKind.allCases)
  func cancellationIsFinalFromInsideTheHandlerReturnsAtOnce(_ kind: EventSubjectKind) {
    let subject = kind.make()
    let own = SubscriptionBox()
    let log = Recorder<Int>()
    let others = Recorder<Int>()
    let other = subject.observe { others.append($0) }
    own.subscription = subject.observe { event in
      own.cancel()
      own.cancel()
      log.append(event)
      subject.send(event + 1)
    }
    #expect(completesOnAnotherThread { subject.send(1) })
    #expect(log.values == [1])
    #expect(others.values == [1, 2])
    #expect(own.subscription?.isActive == false)
    subject.send(5)
    #expect(log.values == [1])
    other.cancel()
  }

  @Test(arguments: EventSubjectKind.allCases, deliveries)
  func cancellationIsFinalWhenTheOwnerDeinitializes(_ kind: EventSubjectKind, _ delivery: Delivery) {
    let subject = kind.make()
    let ownerGone = Atomic<Bool>(false)
    let lateStarts = Atomic<Int>(0)
    let started = Counter()
    do {
      let owner = DeinitProbe { ownerGone.store(true, ordering: .releasing) }
      subject.observe(with: owner, on: delivery) { _, _ in
        if ownerGone.load(ordering: .acquiring) { lateStarts.add(1, ordering: .relaxed) }
        started.increment()
      }
      subject.send(0)
      #expect(started.wait(for: 1))
    }
    // With queue delivery the queue may hold the owner a moment after the handler.
    #expect(eventually { ownerGone.load(ordering: .acquiring) })
    #expect(
      onThreads { index in
        for step in 0..<200 { subject.send(index * 1_000 + step) }
      })
    #expect(lateStarts.load(ordering: .relaxed) == 0)
    #expect(started.value == 1)
    #expect(subject.observerCount == 0)
  }

  /// Each handler cancels the other while both run, on two threads: waiting would be a
  /// cycle, which Evented breaks by returning; neither handler runs again.
  @Test func cancellationIsFinalWhenTwoRunningHandlersCancelEachOther() {
    let left = EventSource<Int>()
    let right = EventSource<Int>()
    let onLeft = SubscriptionBox()
    let onRight = SubscriptionBox()
    let leftRunning = Gate()
    let rightRunning = Gate()
    let calls = Counter()
    onLeft.subscription = left.observe { _ in
      calls.increment()
      leftRunning.open()
      rightRunning.wait()
      onRight.cancel()
    }
    onRight.subscription = right.observe { _ in
      calls.increment()
      rightRunning.open()
      leftRunning.wait()
      onLeft.cancel()
    }
    let leftSender = Spawned { left.send(1) }
    let rightSender = Spawned { right.send(1) }
    #expect(leftSender.join())
    #expect(rightSender.join())
    left.send(2)
    right.send(2)
    #expect(calls.value == 2)
    #expect(onLeft.subscription?.isActive == false)
    #expect(onRight.subscription?.isActive == false)
    #expect(left.observerCount == 0)
    #expect(right.observerCount == 0)
  }

  @Test func cancellationIsFinalOnTheDeliveryQueueWithoutWaiting() {
    let queue = DispatchQueue(label: "cancel-on-queue")
    let source = EventSource<Int>()
    let box = SubscriptionBox()
    let seen = Recorder<Int>()
    let blocked = Gate()
    let release = Gate()
    queue.async {
      blocked.open()
      release.wait()
    }
    #expect(blocked.wait())
    box.subscription = source.observe(on: .queue(queue)) { event in
      seen.append(event)
      box.cancel()
    }
    for event in 1...3 { source.send(event) }
    release.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(seen.values == [1])
  }

  // MARK: - Actor variants

  @Test(arguments: ActorEventSubjectKind.allCases)
  func cancellationIsFinalWhenTheOwnerOfAnActorHandlerDeinitializes(_ kind: ActorEventSubjectKind) async {
    let source = kind.make()
    let seen = Recorder<Int>()
    var owner: Owner? = Owner()
    let subscription = await source.observe(with: owner!) { _, event in seen.append(event) }
    await source.send(1)
    #expect(await settles { seen.values == [1] })
    #expect(subscription.isActive)
    // The delivery that recorded 1 holds the owner until it returns: wait for the owner
    // to deinitialize.
    weak let gone = owner
    owner = nil
    #expect(await settles { gone == nil })
    #expect(!subscription.isActive)
    #expect(await source.observerCount == 0)
    await source.send(2)
    let afterwards = await settles(timeout: .milliseconds(50)) { seen.count > 1 }
    #expect(!afterwards, "no handler runs for a dead owner")
  }

  /// The handler's task is inside one delivery with more queued when the subscription
  /// is cancelled: none of the queued deliveries starts.
  @Test(arguments: ActorEventSubjectKind.allCases)
  func cancelIsFinalWhileTheDrainTaskIsMidQueue(_ kind: ActorEventSubjectKind) async {
    let source = kind.make()
    let seen = Recorder<Int>()
    let entered = AsyncGate()
    let release = AsyncGate()
    let subscription = await source.observe { event in
      seen.append(event)
      if seen.count == 1 {
        entered.open()
        await release.wait()
      }
    }
    for event in 0..<50 { await source.send(event) }
    await entered.wait()
    // The task is inside the first delivery with more queued (for a property, the
    // newest value waits, and the first delivery may already be a later value).
    if !kind.coalesces { #expect(seen.values == [0]) }
    await source.send(50)
    subscription.cancel()
    release.open()
    #expect(await source.observerCount == 0)
    await source.send(51)
    let more = await settles(timeout: .milliseconds(100)) { seen.count > 1 }
    #expect(!more, "no delivery starts after cancel() returned")
    #expect(seen.count == 1)
  }
}
