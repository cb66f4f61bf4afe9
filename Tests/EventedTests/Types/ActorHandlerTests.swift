import Testing

@testable import Evented

/// The handler subscriptions of the actor variants run their handler in a task that
/// exists only while the subscription has queued messages. These tests show that the
/// promises hold across the starts and ends of that task.
@Suite struct ActorHandlerTests {
  @Test func actorHandlerKeepsSendOrderAndNeverOverlapsWhileItsTaskEndsAndRestarts() async {
    let source = ActorEventSource<Int>()
    let seen = Recorder<Int>()
    let overlaps = OverlapDetector()
    let subscription = await source.observe { event in
      overlaps.enter()
      if event.isMultiple(of: 7) { await Task.yield() }
      seen.append(event)
      overlaps.leave()
    }
    var next = 0
    for round in 0..<60 {
      // Alternately one event at a time (the task ends between them) and bursts (the
      // task finds a full queue).
      let burst = round.isMultiple(of: 2) ? 1 : 25
      for _ in 0..<burst {
        await source.send(next)
        next += 1
      }
      if round.isMultiple(of: 2) {
        let expected = next
        #expect(await settles { seen.count == expected })
      }
    }
    let total = next
    #expect(await settles { seen.count == total })
    #expect(seen.values == Array(0..<total))
    #expect(overlaps.overlapCount == 0)
    subscription.cancel()
  }

  @Test func actorPropertyHandlerKeepsCommitOrderWhileItsTaskEndsAndRestarts() async {
    let property = ActorProperty(0)
    let seen = Recorder<Int>()
    let subscription = await property.observe { value in seen.append(value) }
    for value in 1...200 {
      await property.setValue(value)
      if value.isMultiple(of: 20) {
        #expect(await settles { seen.values.last == value })
      }
    }
    #expect(await settles { seen.values.last == 200 })
    // State: a handler behind the writes skips to the newest, never back.
    #expect(seen.values == seen.values.sorted() && Set(seen.values).count == seen.count)
    subscription.cancel()
  }

  @Test func deadOwnersDrainTaskEndsAndReleasesTheCapturesWithoutAnotherSend() async {
    let source = ActorEventSource<Int>()
    let live = LiveCount()
    let seen = Recorder<Int>()
    let entered = AsyncGate()
    let release = AsyncGate()
    var owner: Tracked? = Tracked(live, id: 1)
    do {
      let captured = Tracked(live, id: 2)
      await source.observe(with: owner!) { _, event in
        _ = captured
        seen.append(event)
        if event == 0 {
          entered.open()
          await release.wait()
        }
      }
    }
    for event in 0..<20 { await source.send(event) }
    await entered.wait()
    owner = nil
    // The running delivery keeps the owner alive until it returns.
    #expect(live.value == 2)
    release.open()
    #expect(await settles { live.value == 0 }, "the owner and the handler's captures were released")
    #expect(seen.values == [0], "nothing is delivered to a dead owner")
    #expect(await source.observerCount == 0)
  }

  @Test func handlerDeliversWhatIsQueuedThenReleasesItsCapturesWhenTheSourceIsDeinitialized() async {
    var source: ActorEventSource<Int>? = ActorEventSource()
    let live = LiveCount()
    let seen = Recorder<Int>()
    let entered = AsyncGate()
    let release = AsyncGate()
    let subscription: Subscription
    do {
      let captured = Tracked(live)
      subscription = await source!.observe { event in
        _ = captured
        seen.append(event)
        if event == 0 {
          entered.open()
          await release.wait()
        }
      }
    }
    for event in 0..<10 { await source!.send(event) }
    await entered.wait()
    source = nil
    #expect(!subscription.isActive)
    release.open()
    #expect(await settles { seen.count == 10 })
    #expect(seen.values == Array(0..<10))
    #expect(await settles { live.value == 0 }, "the handler's captures were released after the queue")
    withExtendedLifetime(subscription) {}
  }

  @Test func idleHandlerReleasesItsCapturesWhenTheSourceIsDeinitialized() async {
    var property: ActorProperty<Int>? = ActorProperty(0)
    let live = LiveCount()
    let seen = Recorder<Int>()
    let subscription: Subscription
    do {
      let captured = Tracked(live)
      subscription = await property!.observe { value in
        _ = captured
        seen.append(value)
      }
    }
    #expect(await settles { seen.count == 1 })
    // Let the task that delivered the current value end. Nothing signals its end, so
    // this wait is bounded by a short timeout; it only steers the test to an idle
    // subscription and decides nothing: a draining one releases its captures too.
    let handler = subscription.core as! ActorHandler<Update<Int>>
    _ = await settles(timeout: .milliseconds(20)) { handler.state.withLock { !$0.isDraining } }
    property = nil
    #expect(await settles { live.value == 0 })
    withExtendedLifetime(subscription) {}
  }

  @Test func handlerRunsAtThePriorityOfTheSubscribingTask() async {
    let source = ActorEventSource<Int>()
    let priorities = Monitor<[TaskPriority]>([])
    let made = Monitor<Subscription?>(nil)
    // Not awaited: awaiting the task would raise its priority to the test's.
    Task(priority: .utility) {
      let subscription = await source.observe { _ in
        let priority = Task.currentPriority
        priorities.withLock { $0.append(priority) }
      }
      made.withLock { $0 = subscription }
    }
    #expect(await settles { made.current != nil })
    _ = await Task(priority: .high) { await source.send(1) }.value
    #expect(await settles { priorities.current.count == 1 })
    #expect(priorities.current == [.utility])
    made.current?.cancel()
  }

  @Test func eachHandlerCallStartsUncancelled() async {
    let source = ActorEventSource<Int>()
    let cancelledAtStart = Recorder<Bool>()
    let subscription = await source.observe { event in
      cancelledAtStart.append(Task.isCancelled)
      // A handler may cancel the task it runs in; the calls after it must not inherit it.
      if event % 3 == 0 { withUnsafeCurrentTask { $0?.cancel() } }
    }
    for event in 0..<20 { await source.send(event) }
    #expect(await settles { cancelledAtStart.count == 20 })
    #expect(cancelledAtStart.values == Array(repeating: false, count: 20))
    subscription.cancel()
  }
}
