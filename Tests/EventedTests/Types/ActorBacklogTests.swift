import Synchronization
import Testing

@testable import Evented

/// Spins for about `nanoseconds` without suspending: a slow handler that does not sleep.
private func busy(nanoseconds: Int64) {
  let end = ContinuousClock.now + .nanoseconds(nanoseconds)
  while ContinuousClock.now < end {}
}

@Suite struct ActorBacklogTests {
  // MARK: The bound

  @Test func slowHandlerNeverHoldsMoreThanTheBacklogLimitOfEvents() async {
    let limit = 16
    let source = ActorEventSource<Int>(backlogLimit: limit)
    // Stored after each send returns: it trails the committed count by at most the one
    // send in progress, so `sent - event` never overstates the backlog.
    let sent = Number(0)
    let peak = Number(0)
    let last = Number(0)
    let subscription = await source.observe { event in
      let backlog = sent.value - event
      if backlog > peak.value { peak.store(backlog) }
      busy(nanoseconds: 20_000)
      last.store(event)
    }
    for event in 1...2_000 {
      await source.send(event)
      sent.store(event)
    }
    #expect(await settles { last.value == 2_000 })
    #expect(peak.value <= limit)
    #expect(peak.value >= limit / 2, "the sender outran the handler: the bound was reached")
    subscription.cancel()
  }

  @Test func writerNeverWaitsForASlowPropertyHandlerWhichEndsOnTheNewestValue() async {
    let property = ActorProperty(0)
    let gate = AsyncGate()
    let received = Recorder<Int>()
    let holding = Flag()
    let subscription = await property.observe { value in
      if value == 1 {
        holding.set()
        await gate.wait()
      }
      received.append(value)
    }
    #expect(await settles { received.values == [0] })
    await property.setValue(1)
    #expect(await settles { holding.isSet })
    // The handler is held on 1: every later write returns without it.
    for value in 2...2_000 { await property.setValue(value) }
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<4 { group.addTask { for _ in 0..<500 { await property.modify { $0 += 1 } } } }
    }
    #expect(await property.value == 4_000)
    gate.open()
    #expect(await settles { received.values.last == 4_000 })
    #expect(received.values == [0, 1, 4_000], "one waiting value, the newest")
    subscription.cancel()
  }

  @Test func mergedChangeStartsWhereTheLastDeliveredOneEnded() async {
    let property = ActorProperty(0)
    let gate = AsyncGate()
    let changes = Recorder<Change<Int>>()
    let holding = Flag()
    let subscription = await property.observeChanges { change in
      if change.newValue == 1 {
        holding.set()
        await gate.wait()
      }
      changes.append(change)
    }
    await property.setValue(1)
    #expect(await settles { holding.isSet })
    for value in 2...5 { await property.setValue(value) }
    // 2 to 5 are merged while 1 is held.
    gate.open()
    #expect(await settles { changes.count == 2 })
    await property.setValue(3)
    #expect(await settles { changes.count == 3 })
    let pairs = changes.values.map { [$0.oldValue, $0.newValue] }
    #expect(pairs == [[0, 1], [1, 5], [5, 3]])
    subscription.cancel()
  }

  @Test func mergedChangeBackToTheDeliveredValueIsSkipped() async {
    let property = ActorProperty(0)
    let gate = AsyncGate()
    let changes = Recorder<Change<Int>>()
    let holding = Flag()
    let subscription = await property.observeChanges { change in
      if change.newValue == 1 {
        holding.set()
        await gate.wait()
      }
      changes.append(change)
    }
    await property.setValue(1)
    #expect(await settles { holding.isSet })
    await property.setValue(2)
    await property.setValue(1)
    gate.open()
    await property.setValue(7)
    #expect(await settles { changes.values.last?.newValue == 7 })
    let pairs = changes.values.map { [$0.oldValue, $0.newValue] }
    #expect(pairs == [[0, 1], [1, 7]], "1 to 2 to 1, merged, is no change")
    subscription.cancel()
  }

  @Test func sendWaitsAtTheDefaultLimitOf1024UntilTheHandlerTakesTheNext() async {
    let source = ActorEventSource<Int>()
    let gate = AsyncGate()
    let handled = Number(0)
    let subscription = await source.observe { event in
      if event == 1 { await gate.wait() }
      handled.store(event)
    }
    let sent = Number(0)
    let senders = await source.senders
    // On the signalling executor: nothing else signals that the sender has suspended.
    let sender = Task(executorPreference: SignallingExecutor.shared) {
      for event in 1...2_000 {
        await source.send(event)
        sent.store(event)
      }
    }
    // The handler holds event 1; 1,024 more fill its queue; the next send waits.
    #expect(await settles { senders.waiting == 1 && sent.value == 1_025 })
    gate.open()
    await sender.value
    #expect(await settles { handled.value == 2_000 }, "the final event is delivered")
    subscription.cancel()
  }

  // MARK: First come, first served

  /// Senders that find the queue full commit in the order they arrived, and a sender
  /// arriving after them queues behind them even when it finds room.
  @Test func waitingSendersCommitInTheOrderTheyArrivedAndNoLaterSenderGoesFirst() async {
    let (source, gate, received, subscription) = await heldActorSource(limit: 1)
    let senders = await source.senders
    var waiting: [Task<Void, Never>] = []
    for event in 2...6 {
      waiting.append(Task(executorPreference: SignallingExecutor.shared) { await source.send(event) })
      #expect(await settles { senders.waiting == event - 1 }, "sender \(event) waits")
    }
    gate.open()
    // Arrives while the waiting senders are being let in.
    await source.send(7)
    for task in waiting { await task.value }
    #expect(await settles { received.count == 8 })
    #expect(received.values == Array(0...7))
    subscription.cancel()
  }

  /// While a sender holds a ticket, a sender that finds room still queues behind it,
  /// and commits once the ticket is returned.
  @Test func aSenderThatFindsRoomWaitsWhileAnEarlierSenderHoldsATicket() async {
    let source = ActorEventSource<Int>(backlogLimit: 4)
    let received = Recorder<Int>()
    let subscription = await source.observe { received.append($0) }
    let senders = await source.senders
    let ticket = senders.takeTicket()
    let sender = Task(executorPreference: SignallingExecutor.shared) { await source.send(1) }
    #expect(await settles { senders.waiting == 1 }, "the queue has room, but a ticket is out")
    #expect(received.values.isEmpty)
    senders.returnTicket(ticket)
    #expect(await sender.value)
    #expect(await settles { received.values == [1] })
    subscription.cancel()
  }

  @Test func aCancelledSenderLeavesTheLineAndTheNextOneGoesOn() async {
    let (source, gate, received, subscription) = await heldActorSource(limit: 1)
    let senders = await source.senders
    let first = Task(executorPreference: SignallingExecutor.shared) { await source.send(2) }
    #expect(await settles { senders.waiting == 1 })
    let second = Task(executorPreference: SignallingExecutor.shared) { await source.send(3) }
    #expect(await settles { senders.waiting == 2 })
    // The oldest ticket's holder is cancelled: it goes past the limit (a cancelled
    // sender never waits) and leaves the line; the next waits for room.
    first.cancel()
    #expect(await first.value)
    #expect(await settles { senders.waiting == 1 })
    gate.open()
    #expect(await second.value)
    #expect(await settles { received.count == 4 })
    #expect(received.values == [0, 1, 2, 3])
    subscription.cancel()
  }

  // MARK: Who never waits

  @Test func handlerMaySendToItsOwnSourceBeyondTheLimit() async {
    let source = ActorEventSource<Int>(backlogLimit: 4)
    let handled = Number(0)
    let sentFromHandler = Flag()
    let subscription = await source.observe { event in
      handled.increment()
      if event == 0 {
        for next in 1...100 { await source.send(next) }
        sentFromHandler.set()
      }
    }
    await source.send(0)
    #expect(await settles { sentFromHandler.isSet }, "a send from the handler never waits for the handler")
    #expect(await settles { handled.value == 101 })
    subscription.cancel()
  }

  @Test func handlersOfTwoSourcesMaySendToEachOtherBeyondTheLimit() async {
    // Each delivery of depth d > 0 sends 4 events of depth d - 1 to the other source,
    // from the handler, while the limit is 2: both queues overflow, and each handler
    // sends to a source whose handler sends back.
    let a = ActorEventSource<Int>(backlogLimit: 2)
    let b = ActorEventSource<Int>(backlogLimit: 2)
    let handled = Number(0)
    let first = await a.observe { depth in
      handled.increment()
      if depth > 0 { for _ in 0..<4 { await b.send(depth - 1) } }
    }
    let second = await b.observe { depth in
      handled.increment()
      if depth > 0 { for _ in 0..<4 { await a.send(depth - 1) } }
    }
    // Outside senders, which may wait, at the same time.
    await withTaskGroup(of: Void.self) { group in
      group.addTask { for _ in 0..<5 { await a.send(4) } }
      group.addTask { for _ in 0..<5 { await b.send(4) } }
    }
    // 10 trees of 1 + 4 + 16 + 64 + 256 deliveries.
    #expect(await settles { handled.value == 10 * 341 })
    first.cancel()
    second.cancel()
  }

  @Test func taskStartedByAHandlerDoesNotWaitWhileTheHandlerRuns() async {
    let source = ActorEventSource<Int>(backlogLimit: 2)
    let last = Number(-1)
    let done = Flag()
    let subscription = await source.observe { event in
      if event == 1 {
        // The handler awaits the task, which sends past the limit to this handler.
        await Task {
          for next in 2...20 { await source.send(next) }
          done.set()
        }.value
      }
      last.store(event)
    }
    await source.send(1)
    #expect(await settles { done.isSet })
    #expect(await settles { last.value == 20 })
    subscription.cancel()
  }

  @Test func taskStartedByAHandlerWaitsAfterTheHandlerReturned() async {
    let source = ActorEventSource<Int>(backlogLimit: 4)
    let gate = AsyncGate()
    let returned = AsyncGate()
    let started = Recorder<Task<Void, Never>>()
    let sent = Number(0)
    let subscription = await source.observe { event in
      if event == -1 {
        // Started from the handler, on the signalling executor, and left running: it
        // sends only once this call has returned.
        started.append(
          Task(executorPreference: SignallingExecutor.shared) {
            await returned.wait()
            for next in 1...100 {
              await source.send(next)
              sent.store(next)
            }
          })
      }
      if event == -2 {
        // The call for -1 has returned: calls of one subscription never overlap.
        returned.open()
        await gate.wait()
      }
    }
    await source.send(-1)
    await source.send(-2)
    let senders = await source.senders
    // The handler is held on -2: the task fills the queue and then waits like any
    // other sender.
    #expect(await settles { senders.waiting == 1 })
    #expect(sent.value <= 4, "the task sent \(sent.value): it went past the limit")
    gate.open()
    await started.values.first?.value
    #expect(sent.value == 100)
    subscription.cancel()
  }

  // MARK: Releasing waiters

  @Test func cancellingTheSubscriptionReleasesAWaitingSender() async {
    let source = ActorEventSource<Int>(backlogLimit: 8)
    let gate = AsyncGate()
    let subscription = await source.observe { _ in await gate.wait() }
    let senders = await source.senders
    let sender = Task(executorPreference: SignallingExecutor.shared) {
      for event in 1...100 { await source.send(event) }
    }
    #expect(await settles { senders.waiting == 1 })
    subscription.cancel()
    await sender.value
    #expect(await source.observerCount == 0)
    gate.open()
  }

  @Test func removingAllObserversReleasesAWaitingSender() async {
    let source = ActorEventSource<Int>(backlogLimit: 8)
    let gate = AsyncGate()
    let subscription = await source.observe { _ in await gate.wait() }
    let senders = await source.senders
    let sender = Task(executorPreference: SignallingExecutor.shared) {
      for event in 1...100 { await source.send(event) }
    }
    #expect(await settles { senders.waiting == 1 })
    await source.removeAllObservers()
    await sender.value
    #expect(await source.observerCount == 0)
    gate.open()
    subscription.cancel()
  }

  @Test func cancelledWaitingSenderStopsWaitingAndSends() async {
    let source = ActorEventSource<Int>(backlogLimit: 4)
    let gate = AsyncGate()
    let handled = Recorder<Int>()
    let subscription = await source.observe { event in
      if event == 1 { await gate.wait() }
      handled.append(event)
    }
    let senders = await source.senders
    let sender = Task(executorPreference: SignallingExecutor.shared) {
      for event in 1...6 { await source.send(event) }
    }
    #expect(await settles { senders.waiting == 1 })
    sender.cancel()
    await sender.value
    #expect(senders.waiting == 0)
    gate.open()
    #expect(await settles { handled.count == 6 }, "the cancelled send was committed, after the others")
    #expect(handled.values == Array(1...6))
    subscription.cancel()
  }

  @Test func cancelledSenderIsRefusedPastTwiceTheLimitSoMemoryStaysBounded() async {
    let source = ActorEventSource<Int>(backlogLimit: 4)
    let gate = AsyncGate()
    let handled = Recorder<Int>()
    let holding = Flag()
    let subscription = await source.observe { event in
      if event == 1 {
        holding.set()
        await gate.wait()
      }
      handled.append(event)
    }
    await source.send(1)
    #expect(await settles { holding.isSet })
    let results = await Task {
      withUnsafeCurrentTask { $0?.cancel() }
      var results: [Bool] = []
      for event in 2...100 { results.append(await source.send(event)) }
      return results
    }.value
    // Event 1 is being handled; 2 to 9 wait (twice the limit); the rest is refused.
    #expect(results == Array(repeating: true, count: 8) + Array(repeating: false, count: 91))
    gate.open()
    #expect(await settles { handled.count == 9 })
    #expect(handled.values == Array(1...9), "nothing refused is delivered, nothing sent is lost")
    subscription.cancel()
  }

  @Test func handlerMayCancelAndAwaitASenderThatWaitsForIt() async {
    let source = ActorEventSource<Int>(backlogLimit: 4)
    let producer = Recorder<Task<Int, Never>>()
    let gate = AsyncGate()
    let finished = Flag()
    let subscription = await source.observe { event in
      if event == 1 {
        await gate.wait()
        // The producer waits for room in this very handler's queue.
        guard let task = producer.values.first else { return }
        task.cancel()
        _ = await task.value
        finished.set()
      }
    }
    let senders = await source.senders
    producer.append(
      Task(executorPreference: SignallingExecutor.shared) {
        var sent = 0
        for event in 1...10_000 where await source.send(event) { sent += 1 }
        return sent
      })
    #expect(await settles { senders.waiting == 1 })
    gate.open()
    #expect(await settles { finished.isSet }, "the handler's await of the cancelled sender ended")
    #expect(senders.waiting == 0)
    subscription.cancel()
  }
}
