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
    Case(description: "flatMapLatest switched by the source") { held in
      let targets = [Property(100), Property(200), Property(300)]
      return held.flatMapLatest { targets[$0] }
    },
    Case(description: "flatMapLatest switched to a map") { held in
      let targets = [Property(100), Property(200), Property(300)].map { $0.map { $0 + 1 } }
      return held.flatMapLatest { targets[$0] }
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
}
