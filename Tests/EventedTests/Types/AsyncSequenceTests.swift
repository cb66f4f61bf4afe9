import Foundation
import Synchronization
import Testing

@testable import Evented

/// Runs `body(index)` on `count` new threads and returns when all have finished.
private func onNewThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
  final class Join: Sendable {
    let remaining: Number
    let waiter = Monitor<CheckedContinuation<Void, Never>?>(nil)
    init(_ count: Int) { remaining = Number(count) }
  }
  let join = Join(count)
  await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
    join.waiter.withLock { $0 = done }
    for index in 0..<count {
      let thread = Thread {
        body(index)
        if join.remaining.add(-1) == 0 {
          join.waiter.withLock { $0.take() }?.resume()
        }
      }
      thread.start()
    }
  }
}

/// Collects every element until the sequence finishes.
private func collect<S: AsyncSequence>(_ sequence: S) async -> [S.Element] where S.Failure == Never {
  var all: [S.Element] = []
  for await element in sequence { all.append(element) }
  return all
}

private final class ProfileModel: Sendable {
  let name = Property("")
  let didFail = EventSource<Int>()
}

@MainActor private final class MainScreen {
  var shown: [Int] = [] { didSet { Changes.signal() } }
  var streamed: [Int] = []
  func show(_ value: Int) { shown.append(value) }
  func showStreamed(_ value: Int) { streamed.append(value) }
}

@Suite struct AsyncSequenceTests {
  // MARK: Nothing lost, final value

  @Test func tenThousandEventsThroughAnUnboundedSequenceLoseNone() async {
    let source = EventSource<Int>()
    let events = source.events(bufferingPolicy: .unbounded)
    let consumer = Task {
      var received: [Int] = []
      for await event in events {
        received.append(event)
        if received.count == 10_000 { break }
      }
      return received
    }
    await onNewThreads(1) { _ in
      for event in 0..<10_000 { source.send(event) }
    }
    let received = await consumer.value
    #expect(received == Array(0..<10_000))
    #expect(source.observerCount == 0)
  }

  @Test func propertyWrittenFromFourThreadsWhileASlowConsumerIteratesEndsOnTheFinalValue() async {
    let property = Property(-1)
    let latest = Number(-2)
    let values = property.values
    let consumer = Task {
      var received = 0
      for await value in values {
        latest.store(value)
        received += 1
        for _ in 0..<3 { await Task.yield() }
      }
      return received
    }
    await onNewThreads(4) { thread in
      for index in 0..<25_000 { property.value = thread * 1_000_000 + index }
    }
    let final = property.value
    #expect(final % 1_000_000 == 24_999)
    let endedOnFinal = await settles { latest.value == final }
    #expect(endedOnFinal)
    consumer.cancel()
    let received = await consumer.value
    #expect(received < 100_000, "newest-wins buffering lets a slow consumer skip values")
    #expect(property.observerCount == 0)
  }

  // MARK: Cancellation leaves nothing behind

  @Test func cancellingTheTaskRemovesTheSubscription() async {
    let source = EventSource<Int>()
    let property = Property(0)
    let started = Number(0)
    let events = source.events()
    let values = property.values
    let eventTask = Task {
      for await _ in events { started.increment() }
    }
    let valueTask = Task {
      for await _ in values { started.increment() }
    }
    source.send(1)
    #expect(await settles { started.value == 2 })
    #expect(source.observerCount == 1)
    #expect(property.observerCount == 1)
    eventTask.cancel()
    valueTask.cancel()
    await eventTask.value
    await valueTask.value
    // A sequence's subscription ends before `next()` returns nil: the tasks' return decided it.
    #expect(source.observerCount == 0)
    #expect(property.observerCount == 0)
  }

  @Test func cancellingATaskThatWaitsForItsFirstElementRemovesTheSubscription() async {
    let source = EventSource<Int>()
    let events = source.events()
    let task = Task { await collect(events) }
    task.cancel()
    #expect(await task.value == [])
    #expect(source.observerCount == 0)
  }

  @Test func breakingOutOfTheLoopRemovesTheSubscription() async {
    let property = Property(0)
    let values = property.values
    for await _ in values { break }
    #expect(property.observerCount == 0)
    var again: [Int] = []
    for await value in values { again.append(value) }
    #expect(again == [], "a sequence is single-pass")
  }

  @Test func droppingTheIteratorRemovesTheSubscription() async {
    let source = EventSource<Int>()
    var iterator: AsyncEvents<Int>.Iterator? = source.events().makeAsyncIterator()
    source.send(1)
    #expect(await iterator?.next() == 1)
    #expect(source.observerCount == 1)
    iterator = nil
    #expect(source.observerCount == 0)
  }

  @Test func iteratorsAreValuesLikeThoseOfAsyncStream() async {
    // `var iterator = sequence.makeAsyncIterator()` is the idiom: a struct whose
    // `next()` is mutating, so the `var` is needed and draws no warning.
    let source = EventSource<Int>()
    let property = Property(0)
    var events = source.events().makeAsyncIterator()
    var values = property.values.makeAsyncIterator()
    #expect(!isClass(type(of: events)))
    #expect(!isClass(type(of: values)))
    source.send(1)
    #expect(await events.next() == 1)
    #expect(await values.next() == 0)
    let copy = events
    _ = copy
    #expect(source.observerCount == 1, "a copy shares the subscription")
  }

  @Test func droppingASequenceThatWasNeverIteratedRemovesTheSubscription() {
    let source = EventSource<Int>()
    let property = Property("a")
    do {
      let events = source.events()
      let values = property.values(bufferingPolicy: .unbounded)
      #expect(source.observerCount == 1)
      #expect(property.observerCount == 1)
      _ = (events, values)
    }
    #expect(source.observerCount == 0)
    #expect(property.observerCount == 0)
  }

  @Test func cancellationLeavesNoSubscriptionBehindUnderLoad() async {
    let source = EventSource<Int>()
    let stop = Flag()
    let sender = Task.detached {
      var event = 0
      while !stop.isSet {
        source.send(event)
        event += 1
        await Task.yield()
      }
    }
    await withTaskGroup(of: Void.self) { group in
      for round in 0..<200 {
        let events = source.events(bufferingPolicy: round.isMultiple(of: 2) ? .unbounded : .bufferingNewest(1))
        let consumer = Task { for await _ in events {} }
        group.addTask {
          for _ in 0..<(round % 3) { await Task.yield() }
          consumer.cancel()
          await consumer.value
        }
      }
    }
    stop.set()
    await sender.value
    // Every consumer's task has returned, so every subscription has ended.
    #expect(source.observerCount == 0)
  }

  // MARK: Buffering policies

  @Test func unboundedBufferingKeepsEveryEvent() async {
    var source: EventSource<Int>? = EventSource()
    let events = source!.events(bufferingPolicy: .unbounded)
    for event in 1...5 { source!.send(event) }
    source = nil
    #expect(await collect(events) == [1, 2, 3, 4, 5])
  }

  @Test func bufferingNewestKeepsTheLatestEvents() async {
    var source: EventSource<Int>? = EventSource()
    let events = source!.events(bufferingPolicy: .bufferingNewest(2))
    let none = source!.events(bufferingPolicy: .bufferingNewest(0))
    for event in 1...5 { source!.send(event) }
    source = nil
    #expect(await collect(events) == [4, 5])
    #expect(await collect(none) == [])
  }

  @Test func bufferingOldestKeepsTheFirstEvents() async {
    var source: EventSource<Int>? = EventSource()
    let events = source!.events(bufferingPolicy: .bufferingOldest(2))
    for event in 1...5 { source!.send(event) }
    source = nil
    #expect(await collect(events) == [1, 2])
  }

  @Test func valuesKeepOnlyTheNewestValueByDefault() async {
    var property: Property<Int>? = Property(0)
    let values = property!.values
    let every = property!.values(bufferingPolicy: .unbounded)
    for value in 1...3 { property!.value = value }
    property = nil
    #expect(await collect(values) == [3])
    #expect(await collect(every) == [0, 1, 2, 3])
  }

  // MARK: Every property is a sequence

  @Test func forAwaitOverAPropertyStartsWithTheCurrentValueAndEndsOnTheLatest() async {
    let property = Property(0)
    var seen: [Int] = []
    for await value in property {
      seen.append(value)
      if value == 0 {
        for next in 1...100 { property.value = next }  // while the loop is busy
      }
      if value == 100 { break }
    }
    #expect(seen == [0, 100])
    #expect(property.observerCount == 0)
  }

  @Test func forAwaitOverAReadOnlyPropertyStartsWithTheCurrentValueAndEndsOnTheLatest() async {
    let property = Property(1)
    /// Iterates `view` itself, writing 2...100 to `property` while the loop is busy.
    func iterate(_ view: ReadOnlyProperty<Int>, until last: Int) async -> [Int] {
      property.value = 1
      var seen: [Int] = []
      for await value in view {
        seen.append(value)
        if seen.count == 1 {
          for next in 2...100 { property.value = next }
        }
        if value == last { break }
      }
      return seen
    }
    #expect(await iterate(property.readOnly, until: 100) == [1, 100])
    #expect(await iterate(property.map { $0 * 2 }, until: 200) == [2, 200])
    var constant: [String] = []
    for await value in ReadOnlyProperty(constant: "fixed") {
      constant.append(value)
      break
    }
    #expect(constant == ["fixed"])
    #expect(property.observerCount == 0)
  }

  @Test func forAwaitOverAnArraysReadOnlyViewStartsWithTheCurrentArrayAndEndsOnTheLatest() async {
    let friends = ArrayProperty(["Ann"])
    var seen: [[String]] = []
    for await array in friends.readOnly {
      seen.append(array)
      if array == ["Ann"] {
        friends.append("Bob")
        friends.append("Cy")
      }
      if array.count == 3 { break }
    }
    #expect(seen == [["Ann"], ["Ann", "Bob", "Cy"]])
  }

  @Test func mapOnAPropertyStillMakesADerivedValue() async {
    let property = Property(1)
    let label = property.map { "#\($0)" }
    let doubled = property.readOnly.map { value in
      let twice = value * 2
      return twice
    }
    property.value = 2
    #expect(label.value == "#2")
    #expect(doubled.value == 4)
    let streamed = property.map { @Sendable value async in value * 10 }
    var iterator = streamed.makeAsyncIterator()
    #expect(await iterator.next() == 20)
  }

  @Test func asyncSequenceOperatorsApplyToAPropertyItself() async {
    let property = Property(3)
    #expect(await property.first { $0 > 2 } == 3)
    // A constant's sequence would finish only when the constant is gone: take one.
    #expect(await collect(ReadOnlyProperty(constant: 4).filter { $0.isMultiple(of: 2) }.prefix(1)) == [4])
  }

  @Test func valuesStartWithTheCurrentValue() async {
    let property = Property("first")
    var iterator = property.values.makeAsyncIterator()
    #expect(await iterator.next() == "first")
    property.value = "second"
    #expect(await iterator.next() == "second")
    #expect(await collect(ReadOnlyProperty(constant: 7).values) == [7])
  }

  @Test func aWaitingConsumerIsResumedByTheNextEvent() async {
    let source = EventSource<Int>()
    let events = source.events(bufferingPolicy: .bufferingNewest(1))
    let waiting = Flag()
    let consumer = Task {
      var iterator = events.makeAsyncIterator()
      waiting.set()
      return await iterator.next()
    }
    #expect(await settles { waiting.isSet })
    source.send(42)
    #expect(await consumer.value == 42)
  }

  // MARK: Atomic registration

  @Test func sequenceReceivesEverythingCommittedAfterItWasMadeAndNothingBefore() async {
    let total = 20_000
    for _ in 0..<20 {
      let source = EventSource<Int>()
      let sent = Number(0)
      let running = Flag()
      let made = Task.detached { () -> (Int, Int, AsyncEvents<Int>) in
        while !running.isSet { await Task.yield() }
        let before = sent.value
        let sequence = source.events(bufferingPolicy: .unbounded)
        let after = sent.value
        return (before, after, sequence)
      }
      await onNewThreads(1) { _ in
        for event in 0..<total {
          if event == 100 { running.set() }
          source.send(event)
          sent.store(event + 1)
        }
      }
      let (before, after, sequence) = await made.value
      // Only a sequence made before the last send is sure to receive something.
      guard after < total else { continue }
      var received: [Int] = []
      for await event in sequence {
        received.append(event)
        if event == total - 1 { break }
      }
      guard let first = received.first else {
        Issue.record("events committed after the call were missed")
        continue
      }
      #expect(first >= before, "nothing committed before the call appears")
      #expect(first <= after + 1, "nothing committed after the call is missed (one send may be in flight)")
      #expect(received == Array(first..<total))
      #expect(source.observerCount == 0)
    }
  }

  @Test func valuesRegisterTogetherWithTheCurrentValue() async {
    let property = Property(0, skipsDuplicates: false)
    let last = 20_000
    let writer = Task {
      await onNewThreads(1) { _ in
        for value in 1...last { property.value = value }
      }
    }
    for _ in 0..<10 {
      let values = property.values(bufferingPolicy: .unbounded)
      var iterator = values.makeAsyncIterator()
      guard var previous = await iterator.next() else {
        Issue.record("no current value")
        break
      }
      while previous < last {
        guard let value = await iterator.next() else { break }
        #expect(value == previous + 1, "consecutive writes, none missed, none repeated")
        previous = value
      }
      #expect(previous == last)
    }
    await writer.value
    #expect(property.observerCount == 0)
  }

  // MARK: Lifetime

  @Test func sequencesFinishWhenTheSourceDeinitializes() async {
    var model: ProfileModel? = ProfileModel()
    weak let weakModel = model
    let names = model!.name.values
    let failures = model!.didFail.events()
    let nameTask = Task { await collect(names) }
    let failureTask = Task { await collect(failures) }
    model!.name.value = "Ada"
    model!.didFail.send(1)
    model = nil
    #expect(weakModel == nil, "a sequence does not keep its source alive")
    #expect(await nameTask.value.last == "Ada")
    #expect(await failureTask.value == [1])
  }

  @Test func aSequenceOfAReadOnlyViewKeepsItsPropertyOnlyAsLongAsTheView() async {
    var property: Property<Int>? = Property(1)
    var view = property?.readOnly
    let values = view!.values
    property = nil
    let task = Task { await collect(values) }
    #expect(view?.observerCount == 1, "the view keeps the property alive")
    #expect(view?.value == 1)
    view = nil
    #expect(await task.value == [1])
  }

  @Test func sequencesAreSendable() {
    let source = EventSource<Int>()
    let property = Property(0)
    let sendables: [any Sendable] = [source.events(), property.values, BufferingPolicy.unbounded]
    #expect(sendables.count == 3)
  }

  // MARK: Main actor

  @Test @MainActor func mainActorTypeObservesThroughMainDeliveryAndForAwait() async {
    let screen = MainScreen()
    let source = EventSource<Int>()
    let property = Property(0)
    let subscription = source.observe(with: screen, on: .main) { screen, event in screen.show(event) }
    let events = source.events()
    let values = property.values(bufferingPolicy: .unbounded)
    let streaming = Task { @MainActor in
      for await event in events {
        screen.showStreamed(event)
        if event == 3 { break }
      }
      for await value in values {
        screen.showStreamed(value * 10)
        if value == 2 { break }
      }
    }
    for event in 1...3 { source.send(event) }
    property.value = 1
    property.value = 2
    await streaming.value
    #expect(await settles { screen.shown == [1, 2, 3] })
    #expect(screen.streamed == [1, 2, 3, 0, 10, 20])
    subscription.cancel()
  }
}

private func isClass<T>(_ type: T.Type) -> Bool {
  type is AnyObject.Type
}
