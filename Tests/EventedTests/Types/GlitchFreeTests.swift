import Dispatch
import Synchronization
import Testing

@testable import Evented

/// Derived values are state: observers see only states that existed, each commit once.
@Suite struct GlitchFreeTests {
  @Test func glitchFreeADiamondDeliversOneConsistentStatePerWrite() {
    let a = Property(1)
    let b = a.map { $0 * 10 }
    let c = a.map { $0 + 1 }
    let d = b.combineLatest(c)
    let seen = Recorder<[Int]>()
    let subscription = d.observe { seen.append([$0.0, $0.1]) }
    a.value = 2
    a.value = 3
    #expect(seen.values == [[10, 2], [20, 3], [30, 4]])
    subscription.cancel()
  }

  @Test func glitchFreeASelfCombinationOnlyEverPairsAValueWithItself() {
    let a = Property(0)
    let pair = a.combineLatest(a)
    let torn = Atomic<Int>(0)
    let last = Atomic<Int>(-1)
    let subscription = pair.observe { value in
      if value.0 != value.1 { torn.add(1, ordering: .relaxed) }
      last.store(value.0, ordering: .releasing)
    }
    let tornReads = Atomic<Int>(0)
    #expect(
      onThreads(4) { index in
        for step in 1...500 {
          if index < 2 {
            a.modify { $0 += 1 }
          } else {
            let read = pair.value
            if read.0 != read.1 { tornReads.add(1, ordering: .relaxed) }
            _ = step
          }
        }
      })
    #expect(torn.load(ordering: .relaxed) == 0, "an observer received (x, y) with x != y")
    #expect(tornReads.load(ordering: .relaxed) == 0, "value read (x, y) with x != y")
    #expect(last.load(ordering: .acquiring) == 1_000)
    #expect(pair.value == (1_000, 1_000))
    subscription.cancel()
  }

  @Test func glitchFreeOneThreadsWritesAreSeenInProgramOrderWhileAnotherThreadDelivers() {
    // Another thread is delivering `a = 100` (held in a slow handler); this thread then
    // writes `a = 1` and `b = 1`. No observer of the pair may see `b`'s write with an
    // `a` older than 1.
    let a = Property(0)
    let b = Property(0)
    let inHandler = Gate()
    let release = Gate()
    let blocker = a.observeChanges { change in
      if change.newValue == 100 {
        inHandler.open()
        release.wait()
      }
    }
    let seen = Recorder<[Int]>()
    let subscription = a.combineLatest(b).observe { seen.append([$0.0, $0.1]) }
    let other = Spawned { a.value = 100 }
    inHandler.wait()
    a.value = 1
    b.value = 1
    release.open()
    #expect(other.join())
    #expect(seen.wait { $0.last == [1, 1] })
    let existed: Set<[Int]> = [[0, 0], [100, 0], [1, 0], [1, 1]]
    #expect(seen.values.allSatisfy { existed.contains($0) }, "\(seen.values)")
    #expect(!seen.values.contains([100, 1]))
    blocker.cancel()
    subscription.cancel()
  }

  /// A `flatMapLatest` whose targets are maps of its own outer source: a commit of the
  /// outer source reaches the target it moves away from too, which may deliver that
  /// commit's state before the switch (when it follows the source ahead of the
  /// `flatMapLatest`): the old target at the new value is a state that never existed.
  @Test(arguments: [true, false])
  func glitchFreeAFlatMapLatestOverMapsOfItsOwnOuterSourceDeliversOneStatePerCommit(targetFollowsFirst: Bool) {
    let outer = Property(2)
    let evens = outer.map { "even \($0)" }
    let odds = outer.map { "odd \($0)" }
    // Observed elsewhere first, `evens` follows `outer` ahead of the flatMapLatest.
    let elsewhere = targetFollowsFirst ? evens.observe { _ in } : nil
    let followed = outer.flatMapLatest { $0 % 2 == 0 ? evens : odds }
    let seen = Recorder<String>()
    let observer = followed.observe { seen.append($0) }
    outer.value = 3
    outer.value = 4
    outer.value = 6  // the same target chosen again
    #expect(followed.value == "even 6")
    #expect(seen.values == ["even 2", "odd 3", "even 4", "even 6"])
    observer.cancel()
    elsewhere?.cancel()
  }

  /// As above, with an outer source derived from the targets' root: a write that leaves
  /// the outer value equal is never delivered to the `flatMapLatest` as a choice, so a
  /// target's update of it cannot wait for one, and a write that moves the choice away
  /// still must not reach the old target's observers.
  @Test(arguments: [true, false])
  func glitchFreeAFlatMapLatestOverADerivedOuterSourceOfItsTargetsRootDeliversOneStatePerCommit(
    targetFollowsFirst: Bool
  ) {
    let b = Property(2)
    let isEven = b.map { $0 % 2 == 0 }
    let evens = b.map { "even \($0)" }
    let odds = b.map { "odd \($0)" }
    // Observed elsewhere first, the targets follow `b` ahead of the outer source.
    let elsewhere = targetFollowsFirst ? [evens.observe { _ in }, odds.observe { _ in }] : []
    let followed = isEven.flatMapLatest { $0 ? evens : odds }
    let seen = Recorder<String>()
    let observer = followed.observe { seen.append($0) }
    b.value = 3
    b.value = 4
    b.value = 6  // the outer value stays equal: the target's update alone carries it
    b.value = 7
    b.value = 9
    #expect(followed.value == "odd 9")
    #expect(seen.values == ["even 2", "odd 3", "even 4", "even 6", "odd 7", "odd 9"])
    observer.cancel()
    for subscription in elsewhere { subscription.cancel() }
  }

  /// As above, with a transform that builds its target anew for each outer value: a
  /// write that leaves the outer value equal picks an equal target, so the target's
  /// update of it is delivered, though the object the transform returns is a new one.
  @Test func orderedAFlatMapLatestOverADerivedOuterSourceWhoseTransformBuildsItsTargetDeliversEachState() {
    let b = Property(2)
    let isEven = b.map { $0 % 2 == 0 }
    let followed = isEven.flatMapLatest { even in b.map { "\(even ? "even" : "odd") \($0)" } }
    let seen = Recorder<String>()
    let observer = followed.observe { seen.append($0) }
    b.value = 4
    b.value = 5
    b.value = 7
    b.value = 8
    #expect(followed.value == "even 8")
    #expect(seen.values == ["even 2", "even 4", "odd 5", "odd 7", "even 8"])
    observer.cancel()
  }

  /// The same shapes under two writers, with another thread subscribing and cancelling:
  /// every state delivered pairs a target with a value its outer source picks it for,
  /// the states only move forward, and the last one is the value.
  @Test(arguments: [false, true])
  func glitchFreeAFlatMapLatestOverADerivedOuterSourceOfItsTargetsRootWhileOthersWrite(freshTargets: Bool) {
    let b = Property(0)
    let isEven = b.map { $0 % 2 == 0 }
    let evens = b.map { "even \($0)" }
    let odds = b.map { "odd \($0)" }
    let elsewhere = evens.observe { _ in }
    let followed =
      freshTargets
      ? isEven.flatMapLatest { even in b.map { "\(even ? "even" : "odd") \($0)" } }
      : isEven.flatMapLatest { $0 ? evens : odds }
    let wrong = Recorder<String>()
    let seen = Recorder<Int>()
    @Sendable func number(_ text: String) -> Int {
      let parts = text.split(separator: " ")
      let number = Int(parts[1])!
      if (parts[0] == "even") != (number % 2 == 0) { wrong.append(text) }
      return number
    }
    let observer = followed.observe { seen.append(number($0)) }
    let writers = (0..<2).map { _ in Spawned { for _ in 0..<5_000 { b.modify { $0 += 1 } } } }
    let subscriber = Spawned { for _ in 0..<500 { followed.observe { _ = number($0) }.cancel() } }
    // 10,000 writes, each through a delivery: on a loaded machine under Thread
    // Sanitizer this can take longer than the usual bound, which only decides failure.
    for thread in writers + [subscriber] { #expect(thread.join(timeout: .seconds(60))) }
    #expect(seen.wait(timeout: .seconds(60), until: { $0.last == 10_000 }))
    #expect(wrong.count == 0, "\(wrong.count) states that never existed, first \(wrong.values.prefix(3))")
    #expect(zip(seen.values, seen.values.dropFirst()).allSatisfy { $0 < $1 }, "not in commit order")
    #expect(followed.value == "even 10000")
    observer.cancel()
    elsewhere.cancel()
  }

  /// A property as the target of a `flatMapLatest` whose outer source is a map of that
  /// property, while two threads write it and its parity flips on every write: the
  /// target's deliveries lag behind the outer source's reads of the latest state, which
  /// may skip a commit that picked the other target; no such commit may be delivered
  /// from the property, and commits only move forward.
  @Test func glitchFreeAPropertyTargetOfAFlatMapLatestOverAMapOfItLagsWithoutGlitches() {
    for _ in 0..<4 {
      let a = Property(Walk())
      let slowRoot = a.observe { _ in work(microseconds: 20) }  // makes the target lag
      let isEven = a.map { $0.position % 2 == 0 }
      let odds = a.map { Walk(writes: $0.writes, position: $0.position, isTagged: true) }
      let followed = isEven.flatMapLatest { $0 ? a.readOnly : odds }
      let seen = Recorder<Walk>()
      let observer = followed.observe { seen.append($0) }
      let writers = [1, -1].map { step in
        Spawned {
          for _ in 0..<5_000 {
            a.modify { walk in
              walk.writes += 1
              walk.position += step
            }
          }
        }
      }
      for thread in writers { #expect(thread.join()) }
      let last = followed.value
      #expect(seen.wait { $0.last == last })
      let values = seen.values
      let glitches = values.filter { $0.isTagged == ($0.position % 2 == 0) }
      #expect(glitches.count == 0, "\(glitches.count) states that never existed, first \(glitches.prefix(3))")
      #expect(zip(values, values.dropFirst()).allSatisfy { $0.writes < $1.writes }, "not in commit order")
      observer.cancel()
      slowRoot.cancel()
    }
  }

  /// A `flatMapLatest` over a value of two roots, on one thread, with writes made from
  /// handlers (they stand in for another thread's): the outer source turns odd at 1,
  /// and its link is delivered that while `a` is already 2, then 3. The link must not
  /// choose from a state the outer value never committed (even, at 2): the value's
  /// change back to odd would then be no commit, and the observer would stay on the
  /// even target while `value` reads the odd one.
  @Test(arguments: [true, false])
  func convergentAFlatMapLatestWhoseOuterSourceMovesOnDuringItsDeliveryEndsOnItsValue(multiRoot: Bool) {
    let (a, outer, evens, odds) = parityChoice(multiRoot: multiRoot)
    let other = Property(0)
    let wroteTwo = Atomic<Bool>(false)
    let wroteThree = Atomic<Bool>(false)
    // Linked to the outer source first: writes 2 in its delivery of odd.
    let first = outer.flatMapLatest { even -> Property<Int> in
      if !even, !wroteTwo.exchange(true, ordering: .relaxed) { a.value = 2 }
      return other
    }
    let firstObserver = first.observe { _ in }
    let followed = outer.flatMapLatest { $0 ? evens : odds }
    let gate = a.observe { value in
      if value == 1, !wroteThree.exchange(true, ordering: .relaxed) { a.value = 3 }
    }
    let seen = Recorder<String>()
    let observer = followed.observe { seen.append($0) }
    a.value = 1
    #expect(followed.value == "odd 3")
    #expect(seen.values.last == "odd 3", "\(seen.values)")
    let glitches = seen.values.filter { text in
      let parts = text.split(separator: " ")
      return (parts[0] == "even") != (Int(parts[1])! % 2 == 0)
    }
    #expect(glitches.isEmpty, "\(seen.values)")
    observer.cancel()
    gate.cancel()
    firstObserver.cancel()
  }

  /// A `flatMapLatest` over a value of two roots, whose target reads only one of them:
  /// the target's update of `a = 1` arrives while the outer value reads as picking the
  /// other target, then `c = 1` (written by a handler, committed at once) moves it back
  /// before the outer value has committed the move away, so that it would commit
  /// neither change: the update must not wait for a delivery that never comes.
  @Test func convergentAFlatMapLatestWhoseOuterSourceMovesAwayAndBackUncommittedEndsOnItsValue() {
    let a = Property(0)
    let c = Property(0)
    let target = a.map { "T \($0)" }
    let other = a.map { "U \($0)" }
    let wroteC = Atomic<Bool>(false)
    let early = target.observe { _ in }  // follows `a` ahead of the outer value
    let outer = a.combineLatest(c).map { ($0.0 + $0.1) % 2 == 0 }
    let followed = outer.flatMapLatest { $0 ? target : other }
    let seen = Recorder<String>()
    let observer = followed.observe { seen.append($0) }
    // Delivered the target's update after the flatMapLatest: writes `c` there.
    let late = target.observe { text in
      if text == "T 1", !wroteC.exchange(true, ordering: .relaxed) { c.value = 1 }
    }
    a.value = 1
    #expect(followed.value == "T 1")
    #expect(seen.values.last == "T 1", "\(seen.values)")
    observer.cancel()
    late.cancel()
    early.cancel()
  }

  /// One thread, whose writes are made from handlers (delivered after each handler
  /// returns, by the same thread, nobody else delivering): a `flatMapLatest` over a
  /// derived outer source delivers every state, each switch with its own commit.
  @Test(arguments: [true, false])
  func orderedAFlatMapLatestOnOneThreadWritingFromHandlersDeliversEveryState(multiRoot: Bool) {
    let (a, outer, evens, odds) = parityChoice(multiRoot: multiRoot)
    let followed = outer.flatMapLatest { $0 ? evens : odds }
    let wroteTwo = Atomic<Bool>(false)
    let wroteThree = Atomic<Bool>(false)
    let gate = a.observe { value in
      if value == 2, !wroteThree.exchange(true, ordering: .relaxed) { a.value = 3 }
    }
    let outerObserver = outer.observe { even in
      if !even, !wroteTwo.exchange(true, ordering: .relaxed) { a.value = 2 }
    }
    let seen = Recorder<String>()
    let observer = followed.observe { seen.append($0) }
    a.value = 1
    #expect(seen.values == ["even 0", "odd 1", "even 2", "odd 3"])
    #expect(followed.value == "odd 3")
    observer.cancel()
    outerObserver.cancel()
    gate.cancel()
  }

  /// A `flatMapLatest` whose outer source is an `Equatable` value derived from the
  /// target's own root: a write that leaves the outer value equal is not delivered to
  /// the `flatMapLatest` as a choice, and the target's update of it still is.
  @Test func orderedAFlatMapLatestOverAnEquatableValueOfItsTargetsRootDeliversEachTargetState() {
    let a = Property(1)
    let positive = a.map { $0 > 0 }
    let followed = positive.flatMapLatest { $0 ? a.readOnly : ReadOnlyProperty(constant: 0) }
    let seen = Recorder<Int>()
    let observer = followed.observe { seen.append($0) }
    a.value = 2
    a.value = 3
    #expect(followed.value == 3)
    #expect(seen.values == [1, 2, 3])
    observer.cancel()
    let b = Property(2)
    let isEven = b.map { $0 % 2 == 0 }
    let evens = b.map { "even \($0)" }
    let odds = b.map { "odd \($0)" }
    let parity = isEven.flatMapLatest { $0 ? evens : odds }
    let named = Recorder<String>()
    let other = parity.observe { named.append($0) }
    b.value = 4
    b.value = 5
    b.value = 7
    #expect(parity.value == "odd 7")
    #expect(named.values.last == "odd 7", "\(named.values)")
    other.cancel()
  }

  /// A `flatMapLatest` whose targets are maps of its own outer source, while one thread
  /// writes the source: a read of its `value`, and the first value an arriving observer
  /// receives, pair the outer value with the target it picks (its transform takes a
  /// little time, which widens the window between the two reads).
  @Test(arguments: [true, false])
  func alwaysCurrentAFlatMapLatestWhoseTargetsReadItsOuterSourceIsNeverReadOrReplayedTorn(subscribing: Bool) {
    let a = Property(0)
    let evens = a.map { "even \($0)" }
    let odds = a.map { "odd \($0)" }
    let followed = a.flatMapLatest { value -> ReadOnlyProperty<String> in
      work(microseconds: 20)
      return value % 2 == 0 ? evens : odds
    }
    let elsewhere = evens.observe { _ in }
    let torn = Recorder<String>()
    @Sendable func check(_ text: String) {
      let parts = text.split(separator: " ")
      if (parts[0] == "even") != (Int(parts[1])! % 2 == 0) { torn.append(text) }
    }
    let observer = followed.observe { check($0) }
    let stop = Atomic<Bool>(false)
    let writer = Spawned { while !stop.load(ordering: .acquiring) { a.modify { $0 += 1 } } }
    let reader = Spawned {
      for _ in 0..<2_000 {
        if subscribing { followed.observe { check($0) }.cancel() } else { check(followed.value) }
      }
    }
    #expect(reader.join())
    stop.store(true, ordering: .releasing)
    #expect(writer.join())
    #expect(torn.values.isEmpty, "\(torn.count) torn, first \(torn.values.prefix(3))")
    observer.cancel()
    elsewhere.cancel()
  }

  @Test func onceperCommitEveryPathFromOneRootDeliversEachWriteOnce() {
    let a = Property(0)
    let chain = a.map { $0 + 1 }.map { $0 + 1 }.map { $0 + 1 }
    let both = chain.combineLatest(a.map { $0 * 2 }).combineLatest(a)
    let seen = Recorder<Int>()
    let subscription = both.observe { value in
      let ((three, double), plain) = value
      #expect(three == plain + 3 && double == plain * 2)
      seen.append(plain)
    }
    for value in 1...50 { a.value = value }
    #expect(seen.values == Array(0...50))
    subscription.cancel()
  }

  /// Writes made by a handler are delivered after it returns. The root's own observers
  /// receive each of them; a value of the root may skip to the newest (its deliveries
  /// back up behind the handler), never back, and ends on it.
  @Test(arguments: ["map", "combineLatest with itself", "diamond", "map of an array's view"])
  func orderedWritesFromAHandlerOfAnotherSourceReachAValueOfOneRootInOrderEndingOnTheNewest(_ shape: String) {
    let p = Property(0)
    let items = ArrayProperty<Int>([])
    let derived: ReadOnlyProperty<Int> =
      switch shape {
      case "map": p.map { $0 }
      case "combineLatest with itself": p.combineLatest(p).map { $0 == $1 ? $0 : -1 }
      case "diamond": p.map { $0 * 2 }.combineLatest(p.map { $0 }).map { $0 == 2 * $1 ? $1 : -1 }
      default: items.readOnly.map(\.count)
      }
    let seen = Recorder<Int>()
    let observer = derived.observe { seen.append($0) }
    let ofRoot = Recorder<Int>()
    let rootObserver = p.observe { ofRoot.append($0) }
    let trigger = EventSource<Int>()
    let writer = trigger.observe { _ in
      for value in 1...4 {
        if shape == "map of an array's view" { items.append(value) } else { p.value = value }
      }
    }
    trigger.send(0)
    #expect(seen.values.first == 0 && seen.values.last == 4)
    #expect(zip(seen.values, seen.values.dropFirst()).allSatisfy { $0 < $1 })
    if shape != "map of an array's view" { #expect(ofRoot.values == [0, 1, 2, 3, 4]) }
    #expect(p.observerCount + items.observerCount == 2)
    observer.cancel()
    rootObserver.cancel()
    writer.cancel()
  }

  /// The same from a handler of the value itself: its delivery of the state that
  /// triggered the writes is still running further up the thread's stack, so the
  /// writes reach it as one newest state.
  @Test func orderedWritesFromAHandlerOfAValueOfOneRootReachItAsTheNewestState() {
    let p = Property(0)
    let mapped = p.map { $0 * 10 }
    let seen = Recorder<Int>()
    let observer = mapped.observe { value in
      seen.append(value)
      if value == 0 { for next in 1...4 { p.value = next } }
    }
    #expect(seen.values == [0, 40])
    #expect(mapped.value == 40)
    observer.cancel()
  }

  @Test func memoizedATransformRunsOncePerChangeNotPerReadOrObserver() {
    let a = Property(1)
    let runs = Atomic<Int>(0)
    let mapped = a.map { value -> Int in
      runs.add(1, ordering: .relaxed)
      return value * 2
    }
    let afterMaking = runs.load(ordering: .relaxed)
    for _ in 0..<10 { #expect(mapped.value == 2) }
    #expect(runs.load(ordering: .relaxed) == afterMaking, "reading an unchanged value ran the transform")
    let first = mapped.observe { _ in }
    let second = mapped.observe { _ in }
    let beforeWrite = runs.load(ordering: .relaxed)
    a.value = 5
    #expect(runs.load(ordering: .relaxed) == beforeWrite + 1, "one change, two observers, one run")
    for _ in 0..<10 { #expect(mapped.value == 10) }
    #expect(runs.load(ordering: .relaxed) == beforeWrite + 1)
    first.cancel()
    second.cancel()
  }

  /// A map of a property observed after a value built on it: the value built on it
  /// computes the map first, in its own delivery of the write, and the map's own
  /// delivery must find that in the memo instead of running the transform again.
  @Test(arguments: ["map of it", "combineLatest with it"])
  func memoizedAMapObservedAfterAValueBuiltOnItRunsOncePerWrite(_ kind: String) {
    let a = Property(0)
    let b = Property(0)
    let runs = Atomic<Int>(0)
    let mapped = a.map { value -> Int in
      runs.add(1, ordering: .relaxed)
      return value + 1
    }
    let above: ReadOnlyProperty<Int> =
      kind == "map of it" ? mapped.map { $0 * 2 } : mapped.combineLatest(b).map { $0.0 + $0.1 }
    let seenAbove = Recorder<Int>()
    let seen = Recorder<Int>()
    let first = above.observe { seenAbove.append($0) }
    let second = mapped.observe { seen.append($0) }
    let before = runs.load(ordering: .relaxed)
    for value in 1...3 { a.value = value }
    #expect(runs.load(ordering: .relaxed) == before + 3, "three writes, one run each")
    for _ in 0..<5 { #expect(mapped.value == 4) }
    #expect(runs.load(ordering: .relaxed) == before + 3, "reads ran the transform")
    #expect(seen.values == [1, 2, 3, 4])
    #expect(seenAbove.values == (kind == "map of it" ? [2, 4, 6, 8] : [1, 2, 3, 4]))
    first.cancel()
    second.cancel()
  }

  @Test func readYourWritesThroughADiamondWhileOthersWrite() {
    let a = Property(0)
    let diamond = a.map { $0 * 2 }.combineLatest(a.map { $0 + 1 })
    let bad = Atomic<Int>(0)
    #expect(
      onThreads(3) { index in
        for step in 1...300 {
          let written = index * 10_000 + step
          a.value = written
          let read = diamond.value
          if read.0 != 2 * (read.1 - 1) { bad.add(1, ordering: .relaxed) }
        }
      })
    #expect(bad.load(ordering: .relaxed) == 0)
    #expect(diamond.value == (2 * a.value, a.value + 1))
  }

  @Test func anUnobservedDerivedValueFollowsNothingAndIsCurrentWhenObserved() {
    let a = Property(1)
    let mapped = a.map { $0 * 2 }
    #expect(a.observerCount == 0)
    a.value = 2
    #expect(mapped.value == 4)
    let seen = Recorder<Int>()
    let subscription = mapped.observe { seen.append($0) }
    #expect(a.observerCount == 1)
    a.value = 3
    #expect(seen.values == [4, 6])
    subscription.cancel()
    #expect(a.observerCount == 0, "an unobserved derived value is not counted by its root")
    a.value = 4
    let again = mapped.observe { seen.append($0) }
    a.value = 5
    #expect(seen.values == [4, 6, 8, 10])
    again.cancel()
  }
}

/// Each observer of a derived value holds O(1) undelivered state.
@Suite struct DerivedBoundTests {
  /// Subscribes to `derived` on another thread, whose handler holds the replay (so that
  /// thread is the derived value's deliverer) while `write` runs; returns what that
  /// subscription received, once it has been released and has returned.
  func receivedBehindAHeldReplay(of derived: ReadOnlyProperty<Int>, while write: () -> Void) -> [Int]? {
    let inReplay = Gate()
    let release = Gate()
    let received = Recorder<Int>()
    let isFirst = Atomic<Bool>(true)
    let subscriber = Spawned {
      let subscription = derived.observe { value in
        if isFirst.exchange(false, ordering: .relaxed) {
          inReplay.open()
          _ = release.wait()
        }
        received.append(value)
      }
      subscription.cancel()
    }
    guard inReplay.wait() else { return nil }
    write()
    release.open()
    return subscriber.join() ? received.values : nil
  }

  @Test func boundedASlowObserverOfAMapHoldsOneUndeliveredStateAndItsSubscribeReturns() throws {
    let p = Property(0)
    let m = p.map { $0 }
    var backlog = -1
    let values = try #require(
      receivedBehindAHeldReplay(of: m) {
        for value in 1...10_000 { p.value = value }
        backlog = m.derived!.hub.storage.withLock { $0.queue.backlog }
      })
    #expect(backlog <= 1)
    #expect(values.first == 0)
    #expect(values.last == 10_000)
    #expect(values.count <= 3)
    #expect(values == values.sorted())
  }

  /// Root commits that reach a map while its states are being delivered only mark it:
  /// an observer arriving meanwhile adds the one state it starts from, and the commits
  /// after it still wait as one mark, not one state each.
  @Test func boundedRootCommitsBehindAnArrivingObserverStillWaitAsOneMark() throws {
    let p = Property(0)
    let m = p.map { $0 }
    var backlog = -1
    let late = Recorder<Int>()
    var subscription: Subscription?
    let values = try #require(
      receivedBehindAHeldReplay(of: m) {
        p.value = 1
        subscription = m.observe { late.append($0) }
        for value in 2...1_000 { p.value = value }
        backlog = m.derived!.hub.storage.withLock { $0.queue.backlog }
      })
    #expect(backlog <= 3)
    #expect(values.first == 0 && values.last == 1_000)
    #expect(values.count <= 4)
    #expect(late.values.first == 1 && late.values.last == 1_000)
    subscription?.cancel()
  }

  /// A value built on a `flatMapLatest` (here a `map` of it) counts its deliveries as
  /// its states, one per commit, also when they wait behind a slow observer: it never
  /// delivers a state older than one it delivered, and ends on its value.
  @Test func orderedAValueBuiltOnAFlatMapLatestWhoseDeliveriesWaitedEndsOnItsValue() throws {
    let pick = Property(0)
    let p = Property(0)
    let followed = pick.flatMapLatest { _ in p.readOnly }
    let mapped = followed.map { $0 }
    let seen = Recorder<Int>()
    let observer = mapped.observe { seen.append($0) }
    let held = try #require(
      receivedBehindAHeldReplay(of: followed) {
        p.value = 1
        p.value = 2
        p.value = 3
      })
    #expect(held.last == 3)
    #expect(mapped.value == 3)
    let second = mapped.observe { _ in }
    p.value = 4
    p.value = 5
    #expect(mapped.value == 5)
    #expect(seen.values.last == 5, "\(seen.values)")
    #expect(seen.values == seen.values.sorted(), "\(seen.values)")
    observer.cancel()
    second.cancel()
  }

  /// Two threads write the outer source and the targets of a `flatMapLatest` as fast as
  /// they can, while its observer is slow: its waiting states merge, as a computed
  /// value's do (the `combineLatest` beside it), so it holds no backlog of them; and a
  /// thread that then subscribes to it again and again is never kept delivering one.
  @Test(arguments: ["switching targets", "one target", "combineLatest"])
  func boundedAFlatMapLatestMergesItsWaitingStatesAndItsSubscribersReturn(_ kind: String) {
    let a = Property(0)
    let b = Property(0)
    let plain = a.readOnly
    let shifted = a.map { $0 + 1 }
    let followed =
      switch kind {
      case "one target": b.flatMapLatest { _ in plain }
      case "combineLatest": a.combineLatest(b).map { $0 + $1 }
      default: b.flatMapLatest { $0 % 2 == 0 ? plain : shifted }
      }
    let node = followed.derived!
    let peak = Atomic<Int>(0)
    let slow = followed.observe { _ in
      peak.max(node.hub.storage.withLock { $0.queue.backlog }, ordering: .relaxed)
      work(microseconds: 50)
    }
    let stop = Atomic<Bool>(false)
    let writers = [a, b].map { source in
      Spawned { while !stop.load(ordering: .acquiring) { source.modify { $0 += 1 } } }
    }
    let deadline = ContinuousClock.now + generousTimeout
    while a.value < 300 || b.value < 300, ContinuousClock.now < deadline { yieldProcessor() }
    // Without subscriptions arriving, at most the newest state waits (one more each
    // new subscription may add: see DerivedValues.md, "Bounded").
    let waited = peak.load(ordering: .relaxed)
    guard waited <= 4, ContinuousClock.now < deadline else {
      stop.store(true, ordering: .releasing)
      Issue.record("\(waited) states waited for a slow observer; \(a.value) and \(b.value) writes")
      return
    }
    let subscriber = Spawned {
      for _ in 0..<1_500 { followed.observe { _ in }.cancel() }
    }
    #expect(subscriber.join(), "a subscriber was kept delivering")
    stop.store(true, ordering: .releasing)
    for writer in writers { #expect(writer.join()) }
    slow.cancel()
  }

  @Test func boundedCoalescedStatesOfAnEquatableValueNeverRepeatAValue() throws {
    let p = Property(0)
    // Waiting behind the held replay: 0 -> 1, then coalesced to 0 -> 2; back to 0 must
    // not make that waiting update 0 -> 0.
    let values = try #require(
      receivedBehindAHeldReplay(of: p.map { $0 }) {
        p.value = 1
        p.value = 2
        p.value = 0
      })
    #expect(values.first == 0 && values.last == 0)
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 != $1 }, "\(values)")
  }

  @Test func boundedASubscriberArrivingWhileAnUpdateWaitsReceivesChangesFromItsOwnValue() throws {
    // The update 0 -> 1 waits behind the held replay when `late` subscribes, without
    // replay, at 1: the next state must not reach it as a change from 0.
    let p = Property(0)
    let m = p.map { $0 }
    let changes = Recorder<[Int]>()
    let late = Monitor<Subscription?>(nil)
    let values = try #require(
      receivedBehindAHeldReplay(of: m) {
        p.value = 1
        late.withLock { $0 = m.observeChanges { changes.append([$0.oldValue, $0.newValue]) } }
        p.value = 2
      })
    #expect(values.first == 0 && values.last == 2)
    #expect(changes.values == [[1, 2]])
    late.withLock { $0?.cancel() }
  }

  /// A slow queue observer of `derived` while `writers` threads run `write`: how many
  /// updates it still had to run when they returned, whether it ended on the value, and
  /// what it received.
  func queueObserverBacklog(
    of derived: ReadOnlyProperty<Int>, writers: Int, perWriter: Int, write: @escaping @Sendable (Int, Int) -> Void
  ) -> (remaining: Int, converged: Bool, received: [Int]) {
    let handled = Atomic<Int>(0)
    let received = Recorder<Int>()
    let subscription = derived.observe(on: .queue(DispatchQueue(label: "slow"))) { value in
      work(microseconds: 50)
      received.append(value)
      handled.add(1, ordering: .relaxed)
    }
    #expect(onThreads(writers) { index in for step in 1...perWriter { write(index, step) } })
    let atEnd = handled.load(ordering: .relaxed)
    let final = derived.value
    let converged = received.wait { $0.last == final }
    let remaining = handled.load(ordering: .relaxed) - atEnd
    subscription.cancel()
    return (remaining, converged, received.values)
  }

  /// A queue observer of a derived value holds one waiting state (state coalesces on
  /// queues): when the writers return it has at most that one and the one running left
  /// to run, and it ends on the value, never repeating one.
  @Test func boundedAQueueObserverOfADerivedValueHoldsOneWaitingStateAndEndsOnItsValue() {
    let p = Property(0)
    let mapped = p.map { $0 }
    let a = Property(0)
    let b = Property(0)
    let combined = a.combineLatest(b).map { $0 * 100_000 + $1 }
    let outer = Property(0)
    let target = Property(0)
    let followed = outer.flatMapLatest { _ in target }
    let cases: [(ReadOnlyProperty<Int>, Int, @Sendable (Int, Int) -> Void)] = [
      (mapped, 1, { _, step in p.value = step }),
      (combined, 2, { index, step in if index == 0 { a.value = step } else { b.value = step } }),
      (followed, 1, { _, step in target.value = step }),
    ]
    for (derived, writers, write) in cases {
      let result = queueObserverBacklog(of: derived, writers: writers, perWriter: 6_000, write: write)
      #expect(result.converged)
      #expect(result.remaining <= 2, "still to run when the writers returned: \(result.remaining)")
      // States only move forward (each side of the pair too), and never repeat.
      let forward = zip(result.received, result.received.dropFirst()).allSatisfy { earlier, later in
        earlier / 100_000 <= later / 100_000 && earlier % 100_000 <= later % 100_000 && earlier != later
      }
      #expect(forward)
    }
  }

  /// A derived value takes the smallest backlog limit of its roots (a `flatMapLatest`,
  /// its outer source's), so that a queue observer of it stays within the bound its
  /// sources were given.
  @Test func boundedADerivedValueKeepsTheSmallestBacklogLimitOfItsRoots() {
    let limit = 8
    let small = Property(0, backlogLimit: limit)
    let large = Property(0)
    let items = ArrayProperty([0], backlogLimit: limit)
    let mapped = small.map { $0 }
    let combined = small.combineLatest(large).map { $0 * 100_000 + $1 }
    let followed = small.flatMapLatest { _ in large }
    let fromArray = items.readOnly.map { $0[0] }
    #expect(mapped.hub.backlogLimit == limit)
    #expect(combined.hub.backlogLimit == limit)
    #expect(followed.hub.backlogLimit == limit)
    #expect(fromArray.hub.backlogLimit == limit)
    #expect(large.map { $0 }.hub.backlogLimit == defaultBacklogLimit)
    let cases: [(ReadOnlyProperty<Int>, @Sendable (Int) -> Void)] = [
      (mapped, { small.value = $0 }),
      (combined, { small.value = $0 }),
      (fromArray, { items[0] = $0 }),
    ]
    for (derived, write) in cases {
      let result = queueObserverBacklog(of: derived, writers: 1, perWriter: 2_000) { _, step in write(step) }
      #expect(result.converged)
      #expect(result.remaining <= limit + 2, "still to run when the writer returned: \(result.remaining)")
    }
  }
}

/// A random walk and the number of its steps; `isTagged` marks a copy made by a map.
private struct Walk: Sendable, Equatable {
  var writes = 0
  var position = 0
  var isTagged = false
}

/// A property `a`, its parity as a value of two roots (with `a` and another property)
/// or of one (a map of a map), and maps of `a` labelled "even" and "odd", for a
/// `flatMapLatest` choosing by the parity.
private func parityChoice(multiRoot: Bool) -> (
  Property<Int>, ReadOnlyProperty<Bool>, ReadOnlyProperty<String>, ReadOnlyProperty<String>
) {
  let a = Property(0)
  let c = Property(0)
  let outer = multiRoot ? a.combineLatest(c).map { $0.0 % 2 == 0 } : a.map { $0 }.map { $0 % 2 == 0 }
  return (a, outer, a.map { "even \($0)" }, a.map { "odd \($0)" })
}
