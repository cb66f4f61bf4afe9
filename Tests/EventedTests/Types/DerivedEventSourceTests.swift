// Event operators: map, filter, compactMap and merge, with their ordering and lifetime
// promises. The contract suites also run against mapped and merged sources.

import Dispatch
import Testing

@testable import Evented

@Suite struct DerivedEventSourceTests {
  @Test func mapFilterAndCompactMapTransformEveryEventInOrder() {
    let input = EventSource<String>()
    let lengths = input.map(\.count)
    let long = input.filter { $0.count > 2 }
    let numbers = input.compactMap { Int($0) }
    let seen = Recorder<String>()
    let subscriptions = [
      lengths.observe { seen.append("length \($0)") },
      long.observe { seen.append("long \($0)") },
      numbers.observe { seen.append("number \($0)") },
    ]
    for text in ["ab", "abc", "12", "345"] { input.send(text) }
    #expect(
      seen.values == [
        "length 2", "length 3", "long abc", "length 2", "number 12", "length 3", "long 345", "number 345",
      ])
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test func mergeSendsTheEventsOfEverySource() {
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    let c = EventSource<Int>()
    let pair = a.merge(with: b.readOnly)
    let all = [a, b, c].merge()
    let seenPair = Recorder<Int>()
    let seenAll = Recorder<Int>()
    let s1 = pair.observe { seenPair.append($0) }
    let s2 = all.observe { seenAll.append($0) }
    a.send(1)
    b.send(2)
    c.send(3)
    #expect(seenPair.values == [1, 2])
    #expect(seenAll.values == [1, 2, 3])
    s1.cancel()
    s2.cancel()
  }

  @Test func derivedEventsKeepEachSourcesCommitOrderUnderContention() {
    let sources = (0..<contentionThreads).map { _ in EventSource<Int>() }
    let merged = sources.merge().map { $0 }.filter { _ in true }
    let perSource = Monitor([Int: [Int]]())
    let queue = DispatchQueue(label: "derived-events")
    let done = Counter()
    let perThread = 300
    let subscription = merged.observe(on: .queue(queue)) { event in
      perSource.withLock { $0[event / 10_000, default: []].append(event % 10_000) }
      done.increment()
    }
    #expect(
      onThreads { index in
        for step in 0..<perThread { sources[index].send(index * 10_000 + step) }
      })
    #expect(done.wait(for: contentionThreads * perThread))
    for index in 0..<contentionThreads {
      #expect(perSource.current[index] == Array(0..<perThread))
    }
    subscription.cancel()
  }

  @Test func eventsOfADerivedSourceArriveThroughTheAsyncSequence() async {
    let input = EventSource<Int>()
    let evens = input.filter { $0.isMultiple(of: 2) }.map { $0 * 10 }
    let events = evens.events(bufferingPolicy: .unbounded)
    for value in 1...6 { input.send(value) }
    var received: [Int] = []
    for await event in events {
      received.append(event)
      if received.count == 3 { break }
    }
    #expect(received == [20, 40, 60])
    #expect(input.observerCount == 1, "the sequence keeps its derived source alive until it ends")
  }

  @Test func aDerivedSourceNobodyReferencesOrObservesIsFreedAndItsSubscriptionsEnd() {
    let live = LiveCount()
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    do {
      let tracked = Tracked(live)
      let mapped = a.map { event in withExtendedLifetime(tracked) { event } }
      let merged = mapped.merge(with: b)
      #expect(a.observerCount == 1)
      #expect(b.observerCount == 1)
      #expect(merged.observerCount == 0)
    }
    #expect(live.value == 0)
    #expect(a.observerCount == 0)
    #expect(b.observerCount == 0)
  }

  @Test func aSubscriptionKeepsADerivedSourceAliveUntilItEnds() {
    let live = LiveCount()
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    let subscription = source.map { [tracked = Tracked(live)] in tracked.id + $0 }.observe { seen.append($0) }
    source.send(4)
    #expect(seen.values == [4])
    #expect(live.value == 1)
    subscription.cancel()
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  @Test func aDerivedSourceWhoseObserversOwnerDiedIsFreedByTheNextEvent() {
    let live = LiveCount()
    let source = EventSource<Int>()
    var owner: Owner? = Owner()
    source.map { [tracked = Tracked(live)] in tracked.id + $0 }.observe(with: owner!) { _, _ in }
    owner = nil
    #expect(live.value == 1)
    source.send(1)
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  @Test func aFilteredSourceWhoseObserversOwnerDiedIsFreedEvenWhenItPassesNothing() {
    let live = LiveCount()
    let source = EventSource<Int>()
    var owner: Owner? = Owner()
    source.filter { [tracked = Tracked(live)] in tracked.id + $0 < 0 }.observe(with: owner!) { _, _ in }
    owner = nil
    source.send(1)
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  @Test func observeOnceOnADerivedSourceRunsAtMostOnce() {
    let source = EventSource<Int>()
    let doubled = source.map { $0 * 2 }
    let seen = Recorder<Int>()
    let once = doubled.observeOnce { seen.append($0) }
    #expect(onThreads { index in for step in 0..<100 { source.send(index * 100 + step) } })
    #expect(seen.count == 1)
    once.cancel()
  }

  @Test func propertyObserveOnceDeliversTheNextNewValueOnly() {
    let property = Property(0)
    let seen = Recorder<Int>()
    let once = property.observeOnce { seen.append($0) }
    #expect(seen.values.isEmpty, "the current value is not delivered")
    #expect(onThreads { index in for step in 1...100 { property.value = index * 1_000 + step } })
    #expect(seen.count == 1)
    #expect(!once.isActive)
    #expect(property.observerCount == 0)
  }
}
