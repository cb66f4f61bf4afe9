// The promises of derived properties (map, combineLatest, flatMapLatest): always
// current, ordered and convergent, no torn combination, chains that switch cleanly,
// and the lifetime rule. The contract suites also run against derived subjects.

import Dispatch
import Testing

@testable import Evented

/// A non-Equatable integer, for derived values that skip nothing.
struct Plain: Sendable {
  let value: Int
}

/// A friend with an observable name, for chains.
final class Friend: Sendable {
  let name: Property<String>

  init(_ name: String) {
    self.name = Property(name)
  }
}

@Suite struct DerivedPropertyTests {
  // MARK: Spelling

  @Test func mapTransformsTheCurrentValueAndEveryChange() {
    let count = Property(1)
    let label = count.map { "count \($0)" }
    let seen = Recorder<String>()
    let subscription = label.observe { seen.append($0) }
    count.value = 2
    count.modify { $0 += 1 }
    #expect(seen.values == ["count 1", "count 2", "count 3"])
    #expect(label.value == "count 3")
    subscription.cancel()
  }

  /// A map's transform may return nil: an optional result is a value like any other,
  /// delivered for every change.
  @Test func mapToAnOptionalDeliversNilLikeAnyValue() {
    let count = Property(1)
    let even: ReadOnlyProperty<Int?> = count.map { $0.isMultiple(of: 2) ? $0 : nil }
    let seen = Recorder<Int?>()
    let subscription = even.observe { seen.append($0) }
    for value in 2...4 { count.value = value }
    #expect(seen.values == [nil, 2, nil, 4])
    #expect(even.value == 4)
    subscription.cancel()
  }

  @Test func readOnlyPropertyOfAPropertyIsAView() {
    let property = Property(4)
    let view = ReadOnlyProperty(property)
    property.value = 5
    #expect(view.value == 5)
    let seen = Recorder<Int>()
    let subscription = view.observe { seen.append($0) }
    property.value = 6
    #expect(seen.values == [5, 6])
    #expect(property.observerCount == 1)
    subscription.cancel()
  }

  @Test func everyObservationMemberWorksOnADerivedValue() async {
    struct Point: Equatable, Sendable {
      var x: Int
      var y: Int
    }
    let source = Property(Point(x: 0, y: 0))
    let doubled = source.map { Point(x: $0.x * 2, y: $0.y * 2) }
    let owner = Owner()
    let values = Recorder<Point>()
    let changes = Recorder<Change<Point>>()
    let xs = Recorder<Int>()
    let once = Recorder<Point>()
    doubled.observe(with: owner) { _, point in values.append(point) }
    doubled.observeChanges(with: owner) { _, change in changes.append(change) }
    doubled.observe(\.x, with: owner) { _, x in xs.append(x) }
    doubled.observeOnce(with: owner) { _, point in once.append(point) }
    let sequence = doubled.values(bufferingPolicy: .unbounded)
    #expect(doubled.observerCount == 5)
    source.value = Point(x: 1, y: 0)
    source.value = Point(x: 1, y: 1)
    #expect(values.values == [Point(x: 0, y: 0), Point(x: 2, y: 0), Point(x: 2, y: 2)])
    #expect(
      changes.values == [
        Change(oldValue: Point(x: 0, y: 0), newValue: Point(x: 2, y: 0)),
        Change(oldValue: Point(x: 2, y: 0), newValue: Point(x: 2, y: 2)),
      ])
    #expect(xs.values == [0, 2])
    #expect(once.values == [Point(x: 2, y: 0)])
    var received: [Point] = []
    for await point in sequence {
      received.append(point)
      if received.count == 3 { break }
    }
    #expect(received == [Point(x: 0, y: 0), Point(x: 2, y: 0), Point(x: 2, y: 2)])
  }

  @Test func combineLatestPairsTwoPropertiesAndNestsForThree() {
    let a = Property(1)
    let b = Property("x")
    let c = Property(true)
    let three = a.combineLatest(b).combineLatest(c)
    let seen = Recorder<String>()
    let subscription = three.observe { seen.append("\($0.0.0)\($0.0.1)\($0.1)") }
    a.value = 2
    b.value = "y"
    c.value = false
    #expect(seen.values == ["1xtrue", "2xtrue", "2ytrue", "2yfalse"])
    #expect(three.value.0.0 == 2 && three.value.0.1 == "y" && three.value.1 == false)
    subscription.cancel()
  }

  @Test func combineLatestOfThreeIsFlat() {
    let a = Property(1)
    let b = Property("x")
    let c = Property(true)
    let three: ReadOnlyProperty<(Int, String, Bool)> = a.combineLatest(b, c)
    let seen = Recorder<String>()
    let subscription = three.observe { seen.append("\($0)\($1)\($2)") }
    a.value = 2
    b.value = "y"
    c.value = false
    #expect(seen.values == ["1xtrue", "2xtrue", "2ytrue", "2yfalse"])
    #expect(three.value == (2, "y", false))
    subscription.cancel()
  }

  @Test func combineLatestOfManyIsFlatAndGlitchFree() {
    let a = Property(0)
    let b = Property(10)
    let doubled = a.map { $0 * 2 }
    let many = a.combineLatest(b, doubled, a, b.readOnly)
    let seen = Recorder<Bool>()
    let subscription = many.observe { x, y, twice, again, same in
      seen.append(twice == 2 * x && again == x && same == y)
    }
    for value in 1...20 {
      a.value = value
      b.value = value + 10
    }
    #expect(seen.values.count == 41)
    #expect(seen.values.allSatisfy { $0 })
    #expect(many.value == (20, 30, 40, 20, 30))
    subscription.cancel()
  }

  @Test func aCollectionOfPropertiesCombinesIntoAnArray() {
    let scores = [Property(1), Property(2), Property(3)]
    let all = scores.combineLatest()
    let total = all.map { $0.reduce(0, +) }
    let seen = Recorder<Int>()
    let subscription = total.observe { seen.append($0) }
    scores[1].value = 20
    scores[2].value = 30
    #expect(all.value == [1, 20, 30])
    #expect(seen.values == [6, 24, 51])
    #expect([Property<Int>]().combineLatest().value == [])
    subscription.cancel()
  }

  @Test func aCollectionOfViewsDerivedValuesAndConstantsCombinesIntoAnArray() {
    let base = Property(1)
    let other = Property(5)
    let mixed: [ReadOnlyProperty<Int>] = [
      base.readOnly, base.map { $0 * 10 }, ReadOnlyProperty(constant: 7), other.readOnly,
    ]
    let all = mixed.combineLatest()
    let seen = Recorder<[Int]>()
    let subscription = all.observe { seen.append($0) }
    base.value = 2
    other.value = 6
    #expect(seen.values == [[1, 10, 7, 5], [2, 20, 7, 5], [2, 20, 7, 6]])
    var plain: [Property<Int>]? = (0..<20).map { Property($0) }
    let views = plain!.combineLatest()  // keeps its sources alive
    plain![19].value = 190
    plain = nil
    #expect(views.value == Array(0..<19) + [190])
    subscription.cancel()
  }

  @Test func flatMapLatestAcceptsAPropertyAViewADerivedValueOrAConstant() {
    let choice = Property(0)
    let plain = Property(10)
    let viewed = Property(20)
    let derived = Property(3).map { $0 * 10 }
    let followed = choice.flatMapLatest { index -> ReadOnlyProperty<Int> in
      switch index {
      case 0: plain.readOnly
      case 1: ReadOnlyProperty(viewed)
      case 2: derived
      default: ReadOnlyProperty(constant: -1)
      }
    }
    let seen = Recorder<Int>()
    let subscription = followed.observe { seen.append($0) }
    for index in 1...3 { choice.value = index }
    #expect(seen.values == [10, 20, 30, -1])
    subscription.cancel()
  }

  // MARK: Always current

  @Test(arguments: 0..<3)
  func derivedValueIsAlwaysCurrentReadYourWritesOnEveryThread(_ shape: Int) {
    let a = Property(0)
    let b = Property(0)
    let derived: ReadOnlyProperty<Int> =
      switch shape {
      case 0: a.map { $0 * 2 }.map { $0 / 2 }
      case 1: a.combineLatest(b).map { $0.0 }
      default: b.flatMapLatest { _ in a }
      }
    let stale = Counter()
    #expect(
      onThreads { _ in
        for _ in 0..<500 {
          let mine = a.modify { value -> Int in
            value += 1
            return value
          }
          if derived.value < mine { stale.increment() }
          b.value = mine
        }
      })
    #expect(stale.value == 0)
    #expect(derived.value == a.value)
  }

  @Test func readingADerivedValueNeverWaitsForADelivery() {
    let source = Property(0)
    let mapped = source.map { $0 + 100 }
    let inHandler = Gate()
    let release = Gate()
    let blocker = mapped.observeChanges { _ in
      inHandler.open()
      release.wait()
    }
    let writer = Spawned { source.value = 1 }
    #expect(inHandler.wait())
    // The writer delivers for the source and is stuck in a handler; this write is
    // queued behind it, and reading still sees it at once.
    source.value = 2
    let read = Monitor(0)
    #expect(completesOnAnotherThread(timeout: .seconds(5)) { read.withLock { $0 = mapped.value } })
    #expect(read.current == 102)
    #expect(mapped.value == 102)
    release.open()
    #expect(writer.join())
    blocker.cancel()
  }

  // MARK: Ordered and convergent

  @Test(arguments: 0..<4)
  func derivedObserversReceiveUpdatesInCommitOrderAndConvergeOnValue(_ shape: Int) {
    let a = Property(0)
    let b = Property(0)
    let doubled = a.map { $0 * 2 }
    let derived: ReadOnlyProperty<Int> =
      switch shape {
      case 0: doubled
      case 1: a.combineLatest(b).map { $0.0 * 2 }
      // The same target each time: a switch to another target would deliver that
      // target's own order, which need not continue this one.
      case 2: b.flatMapLatest { _ in doubled }
      default: [a, b].combineLatest().map { $0[0] * 2 }
      }
    let seen = Recorder<Int>()
    let queued = Recorder<Int>()
    let s1 = derived.observe { seen.append($0) }
    let s2 = derived.observe(on: .queue(DispatchQueue(label: "derived-order"))) { queued.append($0) }
    let perThread = 300
    #expect(
      onThreads { index in
        for step in 0..<perThread {
          a.modify { $0 += 1 }
          if index == 0 { b.value = step }
        }
      })
    let final = contentionThreads * perThread * 2
    #expect(derived.value == final)
    #expect(seen.wait { $0.last == final })
    #expect(queued.wait { $0.last == final })
    // Increments commit 1, 2, 3, … in order: the doubled values must never go back.
    for recorded in [seen.values, queued.values] {
      #expect(zip(recorded, recorded.dropFirst()).allSatisfy { $0 < $1 })
    }
    s1.cancel()
    s2.cancel()
  }

  @Test func aChangeThatLeavesAnEquatableResultEqualNotifiesNobody() {
    let number = Property(0)
    let isEven = number.map { $0 % 2 == 0 }
    let changes = Recorder<Change<Bool>>()
    let subscription = isEven.observeChanges { changes.append($0) }
    for value in [2, 4, 5, 7, 8] { number.value = value }
    #expect(changes.values == [Change(oldValue: true, newValue: false), Change(oldValue: false, newValue: true)])
    subscription.cancel()
  }

  @Test func dedupOfADerivedValueIsExactUnderConcurrentWrites() {
    let number = Property(0)
    let bucket = number.map { $0 / 10 }
    let repeated = Counter()
    let last = Monitor(Int.min)
    let subscription = bucket.observeChanges { change in
      if change.oldValue == change.newValue { repeated.increment() }
      last.withLock { $0 = change.newValue }
    }
    #expect(onThreads { _ in for _ in 0..<400 { number.modify { $0 += 1 } } })
    #expect(repeated.value == 0)
    #expect(last.current == bucket.value)
    subscription.cancel()
  }

  @Test func aNonEquatableResultIsDeliveredForEveryChange() {
    let number = Property(0)
    let boxed = number.map { Plain(value: $0 / 10) }
    let count = Counter()
    let subscription = boxed.observeChanges { _ in count.increment() }
    for value in 1...5 { number.value = value }
    #expect(count.value == 5)
    subscription.cancel()
  }

  // MARK: No torn combination

  @Test func noTornCombinationStatesOnlyMoveForwardUnderRacingWriters() {
    // Two threads write one side each. Pairs may coalesce when the writers race, but
    // every pair is made of committed values, each side moves only forward, and the
    // last pair is the final state.
    let a = Property(Plain(value: 0))
    let b = Property(Plain(value: 0))
    let pair = a.combineLatest(b)
    let seen = Recorder<(Int, Int)>()
    let subscription = pair.observe { seen.append(($0.0.value, $0.1.value)) }
    let perSide = 500
    #expect(
      onThreads(2) { index in
        for step in 1...perSide {
          if index == 0 { a.value = Plain(value: step) } else { b.value = Plain(value: step) }
        }
      })
    #expect(seen.wait { $0.last.map { $0 == (perSide, perSide) } ?? false })
    let values = seen.values
    #expect(values.count <= 1 + 2 * perSide, "each write is delivered at most once")
    for (before, after) in zip(values, values.dropFirst()) {
      #expect(after.0 >= before.0 && after.1 >= before.1)
      #expect(after.0 != before.0 || after.1 != before.1)
    }
    subscription.cancel()
  }

  @Test func noTornCombinationSequentialWritesAreEachDeliveredOnce() {
    // One thread, nobody else delivering: every state is delivered, once.
    let a = Property(Plain(value: 0))
    let b = Property(Plain(value: 0))
    let seen = Recorder<(Int, Int)>()
    let subscription = a.combineLatest(b).observe { seen.append(($0.0.value, $0.1.value)) }
    for step in 1...3 {
      a.value = Plain(value: step)
      b.value = Plain(value: step)
    }
    #expect(seen.values.map { [$0.0, $0.1] } == [[0, 0], [1, 0], [1, 1], [2, 1], [2, 2], [3, 2], [3, 3]])
    subscription.cancel()
  }

  // MARK: Chains switch cleanly

  @Test func flatMapLatestReadsTheCurrentTargetAtOnceAndFollowsItWhenObserved() {
    let me = Property<Friend?>(Friend("Ann"))
    let name = me.flatMapLatest { $0?.name }
    #expect(name.value == "Ann")
    #expect(me.value?.name.observerCount == 0, "unobserved, it follows nothing")
    let seen = Recorder<String?>()
    let subscription = name.observe { seen.append($0) }
    #expect(me.value?.name.observerCount == 1, "observed, it follows its current target")
    // The target's own change is followed without the base changing first.
    me.value?.name.value = "Anna"
    #expect(seen.values == ["Ann", "Anna"])
    subscription.cancel()
  }

  @Test func chainsSwitchCleanlyDetachingBeforeDeliveringTheNewTarget() {
    let old = Property(1)
    let new = Property(1_001)
    let choice = Property(0)
    let followed = choice.flatMapLatest { $0 == 0 ? old : new }
    let oldCountsAtSwitch = Recorder<Int>()
    let seen = Recorder<Int>()
    let subscription = followed.observe { value in
      if value > 1_000, oldCountsAtSwitch.count == 0 { oldCountsAtSwitch.append(old.observerCount) }
      seen.append(value)
    }
    #expect(old.observerCount == 1)
    let stop = Gate()
    let writer = Spawned {
      while !stop.isOpened { old.modify { $0 = $0 % 1_000 + 1 } }
    }
    #expect(seen.wait { $0.count > 10 })
    choice.value = 1
    new.value = 1_002
    stop.open()
    #expect(writer.join())
    #expect(oldCountsAtSwitch.values == [0], "the old target was detached first")
    let values = seen.values
    let firstNew = values.firstIndex { $0 > 1_000 }!
    #expect(values[firstNew...].allSatisfy { $0 > 1_000 }, "nothing from the old target after the switch")
    #expect(values.last == 1_002)
    #expect(new.observerCount == 1)
    subscription.cancel()
  }

  @Test func flatMapLatestConvergesUnderConcurrentSwitchesAndWrites() {
    let targets = (0..<3).map { Property($0 * 1_000) }
    let choice = Property(0)
    let followed = choice.flatMapLatest { targets[$0] }
    let last = Monitor(Int.min)
    let subscription = followed.observe { value in last.withLock { $0 = value } }
    #expect(
      onThreads { index in
        var random = SplitMix(seed: index)
        for _ in 0..<300 {
          if index == 0 {
            choice.value = Int.random(in: 0..<3, using: &random)
          } else {
            targets[Int.random(in: 0..<3, using: &random)].modify { $0 += 1 }
          }
        }
      })
    #expect(followed.value == targets[choice.value].value)
    #expect(last.current == followed.value)
    #expect(targets.map(\.observerCount).reduce(0, +) == 1, "only the current target is followed")
    subscription.cancel()
  }

  @Test func flatMapLatestThroughAMissingLinkReadsNil() {
    let me = Property<Friend?>(nil)
    let name = me.flatMapLatest { $0?.name }
    let seen = Recorder<String?>()
    let subscription = name.observe { seen.append($0) }
    let ann = Friend("Ann")
    me.value = ann
    ann.name.value = "Anna"
    me.value = nil
    ann.name.value = "Annie"
    #expect(seen.values == [nil, "Ann", "Anna", nil])
    #expect(ann.name.observerCount == 0)
    #expect(name.value == nil)
    subscription.cancel()
  }

  // MARK: Lifetime

  @Test func aDerivedValueNobodyReferencesOrObservesIsFreedAndItsSubscriptionsEnd() {
    let live = LiveCount()
    let a = Property(1)
    let b = Property(2)
    do {
      let tracked = Tracked(live)
      let mapped = a.map { value in withExtendedLifetime(tracked) { value + 1 } }
      let pair = mapped.combineLatest(b)
      let followed = b.flatMapLatest { _ in pair.map { $0.0 } }
      #expect(followed.value == 2)
      // Unobserved, derived values follow nothing.
      #expect(a.observerCount == 0)
      #expect(b.observerCount == 0)
      let subscription = followed.observe { _ in }
      #expect(a.observerCount == 1)
      #expect(b.observerCount == 1)  // one link per root, however many paths lead to it
      subscription.cancel()
    }
    #expect(live.value == 0, "the transform and its captures were released")
    #expect(a.observerCount == 0)
    #expect(b.observerCount == 0)
  }

  @Test func aSourceNeverKeepsADerivedValueAlive() {
    let live = LiveCount()
    let source = Property(0)
    var mapped: ReadOnlyProperty<Int>? = source.map { [tracked = Tracked(live)] in tracked.id + $0 }
    #expect(live.value == 1)
    source.value = 1
    mapped = nil
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
    _ = mapped
  }

  @Test func aSubscriptionKeepsADerivedValueAliveUntilItEnds() {
    let live = LiveCount()
    let source = Property(0)
    let seen = Recorder<Int>()
    let subscription = source.map { [tracked = Tracked(live)] in tracked.id + $0 * 2 }.observe { seen.append($0) }
    source.value = 1
    #expect(seen.values == [0, 2], "observed without a reference, it keeps working")
    #expect(live.value == 1)
    subscription.cancel()
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  @Test func aDerivedValueWhoseObserversOwnerDiedIsFreedByTheNextChange() {
    let live = LiveCount()
    let source = Property(0)
    var owner: Owner? = Owner()
    source.map { [tracked = Tracked(live)] in tracked.id + $0 }.observe(with: owner!) { _, _ in }
    #expect(live.value == 1)
    owner = nil
    source.value = 1
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  @Test func derivedValuesWhoseObserversOwnersDiedAreFreedEvenWhenTheResultNeverChanges() {
    let live = LiveCount()
    let source = Property(0)
    for _ in 0..<100 {
      let owner = Owner()
      source.map { [tracked = Tracked(live)] in tracked.id + $0 >= 0 }.observe(with: owner) { _, _ in }
    }
    // Each subscribe to the source already frees some of the values whose observers'
    // owners died (its incremental scan finds them unobserved).
    #expect(live.value < 100)
    // Every write leaves each result `true`: nothing is delivered, yet the writes find
    // the dead observers, and the values are freed.
    for value in 1...100 { source.value = value }
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  @Test func aDerivedValueKeepsItsSourcesAlive() {
    let live = LiveCount()
    let property = Property(3)
    var middle: ReadOnlyProperty<Int>? = property.map { [tracked = Tracked(live)] in tracked.id + $0 * 2 }
    let outer = middle!.map { $0 + 1 }
    middle = nil
    #expect(live.value == 1, "the middle of the chain is kept by the outer value")
    let seen = Recorder<Int>()
    let subscription = outer.observe { seen.append($0) }
    property.value = 4
    #expect(seen.values == [7, 9])
    #expect(outer.value == 9)
    subscription.cancel()
    _ = middle
  }

  // MARK: Reentrancy and user code

  @Test func writeFromADerivedHandlerIsDeliveredAfterTheCurrentPass() {
    let source = Property(0)
    let mapped = source.map { $0 * 10 }
    let log = Recorder<String>()
    let first = mapped.observe { value in
      log.append("a\(value)")
      if value == 10 { source.value = 2 }
    }
    let second = mapped.observe { value in log.append("b\(value)") }
    source.value = 1
    #expect(log.values == ["a0", "b0", "a10", "b10", "a20", "b20"])
    first.cancel()
    second.cancel()
  }

  @Test func transformsRunUnderNoLock() {
    let source = Property(0)
    let other = Property(0)
    // A transform that reads its source and writes another property would stop the
    // program with the nested-lock message if it ran under a lock.
    let mapped = source.map { value -> Int in
      other.value = value + source.value
      return value
    }
    let seen = Recorder<Int>()
    let subscription = mapped.observe { seen.append($0) }
    source.value = 5
    #expect(seen.values == [0, 5])
    #expect(other.value == 10)
    subscription.cancel()
  }

  // MARK: Arrays

  @Test func anArrayPropertysReadOnlyViewMapsAndCombines() {
    let friends = ArrayProperty(["Ann"])
    let filter = Property("")
    let view = friends.readOnly
    let visible = view.combineLatest(filter).map { names, prefix in names.filter { $0.hasPrefix(prefix) } }
    let count = view.map(\.count)
    let seen = Recorder<[String]>()
    let counts = Recorder<Int>()
    let s1 = visible.observe { seen.append($0) }
    let s2 = count.observe { counts.append($0) }
    #expect(friends.observerCount == 2, "each observed derived value follows the array itself, once")
    friends.append("Bob")
    friends.batch { array in
      array.append("Bea")
      array.remove(at: 0)
    }
    filter.value = "B"
    // The filter leaves the visible names equal: an Equatable result skips it.
    #expect(seen.values == [["Ann"], ["Ann", "Bob"], ["Bob", "Bea"]])
    #expect(counts.values == [1, 2])
    #expect(view.value == ["Bob", "Bea"])
    s1.cancel()
    s2.cancel()
  }

  @Test func anArrayPropertysReadOnlyViewEndsItsSubscriptionWhenDropped() {
    let friends = ArrayProperty([1, 2])
    do {
      let doubled = friends.readOnly.map { $0.map { $0 * 2 } }
      #expect(friends.observerCount == 0, "unobserved, it follows nothing")
      let subscription = doubled.observe { _ in }
      friends.append(3)
      #expect(doubled.value == [2, 4, 6])
      #expect(friends.observerCount == 1)
      withExtendedLifetime(subscription) {}
    }
    #expect(friends.observerCount == 0)
  }
}
