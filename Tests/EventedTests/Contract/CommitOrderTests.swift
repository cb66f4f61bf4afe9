// Promise 4: each subscription receives events and values in the order they were
// committed; for properties, when writers stop, the last value delivered to every live
// subscription equals `value`.

import Dispatch
import Testing

@testable import Evented

@Suite struct CommitOrderContract {
  static let deliveries: [Delivery] = [
    .synchronous,
    .queue(DispatchQueue(label: "commit-order")),
    .queue(DispatchQueue(label: "commit-order-concurrent", attributes: .concurrent)),
  ]

  /// Increments from many threads commit 1, 2, 3, … in that order, so every
  /// synchronous subscription must see exactly that sequence, and changes that slide
  /// (one on a queue, the same with states skipped where it fell behind).
  @Test(arguments: PropertySubjectKind.allCases, deliveries)
  func commitOrderAndLastDeliveredValueEqualsValue(_ kind: PropertySubjectKind, _ delivery: Delivery) {
    let subject = kind.make(0)
    let values = Recorder<Int>()
    let changes = Recorder<Change<Int>>()
    // The handlers take a little time, so that commits queue up behind a delivery.
    let a = subject.observe(on: delivery) {
      values.append($0)
      spin()
    }
    let b = subject.observeChanges(on: delivery) {
      changes.append($0)
      spin()
    }
    let perThread = 300
    #expect(
      onThreads { _ in
        for _ in 0..<perThread { subject.modify { $0 += 1 } }
      })
    let final = contentionThreads * perThread
    #expect(subject.value == final)
    #expect(values.wait { $0.last == final })
    #expect(changes.wait { $0.last?.newValue == final })
    if delivery.queue == nil {
      #expect(values.values == Array(0...final))
      #expect(changes.values == (1...final).map { Change(oldValue: $0 - 1, newValue: $0) })
    } else {
      // On a queue, states coalesce: the values only move forward, and each merged
      // change starts where the one before ended.
      let seen = values.values
      #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 })
      let slid = changes.values
      #expect(slid.first?.oldValue == 0)
      #expect(zip(slid, slid.dropFirst()).allSatisfy { $0.newValue == $1.oldValue && $1.oldValue < $1.newValue })
    }
    a.cancel()
    b.cancel()
  }

  /// Plain writes from many threads, in an order nobody controls: every subscription
  /// still ends on `value`, and the changes it saw slide from one to the next.
  @Test(arguments: PropertySubjectKind.allCases, deliveries)
  func commitOrderLastDeliveredValueEqualsValueAfterRacingWrites(_ kind: PropertySubjectKind, _ delivery: Delivery) {
    let subject = kind.make(-1)
    let latest = (0..<3).map { _ in Monitor(Int.min) }
    let changes = Recorder<Change<Int>>()
    var subscriptions = latest.map { last in subject.observe(on: delivery) { value in last.withLock { $0 = value } } }
    subscriptions.append(subject.observeChanges(on: delivery) { changes.append($0) })
    #expect(
      onThreads { index in
        var random = SplitMix(seed: index)
        for _ in 0..<300 { subject.value = Int.random(in: 0..<1_000, using: &random) }
      })
    let final = subject.value
    for last in latest {
      #expect(last.wait { $0 == final })
    }
    #expect(changes.wait { $0.last?.newValue == final })
    let seen = changes.values
    #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.newValue == $1.oldValue })
    for subscription in subscriptions { subscription.cancel() }
  }

  /// Events from many threads: each sender's events arrive in the order it sent them,
  /// and every subscription sees the same total order (the commit order).
  @Test(arguments: EventSubjectKind.allCases, deliveries)
  func commitOrderEverySubscriptionSeesTheSameOrder(_ kind: EventSubjectKind, _ delivery: Delivery) {
    let subject = kind.make()
    let logs = (0..<3).map { _ in Recorder<Int>() }
    let subscriptions = logs.map { log in
      subject.observe(on: delivery) {
        log.append($0)
        spin()
      }
    }
    let perThread = 300
    #expect(
      onThreads { index in
        for step in 0..<perThread { subject.send(index * 10_000 + step) }
      })
    if kind.isState && delivery.queue != nil {
      // A state observer on a queue may skip to the newest state: each sees the
      // commits it receives in commit order (each sender's in the order it wrote them),
      // and ends on the final write.
      subject.send(-1)
      for log in logs {
        #expect(log.wait { $0.last == -1 })
        let seen = log.values.dropLast()
        for sender in 0..<contentionThreads {
          let own = seen.filter { $0 / 10_000 == sender }
          #expect(zip(own, own.dropFirst()).allSatisfy { $0 < $1 })
        }
      }
      for subscription in subscriptions { subscription.cancel() }
      return
    }
    let total = contentionThreads * perThread
    for log in logs { #expect(log.wait(forCount: total)) }
    let first = logs[0].values
    for log in logs.dropFirst() { #expect(log.values == first) }
    for sender in 0..<contentionThreads {
      let own = first.filter { $0 / 10_000 == sender }
      #expect(own == (0..<perThread).map { sender * 10_000 + $0 })
    }
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test func commitOrderSubscribingWhileOthersWriteReplaysThenContinuesInOrder() {
    let property = Property(0)
    let orderly = Counter()
    let subscribed = Counter()
    let writing = Spawned {
      for _ in 0..<2_000 { property.modify { $0 += 1 } }
    }
    #expect(
      onThreads { _ in
        for _ in 0..<20 {
          let seen = Recorder<Int>()
          let subscription = property.observe { seen.append($0) }
          let values = seen.values
          if zip(values, values.dropFirst()).allSatisfy({ $0 + 1 == $1 }) { orderly.increment() }
          subscribed.increment()
          subscription.cancel()
        }
      })
    #expect(writing.join())
    #expect(orderly.value == subscribed.value)
    #expect(property.value == 2_000)
  }

  // MARK: - Actor variants

  @Test(arguments: ActorEventSubjectKind.allCases)
  func commitOrderActorSubscriptionsReceiveEveryEventInSendOrder(_ kind: ActorEventSubjectKind) async {
    let subject = kind.make()
    let first = Recorder<Int>()
    let second = Recorder<Int>()
    var owner: Owner? = Owner()
    let subscription = await subject.observe { event in first.append(event) }
    await subject.observe(with: owner!) { _, event in
      await Task.yield()
      second.append(event)
    }
    for event in 0..<200 { await subject.send(event) }
    if kind.coalesces {
      // State: in commit order, skipping to the newest when behind, ending on the last.
      #expect(await settles { first.values.last == 199 && second.values.last == 199 })
      #expect(first.values == first.values.sorted() && Set(first.values).count == first.count)
      #expect(second.values == second.values.sorted() && Set(second.values).count == second.count)
    } else {
      #expect(await settles { first.count == 200 && second.count == 200 })
      #expect(first.values == Array(0..<200))
      #expect(second.values == Array(0..<200))
    }
    subscription.cancel()
    // The delivery that recorded the last event holds the owner until it returns: wait
    // for the owner to deinitialize.
    weak let gone = owner
    owner = nil
    #expect(await settles { gone == nil })
    #expect(await subject.observerCount == 0)
  }

  @Test(arguments: ActorPropertySubjectKind.allCases)
  func commitOrderActorPropertyEndsOnTheFinalValueWhenWritersStop(_ kind: ActorPropertySubjectKind) async {
    let property = kind.make()
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
    #expect(await settles { latest.current == final })
    // Each handler holds the newest waiting value: it may skip values, never go back.
    #expect(await settles { handled.values.last == final && changes.values.last?.newValue == final })
    let all = changes.values
    #expect(all.last?.newValue == final)
    #expect(zip(all, all.dropFirst()).allSatisfy { $0.newValue == $1.oldValue }, "changes slide")
    consumer.cancel()
    await consumer.value
    subscription.cancel()
    changeSubscription.cancel()
    #expect(await property.observerCount == 0)
  }
}
