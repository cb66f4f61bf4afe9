import Foundation
import Synchronization
import Testing

@testable import Evented

private final class Watcher: Sendable {}

private final class SubscriptionSlot: Sendable {
  let subscription = Monitor<Subscription?>(nil)
}

@MainActor private final class ActorScreen {
  var shown: [Int] = []
  var streamed: [String] = []
  func show(_ value: Int) { shown.append(value) }
  func showStreamed(_ value: String) { streamed.append(value) }
}

private struct Profile: Equatable, Sendable {
  var name: String
  var visits: Int
}

@Suite struct ActorVariantTests {
  // MARK: Promise 3, serial delivery

  @Test func serialDeliveryActorHandlerNeverRunsConcurrentlyWithItself() async {
    let source = ActorEventSource<Int>()
    let probe = OverlapDetector()
    let seen = Recorder<Int>()
    let subscription = await source.observe { event in
      probe.enter()
      for _ in 0..<3 { await Task.yield() }
      seen.append(event)
      probe.leave()
    }
    await withTaskGroup(of: Void.self) { group in
      for sender in 0..<4 {
        group.addTask {
          for event in 0..<100 { await source.send(sender * 1000 + event) }
        }
      }
    }
    #expect(await settles { seen.count == 400 })
    #expect(probe.overlapCount == 0)
    subscription.cancel()
  }

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

  @Test func commitOrderActorPropertyEndsOnTheFinalValueWhenWritersStop() async {
    let property = ActorProperty(0)
    let handled = Recorder<Int>()
    let changes = Recorder<Change<Int>>()
    let latest = Monitor<Int>(-1)
    let subscription = await property.observe { value in handled.append(value) }
    let changeSubscription = await property.observeChanges { change in changes.append(change) }
    let values = await property.values
    let consumer = Task {
      for await value in values {
        latest.withLock { $0 = value }
        await Task.yield()
      }
    }
    await withTaskGroup(of: Void.self) { group in
      for writer in 0..<4 {
        group.addTask {
          for index in 1...2_500 {
            if index.isMultiple(of: 2) {
              await property.setValue(writer * 1_000_000 + index)
            } else {
              await property.modify { $0 = writer * 1_000_000 + index }
            }
          }
        }
      }
    }
    let final = await property.value
    #expect(await settles { latest.withLock { $0 } == final })
    #expect(await settles { handled.values.last == final && handled.count == changes.count + 1 })
    let all = changes.values
    #expect(all.last?.newValue == final)
    #expect(zip(all, all.dropFirst()).allSatisfy { $0.newValue == $1.oldValue }, "changes slide")
    consumer.cancel()
    await consumer.value
    subscription.cancel()
    changeSubscription.cancel()
    #expect(await property.observerCount == 0)
  }

  // MARK: Promise 5, reentrancy

  @Test func reentrancyActorHandlerMaySendSubscribeAndCancelWithoutDeadlockOrReordering() async {
    let source = ActorEventSource<Int>()
    let property = ActorProperty(0)
    let log = Recorder<String>()
    let own = SubscriptionSlot()
    let late = SubscriptionSlot()
    let subscription = await source.observe { event in
      log.append("a\(event)")
      switch event {
      case 1:
        await property.setValue(await property.value + 1)
        let added = await source.observe { event in log.append("late\(event)") }
        late.subscription.withLock { $0 = added }
        await source.send(2)
      case 2:
        own.subscription.withLock { $0 }?.cancel()
        await source.send(3)
      default:
        break
      }
    }
    own.subscription.withLock { $0 = subscription }
    await source.send(1)
    #expect(await settles { log.values.contains("late3") })
    let all = log.values
    #expect(all.filter { $0.hasPrefix("a") } == ["a1", "a2"], "in order, and not called after its own cancel")
    #expect(all.filter { $0.hasPrefix("late") } == ["late2", "late3"], "added during 1, so 1 is not delivered to it")
    #expect(await property.value == 1)
    late.subscription.withLock { $0 }?.cancel()
    #expect(await source.observerCount == 0)
  }

  // MARK: Promise 7, read your writes

  @Test func readYourWritesActorPropertyReadsTheWrittenValueAndModifyNotifiesOnce() async {
    let property = ActorProperty(1)
    let changes = Recorder<Change<Int>>()
    let subscription = await property.observeChanges { change in changes.append(change) }
    await property.setValue(5)
    #expect(await property.value == 5)
    let doubled = await property.modify { value -> Int in
      value *= 2
      return value
    }
    #expect(doubled == 10)
    #expect(await property.value == 10)
    #expect(await settles { changes.count == 2 })
    #expect(changes.values == [Change(oldValue: 1, newValue: 5), Change(oldValue: 5, newValue: 10)])
    struct Refused: Error {}
    await #expect(throws: Refused.self) {
      try await property.modify { (value: inout Int) throws(Refused) in
        value = 99
        throw Refused()
      }
    }
    #expect(await property.value == 10, "a throwing modify leaves the value as it was")
    subscription.cancel()
  }

  // MARK: Promise 8, dedup

  @Test func dedupIsExactActorPropertyNeverDeliversAnEqualChange() async {
    let property = ActorProperty(1)
    let changes = Recorder<Change<Int>>()
    let subscription = await property.observeChanges { change in changes.append(change) }
    await property.setValue(1)
    await property.modify { $0 = 1 }
    await property.setValue(2)
    await property.setValue(2)
    await withTaskGroup(of: Void.self) { group in
      for writer in 0..<4 {
        group.addTask {
          for index in 0..<500 { await property.setValue((writer + index) % 3) }
        }
      }
    }
    await property.setValue(7)
    #expect(await settles { changes.values.last?.newValue == 7 })
    let all = changes.values
    #expect(all.first == Change(oldValue: 1, newValue: 2))
    #expect(all.allSatisfy { $0.oldValue != $0.newValue })
    let every = ActorProperty(1, skipsDuplicates: false)
    let seen = Recorder<Int>()
    let everySubscription = await every.observe { value in seen.append(value) }
    await every.setValue(1)
    #expect(await settles { seen.values == [1, 1] })
    subscription.cancel()
    everySubscription.cancel()
  }

  @Test func dedupIsExactActorKeyPathObservationSkipsWritesThatLeaveThePartEqual() async {
    let property = ActorProperty(Profile(name: "Ada", visits: 0))
    let names = Recorder<String>()
    let watcher = Watcher()
    await property.observe(\.name, with: watcher) { _, name in names.append(name) }
    await property.modify { $0.visits += 1 }
    await property.modify { $0.name = "Grace" }
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
    await property.modify { $0.visits += 1 }
    await property.modify { $0.name = "second" }
    await property.modify { $0.visits += 1 }
    #expect(await settles { names.values.last == "second" })
    #expect(names.values == ["first", "second"])
    subscription.cancel()
  }

  // MARK: Lifetime and cancellation

  @Test func actorHandlerSubscriptionEndsWhenItsOwnerDeinitializes() async {
    let source = ActorEventSource<Int>()
    let seen = Recorder<Int>()
    var owner: Watcher? = Watcher()
    let subscription = await source.observe(with: owner!) { _, event in seen.append(event) }
    await source.send(1)
    #expect(await settles { seen.values == [1] })
    #expect(subscription.isActive)
    owner = nil
    #expect(!subscription.isActive)
    #expect(await source.observerCount == 0)
    await source.send(2)
    let afterwards = await settles(timeout: .milliseconds(50)) { seen.count > 1 }
    #expect(!afterwards, "no handler runs for a dead owner")
  }

  @Test func actorDeadOwnersHandlerIsReleasedByTheNextSubscribe() async {
    // No send and no observerCount: the next subscription alone must notice the dead
    // owner, end its handler task and release what the handler captured.
    let source = ActorEventSource<Int>()
    let property = ActorProperty(0)
    let live = LiveCount()
    var owner: Watcher? = Watcher()
    do {
      let captured = Tracked(live)
      let other = Tracked(live)
      await source.observe(with: owner!) { _, _ in _ = captured }
      await property.observe(with: owner!) { _, _ in _ = other }
    }
    #expect(live.value == 2)
    owner = nil
    let keep = Watcher()
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
    let watcher = Watcher()
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
    #expect(await settles { handled.values == [0, 4, 5] })
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
