import Synchronization
import Testing

@testable import Evented

extension ActorEventSource {
  /// Where its senders wait for room; made by the first handler subscription.
  fileprivate var senders: ActorBacklog { sinks.backlog! }
}

extension ActorProperty {
  /// Where its writers wait for room; made by the first handler subscription.
  fileprivate var writers: ActorBacklog { updateSinks.backlog! }
}

extension ActorBacklog {
  /// How many senders or writers wait for room. Read without the actor, so that
  /// reading it never holds the actor when the sender arrives.
  fileprivate var waiting: Int { waiterCount.load(ordering: .relaxed) }
}

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

  @Test func slowHandlerNeverHoldsMoreThanTheBacklogLimitOfValues() async {
    let limit = 16
    let property = ActorProperty(0, backlogLimit: limit)
    let peak = Number(0)
    let last = Number(-1)
    let subscription = await property.observe { value in
      // Read on the actor: the latest committed value, so the difference is the
      // number of writes committed after this one and not yet started.
      let backlog = await property.value - value
      if backlog > peak.value { peak.store(backlog) }
      busy(nanoseconds: 20_000)
      last.store(value)
    }
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<4 {
        group.addTask { for _ in 0..<500 { await property.modify { $0 += 1 } } }
      }
    }
    #expect(await property.value == 2_000)
    #expect(await settles { last.value == 2_000 }, "the final value is delivered")
    #expect(peak.value <= limit)
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

  @Test func taskStartedByAHandlerDoesNotWait() async {
    let property = ActorProperty(0, backlogLimit: 2)
    let gate = AsyncGate()
    let last = Number(-1)
    let done = Flag()
    let subscription = await property.observe { value in
      if value == 1 {
        // The handler is held until the task has written past the limit.
        await Task {
          for next in 2...20 { await property.setValue(next) }
          done.set()
        }.value
      }
      if value == 0 { await gate.wait() }
      last.store(value)
    }
    await property.setValue(1)
    gate.open()
    #expect(await settles { done.isSet })
    #expect(await settles { last.value == 20 })
    subscription.cancel()
  }

  // MARK: Releasing waiters

  @Test func cancellingTheSubscriptionReleasesAWaitingWriter() async {
    let property = ActorProperty(0, backlogLimit: 8)
    let gate = AsyncGate()
    let subscription = await property.observeChanges { _ in await gate.wait() }
    let writers = await property.writers
    let writer = Task(executorPreference: SignallingExecutor.shared) {
      for _ in 1...100 { await property.modify { $0 += 1 } }
    }
    #expect(await settles { writers.waiting == 1 })
    subscription.cancel()
    await writer.value
    #expect(await property.value == 100)
    #expect(await property.observerCount == 0)
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
}
