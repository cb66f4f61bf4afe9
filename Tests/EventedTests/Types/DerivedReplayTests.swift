import Synchronization
import Testing

@testable import Evented

/// A new observer of a derived value starts from its current state, the one `value`
/// reads, even while a commit of a source waits for another thread's delivery: so the
/// subscribing thread reads its own writes through the replay too (promise 7), and no
/// older state follows it.
@Suite struct DerivedReplayTests {
  /// A derived value of `held`'s commits, and what the main thread writes.
  struct Case: Sendable, CustomStringConvertible {
    let description: String
    /// Builds the derived value over `held`, whose delivery of 1 another thread holds.
    let make: @Sendable (Property<Int>) -> ReadOnlyProperty<Int>
  }

  static let cases: [Case] = [
    Case(description: "map") { held in held.map { $0 * 10 } },
    Case(description: "combineLatest") { held in held.combineLatest(Property(5)).map { $0.0 * 10 + $0.1 } },
    Case(description: "flatMapLatest to the source") { held in Property(0).flatMapLatest { _ in held } },
    Case(description: "flatMapLatest to a map") { held in
      let mapped = held.map { $0 * 10 }
      return Property(0).flatMapLatest { _ in mapped }
    },
    Case(description: "flatMapLatest of a flatMapLatest") { held in
      let inner = Property(0).flatMapLatest { _ in held }
      return Property(0).flatMapLatest { _ in inner }
    },
  ]

  /// Another thread writes 1 to a property whose first observer holds that delivery;
  /// the main thread writes 2, which waits behind it, then subscribes to a value
  /// derived from the property (made after the holding observer, so behind it too).
  @Test(arguments: cases)
  func readYourWritesANewObserverOfADerivedValueStartsFromItsValueWhileAnUpdateWaits(_ kind: Case) throws {
    let held = Property(0)
    let inDelivery = Gate()
    let release = Gate()
    let holder = held.observeChanges { _ in
      inDelivery.open()
      _ = release.wait()
    }
    let derived = kind.make(held)
    let writer = Spawned { held.value = 1 }
    #expect(inDelivery.wait())
    held.value = 2
    let current = derived.value
    let seen = Recorder<Int>()
    let changes = Recorder<[Int]>()
    let observer = derived.observe { seen.append($0) }
    let changeObserver = derived.observeChanges { changes.append([$0.oldValue, $0.newValue]) }
    #expect(seen.values == [current], "the replay is the value read")
    release.open()
    #expect(writer.join())
    #expect(derived.value == current)
    #expect(seen.values == [current], "no older state follows the replay")
    #expect(changes.values.isEmpty, "no change to the state already current")
    observer.cancel()
    changeObserver.cancel()
    holder.cancel()
  }

  /// A change of the outer source that picks another target waits for another thread's
  /// delivery: a new observer starts from `value` (the new target's), as for every
  /// derived value, and follows the new target only; the old target is not followed.
  @Test func aNewObserverOfAFlatMapLatestWhoseSwitchWaitsStartsFromItsValue() throws {
    let outer = Property(0)
    let targets = [Property(100), Property(200)]
    let inDelivery = Gate()
    let release = Gate()
    let holder = outer.observeChanges { _ in
      inDelivery.open()
      _ = release.wait()
    }
    let followed = outer.flatMapLatest { targets[$0] }
    let writer = Spawned { outer.value = 1 }
    #expect(inDelivery.wait())
    #expect(followed.value == 200)
    let seen = Recorder<Int>()
    let oldCountsAtSwitch = Recorder<Int>()
    let observer = followed.observe { value in
      if value >= 200 { oldCountsAtSwitch.append(targets[0].observerCount) }
      seen.append(value)
    }
    #expect(seen.values == [200], "the value")
    targets[0].value = 101
    release.open()
    #expect(writer.join())
    #expect(seen.values == [200])
    #expect(oldCountsAtSwitch.values == [0], "the old target is not followed")
    observer.cancel()
    holder.cancel()
  }

  /// Two maps of one property are two targets: switching between them delivers the
  /// other one's value although their root did not change.
  @Test func flatMapLatestSwitchesBetweenTwoMapsOfOneProperty() {
    let a = Property(1)
    let plain = a.map { $0 }
    let tenfold = a.map { $0 * 10 }
    let flag = Property(false)
    let followed = flag.flatMapLatest { $0 ? tenfold : plain }
    let seen = Recorder<Int>()
    let observer = followed.observe { seen.append($0) }
    flag.value = true
    a.value = 2
    flag.value = false
    let late = Recorder<Int>()
    let lateObserver = followed.observe { late.append($0) }
    #expect(seen.values == [1, 10, 20, 2])
    #expect(late.values == [2])
    observer.cancel()
    lateObserver.cancel()
  }

  /// A selector that builds a new constant on each call: a new observer commits
  /// nothing (no state is delivered again to the others), and every write is delivered.
  @Test func flatMapLatestToAConstantBuiltPerCallDeliversEachStateOnce() {
    struct Box: Sendable { let n: Int }  // not Equatable: nothing skips a repeated state
    let n = Property(0)
    let followed = n.flatMapLatest { ReadOnlyProperty(constant: Box(n: $0)) }
    let seen = Recorder<Int>()
    let observer = followed.observe { seen.append($0.n) }
    for value in 1...200 {
      let extra = followed.observe { _ in }
      extra.cancel()
      n.value = value
    }
    #expect(seen.values == Array(0...200))
    observer.cancel()
  }
}
