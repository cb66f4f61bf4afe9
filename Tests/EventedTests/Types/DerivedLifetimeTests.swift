import Observation
import Testing

@testable import Evented

/// A derived value whose last observer's owner died is freed by the next subscribe or
/// `observerCount` on one of its sources, without waiting for a write.
@Suite struct DerivedLifetimeTests {
  @Test(arguments: [false, true])
  func lifetimeAMapWhoseObserversOwnerDiedIsFreedByTheNextObserverCount(ofEvents: Bool) {
    let live = LiveCount()
    let property = Property(0)
    let events = EventSource<Int>()
    var owner: Owner? = Owner()
    if ofEvents {
      events.map { [tracked = Tracked(live)] in tracked.id + $0 }.observe(with: owner!) { _, _ in }
    } else {
      property.map { [tracked = Tracked(live)] in tracked.id + $0 }.observe(with: owner!) { _, _ in }
    }
    owner = nil
    #expect((ofEvents ? events.observerCount : property.observerCount) == 0)
    #expect(live.value == 0)
  }

  /// A value derived from a derived value subscribes to the roots, not to the value it
  /// is derived from: that value's `observerCount` frees it all the same.
  @Test(arguments: ["map", "array view"])
  func lifetimeAValueWhoseObserversOwnerDiedIsFreedByTheObserverCountOfTheValueItIsDerivedFrom(_ kind: String) {
    let live = LiveCount()
    let property = Property(0)
    let items = ArrayProperty<Int>([])
    let middle = kind == "map" ? property.map { $0 + 1 } : items.readOnly.map(\.count)
    var owner: Owner? = Owner()
    middle.map { [tracked = Tracked(live)] in tracked.id + $0 }.observe(with: owner!) { _, _ in }
    #expect(live.value == 1)
    owner = nil
    #expect(middle.observerCount == 0)
    #expect(live.value == 0)
  }

  /// The `==` of a derived value runs under its lock; counting the observers of its
  /// root, or of another value of the same root, from there sweeps the root, which meets
  /// the value whose lock is held: it is taken as observed, not looked at.
  @Test func lifetimeCountingObserversFromTheEqualityOfAValueOfTheSameRootNeitherStopsNorFrees() {
    let p = Property(0)
    let other = p.map { $0 + 1 }
    let counts = Recorder<Int>()
    let checked = p.map { value in
      Checked(value: value) {
        counts.append(other.observerCount)
        counts.append(p.observerCount)
      }
    }
    let subscription = checked.observe { _ in }
    p.value = 1
    p.value = 1
    #expect(counts.values.count >= 2)
    #expect(Set(counts.values.enumerated().filter { $0.offset % 2 == 1 }.map(\.element)) == [1])
    #expect(p.observerCount == 1)
    subscription.cancel()
  }

  @Test func lifetimeACombinationWhoseObserversOwnerDiedIsFreedByTheNextSubscribe() {
    let live = LiveCount()
    let a = Property(0)
    let b = Property(0)
    var owner: Owner? = Owner()
    a.combineLatest(b).map { [tracked = Tracked(live)] in tracked.id + $0 + $1 }.observe(with: owner!) { _, _ in }
    owner = nil
    let subscription = a.observe { _ in }
    #expect(live.value == 0)
    #expect(a.observerCount == 1)
    #expect(b.observerCount == 0)
    subscription.cancel()
  }

  @Test func lifetimeAFlatMapLatestWhoseObserversOwnerDiedIsFreedByTheNextObserverCountOfItsOuterSource() {
    let live = LiveCount()
    let target = Property(1)
    let outer = Property(target)
    var owner: Owner? = Owner()
    followed(outer, tracking: live)
      .observe(with: owner!) { _, _ in }
    #expect(outer.observerCount == 1)
    #expect(target.observerCount == 1)
    owner = nil
    #expect(outer.observerCount == 0)
    #expect(live.value == 0)
    #expect(target.observerCount == 0)
  }

  @Test func lifetimeAFlatMapLatestWhoseObserversOwnerDiedIsFreedByTheNextObserverCountOfItsTarget() {
    let live = LiveCount()
    let target = Property(1)
    let outer = Property(target)
    var owner: Owner? = Owner()
    followed(outer, tracking: live)
      .map { $0 * 2 }
      .observe(with: owner!) { _, _ in }
    owner = nil
    #expect(target.observerCount == 0)
    #expect(live.value == 0)
    #expect(outer.observerCount == 0)
  }

  @Test func lifetimeAFlatMapLatestStillReferencedIsCurrentAfterItsObserversOwnerDied() {
    let target = Property(1)
    let outer = Property(target)
    let followed = outer.flatMapLatest { $0 }
    var owner: Owner? = Owner()
    followed.observe(with: owner!) { _, _ in }
    owner = nil
    // Unobserved, a derived value follows nothing: it reads its sources when read.
    #expect(outer.observerCount == 0)
    #expect(target.observerCount == 0)
    target.value = 2
    #expect(followed.value == 2)
    let seen = Recorder<Int>()
    let subscription = followed.observe { seen.append($0) }
    target.value = 3
    let next = Property(10)
    outer.value = next
    #expect(seen.values == [2, 3, 10])
    subscription.cancel()
  }

  @Test func lifetimeManyScreensOfDerivedValuesLeaveNothingBehind() {
    let live = LiveCount()
    let a = Property(0)
    let b = Property(0)
    let events = EventSource<Int>()
    for _ in 0..<1_000 {
      let screen = Owner()
      let tracked = Tracked(live)
      a.map { value in withExtendedLifetime(tracked) { value } }.observe(with: screen) { _, _ in }
      a.combineLatest(b).observe(with: screen) { _, _ in }
      a.flatMapLatest { value in withExtendedLifetime(tracked) { b.map { $0 + value } } }
        .observe(with: screen) { _, _ in }
      events.map { value in withExtendedLifetime(tracked) { value } }.observe(with: screen) { _, _ in }
    }
    #expect(a.observerCount == 0)
    #expect(b.observerCount == 0)
    #expect(events.observerCount == 0)
    #expect(live.value == 0)
  }
}

/// An array's `readOnly` view, and what is derived from it, keep the array object alive;
/// when the array is freed, whatever waited on the view lets go of it.
@Suite struct ArrayViewLifetimeTests {
  @Test(arguments: ["view", "map", "combineLatest", "flatMapLatest", "observed view"])
  func lifetimeAnArrayViewOrAValueDerivedFromItKeepsTheArrayObjectAlive(_ kind: String) {
    var items: ArrayProperty<Int>? = ArrayProperty([1])
    let other = Property(0)
    let kept: any PropertyProtocol
    var subscription: Subscription?
    switch kind {
    case "view": kept = items!.readOnly
    case "map": kept = items!.readOnly.map { $0.count }
    case "combineLatest": kept = other.combineLatest(items!.readOnly)
    case "flatMapLatest": kept = other.flatMapLatest { [view = items!.readOnly] _ in view }
    default:
      let view = items!.readOnly
      subscription = view.observe { _ in }
      kept = view
    }
    weak let weakItems = items
    items = nil
    #expect(weakItems != nil)
    weakItems?.append(2)
    withExtendedLifetime((kept, subscription)) {}
  }

  @Test func lifetimeAnArrayWhoseViewAScopeReadIsFreedWithItsElements() {
    let live = LiveCount()
    var items: ArrayProperty<Tracked>? = ArrayProperty([Tracked(live)])
    _ = withObservationTracking({ items!.readOnly.value.count }, onChange: {})
    weak let weakItems = items
    items = nil
    #expect(weakItems == nil)
    #expect(live.value == 0)
  }
}

/// `outer.flatMapLatest { $0 }`, whose transform holds a `Tracked` of `live`: freed
/// when `live` is back to 0.
private func followed(_ outer: Property<Property<Int>>, tracking live: LiveCount) -> ReadOnlyProperty<Int> {
  outer.flatMapLatest { [tracked = Tracked(live)] target in
    _ = tracked
    return target
  }
}

/// A value whose `==` runs `probe`, for code run under a derived value's lock.
private struct Checked: Equatable, Sendable {
  let value: Int
  let probe: @Sendable () -> Void

  static func == (lhs: Checked, rhs: Checked) -> Bool {
    lhs.probe()
    return lhs.value == rhs.value
  }
}
