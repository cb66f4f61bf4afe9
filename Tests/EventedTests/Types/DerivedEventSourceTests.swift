// Event operators: map, filter, compactMap and merge, with their ordering and lifetime
// promises. The contract suites also run against mapped and merged sources.

import Dispatch
import Synchronization
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

  @Test func boundedAMergeOfBusySourcesStaysWithinItsBacklogLimitAndKeepsEveryEvent() {
    // Each source is written by its own thread, which delivers it and forwards every
    // event to the merge, whose observer is slow. Whichever thread does not deliver the
    // merge would otherwise queue every event of its source there at once.
    let sources = [EventSource<Int>(), EventSource<Int>()]
    let merged = sources.merge()
    let perSource = Monitor([Int: [Int]]())
    let peakBacklog = Atomic<Int>(0)
    let perThread = 3 * defaultBacklogLimit
    let subscription = merged.observe { event in
      perSource.withLock { $0[event / 100_000, default: []].append(event % 100_000) }
      peakBacklog.max(merged.hub.storage.withLock { $0.queue.backlog }, ordering: .relaxed)
      work(microseconds: 20)
    }
    #expect(
      onThreads(2) { index in
        for step in 0..<perThread { sources[index].send(index * 100_000 + step) }
      })
    for index in 0..<2 { #expect(perSource.current[index] == Array(0..<perThread)) }
    #expect(peakBacklog.load(ordering: .relaxed) <= defaultBacklogLimit + 2)
    subscription.cancel()
  }

  @Test func boundedNoSendToASourceOfAMergeRunsMoreThanAFewTimesTheLimitOfItsObserverCalls() {
    // Each thread sends to its own source and forwards to the merge, whose observer is
    // slow. Whichever thread delivers the merge must hand the role over once its turn
    // is past the limit, instead of going on with the other thread's events for as
    // long as they come.
    let limit = 16
    let sources = [EventSource<Int>(backlogLimit: limit), EventSource<Int>(backlogLimit: limit)]
    let merged = sources.merge()
    let senders = Monitor([UInt](repeating: 0, count: 2))
    let calls = [Counter(), Counter()]
    let perSource = Monitor([Int: [Int]]())
    let subscription = merged.observe { event in
      perSource.withLock { $0[event / 100_000, default: []].append(event % 100_000) }
      if let index = senders.current.firstIndex(of: currentThreadID()) {
        calls[index].increment()
      }
      work(microseconds: 20)
    }
    let perThread = 2_000
    let mostPerSend = Atomic<Int>(0)
    #expect(
      onThreads(2) { index in
        senders.withLock { $0[index] = currentThreadID() }
        for step in 0..<perThread {
          let before = calls[index].value
          sources[index].send(index * 100_000 + step)
          mostPerSend.max(calls[index].value - before, ordering: .relaxed)
        }
      })
    for index in 0..<2 { #expect(perSource.current[index] == Array(0..<perThread)) }
    // A turn (the limit and its own event), plus what the other thread queued before
    // it could claim the role (the backlog): about twice the limit, more when the
    // machine is busy. Before the hand-off reached merges, one send ran all 2,001.
    #expect(mostPerSend.load(ordering: .relaxed) <= 3 * limit + 8)
    subscription.cancel()
  }

  @Test func boundedAMapOfAMergeFedByThreeThreadsStaysWithinAFewTimesItsLimit() {
    // The thread delivering the merge forwards into the map from inside the merge's
    // pass; it waits for the map's room only once that pass ends, which the hand-off
    // bounds to a turn: the map's backlog stays within its limit, plus a turn of the
    // merge, plus the merge's own backlog (before the hand-off, it reached 696).
    let limit = 16
    let sources = (0..<3).map { _ in EventSource<Int>(backlogLimit: limit) }
    let mapped = sources.merge().map { $0 }
    let peakBacklog = Atomic<Int>(0)
    let perSource = Monitor([Int: [Int]]())
    let subscription = mapped.observe { event in
      perSource.withLock { $0[event / 100_000, default: []].append(event % 100_000) }
      peakBacklog.max(mapped.hub.storage.withLock { $0.queue.backlog }, ordering: .relaxed)
      work(microseconds: 20)
    }
    let perThread = 1_000
    #expect(
      onThreads(3) { index in
        for step in 0..<perThread { sources[index].send(index * 100_000 + step) }
      })
    for index in 0..<3 { #expect(perSource.current[index] == Array(0..<perThread)) }
    #expect(peakBacklog.load(ordering: .relaxed) <= 4 * limit)
    subscription.cancel()
  }

  @Test func boundedAQueueObserverOfADerivedSourceHoldsAboutTheBacklogLimit() {
    // The writers wait for the source's own room, the source's deliverer for the
    // derived source's: events sent and not yet handled stay within the derived
    // source's backlog plus its queue subscription's limit.
    let source = EventSource<Int>()
    let mapped = source.map { $0 }
    let sent = Atomic<Int>(0)
    let handled = Atomic<Int>(0)
    let peakUnhandled = Atomic<Int>(0)
    let perThread = 3 * defaultBacklogLimit
    let subscription = mapped.observe(on: .queue(DispatchQueue(label: "slow"))) { _ in
      work(microseconds: 20)
      handled.add(1, ordering: .relaxed)
    }
    #expect(
      onThreads(2) { _ in
        for step in 0..<perThread {
          source.send(step)
          let unhandled = sent.add(1, ordering: .relaxed).newValue - handled.load(ordering: .relaxed)
          peakUnhandled.max(unhandled, ordering: .relaxed)
        }
      })
    #expect(peakUnhandled.load(ordering: .relaxed) <= 2 * defaultBacklogLimit + 4)
    subscription.cancel()
  }

  /// A source made with a small backlog limit keeps it through `map` and `merge`:
  /// events sent and not yet handled by a slow queue observer of the derived source
  /// stay within a few times that limit, not the default one.
  @Test func boundedADerivedSourceKeepsTheBacklogLimitOfItsSource() {
    let limit = 8
    let small = EventSource<Int>(backlogLimit: limit)
    let other = EventSource<Int>()
    let derived = [small.map { $0 }, small.map { $0 }.filter { _ in true }, small.merge(with: other)]
    for source in derived {
      let sent = Atomic<Int>(0)
      let handled = Atomic<Int>(0)
      let peakUnhandled = Atomic<Int>(0)
      let subscription = source.observe(on: .queue(DispatchQueue(label: "slow"))) { _ in
        work(microseconds: 20)
        handled.add(1, ordering: .relaxed)
      }
      #expect(
        onThreads(2) { _ in
          for step in 0..<500 {
            small.send(step)
            let unhandled = sent.add(1, ordering: .relaxed).newValue - handled.load(ordering: .relaxed)
            peakUnhandled.max(unhandled, ordering: .relaxed)
          }
        })
      #expect(eventually { handled.load(ordering: .relaxed) == 1_000 })
      #expect(peakUnhandled.load(ordering: .relaxed) <= 4 * limit + 4)
      subscription.cancel()
    }
  }

  @Test func boundedTwoMergesOfTheSameSourcesNeverWaitForEachOther() {
    // Each source's thread forwards to both merges, in opposite orders, while the other
    // thread may be delivering one of them: waiting for room inside a handler could
    // close a cycle; waiting after it cannot.
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    let merges = [a.merge(with: b), b.merge(with: a)]
    let counts = [Counter(), Counter()]
    let peakBacklog = Atomic<Int>(0)
    let perThread = 2 * defaultBacklogLimit
    let subscriptions = (0..<2).map { index in
      merges[index].observe { _ in
        peakBacklog.max(merges[index].hub.storage.withLock { $0.queue.backlog }, ordering: .relaxed)
        work(microseconds: 10)
        counts[index].increment()
      }
    }
    #expect(
      onThreads(2) { index in
        for step in 0..<perThread { (index == 0 ? a : b).send(step) }
      })
    for count in counts { #expect(count.wait(for: 2 * perThread)) }
    #expect(peakBacklog.load(ordering: .relaxed) <= defaultBacklogLimit + 2)
    for subscription in subscriptions { subscription.cancel() }
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
