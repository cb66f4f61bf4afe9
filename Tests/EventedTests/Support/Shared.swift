// Atomic values that escaping closures and threads can share. Every write signals
// `Changes`, so that `settles` re-checks its condition.

import Synchronization

/// A flag that escaping closures can share.
final class Flag: Sendable {
  private let raw = Atomic<Bool>(false)
  private let scope = Changes.currentScope
  init() {}
  var isSet: Bool { raw.load(ordering: .acquiring) }
  func set(_ value: Bool = true) {
    raw.store(value, ordering: .releasing)
    Changes.signal(scope)
  }
}

/// An integer that escaping closures can share.
final class Number: Sendable {
  private let raw: Atomic<Int>
  private let scope = Changes.currentScope
  init(_ initial: Int) { raw = Atomic(initial) }
  var value: Int { raw.load(ordering: .acquiring) }
  func store(_ value: Int) {
    raw.store(value, ordering: .releasing)
    Changes.signal(scope)
  }
  /// Stores `value`; returns the value before.
  func exchange(_ value: Int) -> Int {
    defer { Changes.signal(scope) }
    return raw.exchange(value, ordering: .acquiringAndReleasing)
  }
  func increment() {
    raw.add(1, ordering: .acquiringAndReleasing)
    Changes.signal(scope)
  }
  /// Adds `amount`; returns the new value.
  @discardableResult
  func add(_ amount: Int) -> Int {
    defer { Changes.signal(scope) }
    return raw.add(amount, ordering: .acquiringAndReleasing).newValue
  }
}
