import Foundation
import Synchronization
import Testing

@testable import Evented

@MainActor private final class ActorScreen {
  var shown: [Int] = [] { didSet { Changes.signal() } }
  var streamed: [String] = []
  func show(_ value: Int) { shown.append(value) }
  func showStreamed(_ value: String) { streamed.append(value) }
}

private struct Profile: Equatable, Sendable {
  var name: String
  var visits: Int
}

@Suite struct ActorVariantTests {
  // MARK: Promise 4, commit order

  @Test func commitOrderActorEventSourceDeliversEveryEventInSendOrder() async {
    let source = ActorEventSource<Int>()
    let handled = Recorder<Int>()
    let subscription = await source.observe { event in handled.append(event) }
    let events = await source.events(bufferingPolicy: .unbounded)
    let consumer = Task {
      var received: [Int] = []
      for await event in events {
        received.append(event)
        if received.count == 10_000 { break }
      }
      return received
    }
    for event in 0..<10_000 { await source.send(event) }
    #expect(await consumer.value == Array(0..<10_000))
    #expect(await settles { handled.count == 10_000 })
    #expect(handled.values == Array(0..<10_000))
    subscription.cancel()
    #expect(await source.observerCount == 0)
  }

  // MARK: Promise 8, dedup

  @Test func dedupIsExactActorKeyPathObservationSkipsWritesThatLeaveThePartEqual() async {
    let property = ActorProperty(Profile(name: "Ada", visits: 0))
    let names = Recorder<String>()
    let watcher = Owner()
    await property.observe(\.name, with: watcher) { _, name in names.append(name) }
    #expect(await settles { names.values == ["Ada"] })
    await property.modify { $0.visits += 1 }
    await property.modify { $0.name = "Grace" }
    // Waiting writes merge into the newest: wait for each name, so that each is seen.
    #expect(await settles { names.values.last == "Grace" })
    await property.modify { $0.visits += 1 }
    await property.setValue(Profile(name: "Linus", visits: 9))
    #expect(await settles { names.values.last == "Linus" })
    #expect(names.values == ["Ada", "Grace", "Linus"])
    withExtendedLifetime(watcher) {}
  }

  @Test func dedupIsExactActorOwnerlessKeyPathObservationSkipsWritesThatLeaveThePartEqual() async {
    let property = ActorProperty(Profile(name: "first", visits: 0))
    let names = Recorder<String>()
    let subscription = await property.observe(\.name) { name in names.append(name) }
    #expect(await settles { names.values == ["first"] })
    await property.modify { $0.visits += 1 }
    await property.modify { $0.name = "second" }
    await property.modify { $0.visits += 1 }
    #expect(await settles { names.values.last == "second" })
    #expect(names.values == ["first", "second"])
    subscription.cancel()
  }

  // MARK: Lifetime and cancellation

  /// As for a lock-based source, `removeAllObservers()` lets a sequence hand out the
  /// events it buffered before it finishes.
  @Test func actorRemoveAllObserversFinishesASequenceAfterItsBufferedEvents() async {
    let source = ActorEventSource<Int>()
    let events = await source.events()
    await source.send(1)
    await source.send(2)
    await source.removeAllObservers()
    await source.send(3)
    var received: [Int] = []
    for await event in events { received.append(event) }
    #expect(received == [1, 2])
    #expect(await source.observerCount == 0)

    let twin = EventSource<Int>()
    let twinEvents = twin.events()
    twin.send(1)
    twin.send(2)
    twin.removeAllObservers()
    twin.send(3)
    var twinReceived: [Int] = []
    for await event in twinEvents { twinReceived.append(event) }
    #expect(twinReceived == received)
  }

  @Test func actorDeadOwnersHandlerIsReleasedByTheNextSubscribe() async {
    // No send and no observerCount: the next subscription alone must notice the dead
    // owner, end its handler task and release what the handler captured.
    let source = ActorEventSource<Int>()
    let property = ActorProperty(0)
    let live = LiveCount()
    var owner: Owner? = Owner()
    do {
      let captured = Tracked(live)
      let other = Tracked(live)
      await source.observe(with: owner!) { _, _ in _ = captured }
      await property.observe(with: owner!) { _, _ in _ = other }
    }
    #expect(live.value == 2)
    owner = nil
    let keep = Owner()
    await source.observe(with: keep) { _, _ in }
    await property.observeChanges(with: keep) { _, _ in }
    #expect(await settles { live.value == 0 }, "the dead owner's handler tasks and captures were released")
    withExtendedLifetime(keep) {}
  }

  @Test func actorOwnerlessSubscriptionEndsWhenItsHandleIsReleased() async {
    let source = ActorEventSource<Int>()
    var subscription: Subscription? = await source.observe { _ in }
    #expect(await source.observerCount == 1)
    _ = subscription
    subscription = nil
    #expect(await source.observerCount == 0)
  }

  @Test func actorObserveOnceDeliversAtMostOnce() async {
    let source = ActorEventSource<Int>()
    let seen = Recorder<Int>()
    let watcher = Owner()
    await source.observeOnce(with: watcher) { _, event in
      seen.append(event)
      await source.send(event + 100)
    }
    for event in 1...5 { await source.send(event) }
    #expect(await settles { seen.count == 1 })
    #expect(seen.values == [1])
    #expect(await source.observerCount == 0)
    withExtendedLifetime(watcher) {}
  }

  @Test func actorSequenceCancellationLeavesNoSubscriptionBehind() async {
    let source = ActorEventSource<Int>()
    let property = ActorProperty("a")
    let events = await source.events()
    let values = await property.values
    let eventTask = Task { for await _ in events {} }
    let valueTask = Task { for await _ in values {} }
    await source.send(1)
    eventTask.cancel()
    valueTask.cancel()
    await eventTask.value
    await valueTask.value
    #expect(await source.observerCount == 0)
    #expect(await property.observerCount == 0)
    do {
      let unused = await source.events()
      _ = unused
    }
    #expect(await source.observerCount == 0)
    await source.removeAllObservers()
  }

  @Test func actorSequencesFinishWhenTheActorDeinitializes() async {
    var source: ActorEventSource<Int>? = ActorEventSource()
    var property: ActorProperty<Int>? = ActorProperty(0)
    let events = await source!.events(bufferingPolicy: .bufferingOldest(2))
    let values = await property!.values
    let handled = Recorder<Int>()
    let handlerSubscription = await property!.observe { value in handled.append(value) }
    for event in 1...3 { await source!.send(event) }
    await property!.setValue(4)
    await property!.setValue(5)
    source = nil
    property = nil
    var received: [Int] = []
    for await event in events { received.append(event) }
    #expect(received == [1, 2])
    var latest: [Int] = []
    for await value in values { latest.append(value) }
    #expect(latest == [5])
    // The handler holds the newest waiting value: it may skip 0 and 4, not 5.
    #expect(await settles { handled.values.last == 5 })
    #expect([[0, 4, 5], [0, 5], [4, 5], [5]].contains(handled.values))
    #expect(!handlerSubscription.isActive, "a handle knows when its actor is gone")
  }

  // MARK: Main actor

  @Test @MainActor func mainActorTypeObservesActorSourcesWithMainActorHandlersAndForAwait() async {
    let screen = ActorScreen()
    let source = ActorEventSource<Int>()
    let property = ActorProperty("")
    let subscription = await source.observe(with: screen) { @MainActor screen, event in screen.show(event) }
    let names = await property.values(bufferingPolicy: .unbounded)
    let streaming = Task { @MainActor in
      for await name in names {
        screen.showStreamed(name)
        if name == "b" { break }
      }
    }
    for event in 1...3 { await source.send(event) }
    await property.setValue("a")
    await property.setValue("b")
    await streaming.value
    #expect(screen.streamed == ["", "a", "b"])
    #expect(await settles { screen.shown == [1, 2, 3] })
    subscription.cancel()
  }

  // MARK: Read-only views

  @Test func actorReadOnlyViewsObserveButCannotWrite() async {
    let property = ActorProperty(1)
    let source = ActorEventSource<Int>()
    let propertyView = property.readOnly
    let sourceView = source.readOnly
    let values = await propertyView.values(bufferingPolicy: .unbounded)
    let events = await sourceView.events()
    let seen = Recorder<String>()
    let owner = Owner()
    await propertyView.observeChanges(with: owner) { _, change in seen.append("change \(change.newValue)") }
    await sourceView.observeOnce(with: owner) { _, event in seen.append("once \(event)") }
    #expect(await propertyView.observerCount == 2)
    #expect(await sourceView.observerCount == 2)
    await property.setValue(2)
    await source.send(7)
    await source.send(8)
    #expect(await propertyView.value == 2)
    var valueIterator = values.makeAsyncIterator()
    #expect(await valueIterator.next() == 1)
    #expect(await valueIterator.next() == 2)
    var eventIterator = events.makeAsyncIterator()
    #expect(await eventIterator.next() == 7)
    #expect(await eventIterator.next() == 8)
    #expect(await settles { seen.values.sorted() == ["change 2", "once 7"] })
    withExtendedLifetime(owner) {}
  }
}
