import Dispatch
import Testing

@testable import Evented

@Suite struct EventSourceTests {
  @Test func sendDeliversToEveryObserverInSubscriptionOrder() {
    let source = EventSource<String>()
    let log = Recorder<String>()
    let owner = Owner()
    let first = source.observe { log.append("first \($0)") }
    source.observe(with: owner) { _, event in log.append("second \(event)") }
    let third = source.readOnly.observe { log.append("third \($0)") }
    source.send("a")
    source.send("b")
    #expect(
      log.values == ["first a", "second a", "third a", "first b", "second b", "third b"])
    first.cancel()
    third.cancel()
  }

  @Test func sendWithoutObserversDoesNothing() {
    let source = EventSource<Int>()
    source.send(1)
    #expect(source.observerCount == 0)
  }

  @Test func voidSourceSendsWithoutAnArgument() {
    let taps = EventSource<Void>()
    let count = Counter()
    let subscription = taps.observe { count.increment() }
    taps.send()
    taps.send(())
    #expect(count.value == 2)
    subscription.cancel()
  }

  @Test func observeWithOwnerPassesTheOwnerStronglyToTheHandler() {
    let source = EventSource<Int>()
    let owner = Tracked(LiveCount(), id: 42)
    let seen = Recorder<Int>()
    source.observe(with: owner) { owner, event in seen.append(owner.id + event) }
    source.send(1)
    #expect(seen.values == [43])
  }

  @Test func subscriptionEndsWhenOwnerDeinitializes() {
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    var owner: Owner? = Owner()
    let subscription = source.observe(with: owner!) { _, event in seen.append(event) }
    source.send(1)
    owner = nil
    source.send(2)
    #expect(seen.values == [1])
    #expect(!subscription.isActive)
    #expect(source.observerCount == 0)
  }

  @Test func droppingTheHandleOfAnOwnedSubscriptionDoesNotEndIt() {
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    let owner = Owner()
    _ = source.observe(with: owner) { _, event in seen.append(event) }
    source.send(1)
    #expect(seen.values == [1])
    #expect(source.observerCount == 1)
  }

  @Test func subscriptionWithoutOwnerEndsWhenItsHandleIsReleased() {
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    var handle: Subscription? = source.observe { seen.append($0) }
    source.send(1)
    #expect(handle?.isActive == true)
    handle = nil
    source.send(2)
    #expect(seen.values == [1])
    #expect(source.observerCount == 0)
  }

  @Test func observeOnceDeliversOnlyTheNextEvent() {
    let source = EventSource<Int>()
    let owner = Owner()
    let seen = Recorder<Int>()
    let withOwner = source.observeOnce(with: owner) { _, event in seen.append(event) }
    let withoutOwner = source.observeOnce { seen.append($0 * 10) }
    #expect(source.observerCount == 2)
    source.send(1)
    source.send(2)
    #expect(seen.values == [1, 10])
    #expect(!withOwner.isActive)
    #expect(!withoutOwner.isActive)
    #expect(source.observerCount == 0)
  }

  @Test func observeOnceIsOnceEvenWhenItsHandlerSendsAgain() {
    let source = EventSource<Int>()
    let owner = Owner()
    let seen = Recorder<Int>()
    source.observeOnce(with: owner) { _, event in
      seen.append(event)
      source.send(event + 1)
      source.send(event + 2)
    }
    source.send(1)
    #expect(seen.values == [1])
  }

  @Test func observeOnceIsOnceUnderConcurrentSends() {
    for round in 0..<50 {
      let source = EventSource<Int>()
      let owner = Owner()
      let calls = Counter()
      let once = source.observeOnce(with: owner) { _, _ in calls.increment() }
      let plain = source.observeOnce { _ in calls.increment() }
      #expect(
        onThreads { index in
          for step in 0..<20 { source.send(round * 1_000 + index * 20 + step) }
        })
      #expect(calls.value == 2)
      #expect(!once.isActive && !plain.isActive)
    }
  }

  @Test func observeOnceOnAQueueIsOnceUnderConcurrentSends() {
    let queue = DispatchQueue(label: "once", attributes: .concurrent)
    for round in 0..<20 {
      let source = EventSource<Int>()
      let owner = Owner()
      let calls = Counter()
      let once = source.observeOnce(with: owner, on: .queue(queue)) { _, _ in calls.increment() }
      #expect(
        onThreads { index in
          for step in 0..<20 { source.send(round * 1_000 + index * 20 + step) }
        })
      #expect(calls.wait(for: 1))
      let drained = Gate()
      queue.async(flags: .barrier) { drained.open() }
      #expect(drained.wait())
      #expect(calls.value == 1)
      #expect(!once.isActive)
    }
  }

  @Test func observeOnceDoesNotFireWhenTheOwnerIsGone() {
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    var owner: Owner? = Owner()
    source.observeOnce(with: owner!) { _, event in seen.append(event) }
    owner = nil
    source.send(1)
    #expect(seen.values.isEmpty)
    #expect(source.observerCount == 0)
  }

  @Test func removeAllObserversEndsEverySubscription() {
    let source = EventSource<Int>()
    let owner = Owner()
    let seen = Recorder<Int>()
    let live = LiveCount()
    let a = source.observe { seen.append($0) }
    let b = source.observe(with: owner) { _, event in seen.append(event) }
    do {
      let captured = Tracked(live)
      source.observe(with: owner) { _, _ in _ = captured }
    }
    #expect(live.value == 1)
    source.removeAllObservers()
    source.send(1)
    #expect(seen.values.isEmpty)
    #expect(source.observerCount == 0)
    #expect(!a.isActive && !b.isActive)
    #expect(live.value == 0)
    // The source keeps working afterwards.
    let c = source.observe { seen.append($0) }
    source.send(2)
    #expect(seen.values == [2])
    c.cancel()
  }

  @Test func removeAllObserversWaitsForAHandlerRunningOnAnotherThread() {
    let source = EventSource<Int>()
    let log = Recorder<String>()
    let entered = Gate()
    let release = Gate()
    let owner = Owner()
    source.observe(with: owner) { _, event in
      log.append("start \(event)")
      entered.open()
      release.wait()
      log.append("finish \(event)")
    }
    let sender = Spawned { source.send(1) }
    #expect(entered.wait())
    let remover = Spawned {
      source.removeAllObservers()
      log.append("removed")
    }
    // Bounded chance for a remover that does not wait to show itself; the verdict is
    // the order of the log.
    #expect(!remover.join(timeout: .milliseconds(100)))
    release.open()
    #expect(remover.join())
    #expect(sender.join())
    source.send(2)
    #expect(log.values == ["start 1", "finish 1", "removed"])
  }

  @Test func removeAllObserversCalledConcurrentlyWaitsForWhatTheOtherCallRemoved() {
    // A slow handler on queue A; a second subscription whose delivery waits on a
    // blocked queue B. The first caller ends A's subscription and waits for its
    // handler; a second caller must not return before that handler has finished, nor
    // leave B's handler free to start after it returned.
    let source = EventSource<Int>()
    let queueA = DispatchQueue(label: "A")
    let queueB = DispatchQueue(label: "B")
    let unblockB = Gate()
    let bBlocked = Gate()
    queueB.async {
      bBlocked.open()
      unblockB.wait()
    }
    #expect(bBlocked.wait())
    let aStarted = Gate()
    let releaseA = Gate()
    let aFinished = Gate()
    let bStarts = Counter()
    let a = source.observe(on: .queue(queueA)) { _ in
      aStarted.open()
      releaseA.wait()
      aFinished.open()
    }
    let b = source.observe(on: .queue(queueB)) { _ in bStarts.increment() }
    source.send(1)
    #expect(aStarted.wait())
    let first = Spawned { source.removeAllObservers() }
    // The first caller has taken both subscriptions and ended A's: it waits for A.
    #expect(eventually { !a.isActive })
    let secondReturnedBeforeAFinished = Monitor<Bool?>(nil)
    let second = Spawned {
      source.removeAllObservers()
      secondReturnedBeforeAFinished.withLock { $0 = !aFinished.isOpened }
    }
    // Either the second caller returned, or B's subscription has been ended.
    #expect(eventually { second.isFinished || !b.isActive })
    let returnedEarly = second.isFinished
    unblockB.open()
    queueB.sync {}
    releaseA.open()
    #expect(first.join())
    #expect(second.join())
    #expect(!returnedEarly)
    #expect(secondReturnedBeforeAFinished.current == false)
    #expect(bStarts.value == 0)
    #expect(!a.isActive && !b.isActive)
  }

  @Test func queuedDeliveriesThatHaveNotStartedDoNotRunAfterTheSourceIsDeinitialized() {
    let queue = DispatchQueue(label: "blocked")
    let unblock = Gate()
    let blocked = Gate()
    queue.async {
      blocked.open()
      unblock.wait()
    }
    #expect(blocked.wait())
    let seen = Recorder<Int>()
    let owner = Owner()
    var source: EventSource<Int>? = EventSource<Int>()
    let subscription = source!.observe(with: owner, on: .queue(queue)) { _, event in seen.append(event) }
    source!.send(1)
    source = nil
    #expect(!subscription.isActive)
    unblock.open()
    queue.sync {}
    #expect(seen.values.isEmpty, "a delivery submitted before the deinit did not start after it")
  }

  @Test func observerCountCountsSubscriptionsWithLiveOwners() {
    let source = EventSource<Int>()
    var owners = (0..<5).map { _ in Owner() }
    for owner in owners { source.observe(with: owner) { _, _ in } }
    let handle = source.observe { _ in }
    #expect(source.observerCount == 6)
    owners.removeFirst(2)
    #expect(source.observerCount == 4)
    handle.cancel()
    #expect(source.observerCount == 3)
    owners.removeAll()
    #expect(source.observerCount == 0)
  }

  @Test func readOnlyViewObservesTheSameSourceButHasNoSend() {
    final class Uploader: Sendable {
      private let finishedSource = EventSource<Int>()
      var finished: ReadOnlyEventSource<Int> { finishedSource.readOnly }
      func finish(_ id: Int) { finishedSource.send(id) }
    }
    let uploader = Uploader()
    let seen = Recorder<Int>()
    // The view offers observation and counting only; `send` is not a member of it.
    let view = uploader.finished
    let copy = view.readOnly
    let subscription = copy.observe { seen.append($0) }
    uploader.finish(7)
    #expect(seen.values == [7])
    #expect(view.observerCount == 1)
    subscription.cancel()
  }

  @Test func cancelIsSafeAfterTheSourceIsGone() {
    let live = LiveCount()
    var source: EventSource<Int>? = EventSource<Int>()
    let owner = Owner()
    let handle: Subscription
    do {
      let captured = Tracked(live)
      handle = source!.observe(with: owner) { _, _ in _ = captured }
    }
    #expect(live.value == 1)
    source = nil
    handle.cancel()
    handle.cancel()
    #expect(!handle.isActive)
    #expect(live.value == 0)
  }
}
