// Atomic values that escaping closures and threads can share.

import Synchronization

/// A flag that escaping closures can share.
final class Flag: Sendable {
  private let raw = Atomic<Bool>(false)
  init() {}
  var isSet: Bool { raw.load(ordering: .acquiring) }
  func set(_ value: Bool = true) { raw.store(value, ordering: .releasing) }
}

/// An integer that escaping closures can share.
final class Number: Sendable {
  private let raw: Atomic<Int>
  init(_ initial: Int) { raw = Atomic(initial) }
  var value: Int { raw.load(ordering: .acquiring) }
  func store(_ value: Int) { raw.store(value, ordering: .releasing) }
  /// Stores `value`; returns the value before.
  func exchange(_ value: Int) -> Int { raw.exchange(value, ordering: .acquiringAndReleasing) }
  func increment() { raw.add(1, ordering: .acquiringAndReleasing) }
  /// Adds `amount`; returns the new value.
  @discardableResult
  func add(_ amount: Int) -> Int { raw.add(amount, ordering: .acquiringAndReleasing).newValue }
}
