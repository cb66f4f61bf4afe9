// Promises 7 (read your writes; `modify` is atomic and notifies once) and 8 (dedup is
// exact): the one write path of a property, for `value =`, `modify`, a mutation in
// place through `value`, and a derived value's update.

import Synchronization

extension Hub {
  /// Stores `next` and commits the change from the old value to every current
  /// subscription, unless `isDuplicate` finds the two equal; then unlocks and delivers.
  /// Takes over the caller's lock, which must have been taken by ``lockForCommit()``.
  ///
  /// `isDuplicate` is user code run under the lock (an `==`). The old value is
  /// released after unlocking. `inPass` marks a derived value's commit made by the
  /// delivery of one of its roots (see ``deliverInsideFrame(_:core:thread:inPass:)``).
  ///
  /// - Returns: false if `next` was a duplicate and nothing changed.
  @inlinable @discardableResult
  func change(
    _ token: consuming Token, to next: Stored, isDuplicate: (@Sendable (Stored, Stored) -> Bool)?,
    inPass: Bool = false
  ) -> Bool where Message == Update<Stored> {
    // The stored value is reached as an `inout` argument throughout, so that unoptimized
    // builds pass it by address instead of copying it to the stack.
    if let isDuplicate, Self.equal(&token.state.pointee.stored, next, isDuplicate) {
      token.unlock()
      return false
    }
    let isTransactional: Bool
    if transactionsBegun.load(ordering: .relaxed) {
      isTransactional = token.state.pointee.noteCommit(to: self)
      HubState.publishHiding(token.state)
    } else {
      isTransactional = false
    }
    HubState.countCommit(token.state)
    guard let recipients = token.state.pointee.recipientsOfCommit() else {
      let old = Self.replace(&token.state.pointee.stored, with: next)
      token.unlock()
      withExtendedLifetime(old) {}
      return true
    }
    commit(token, to: consume recipients, inPass: inPass) { stored in
      defer { stored = next }
      return Update(old: stored, new: next, isInitial: false, isTransactional: isTransactional)
    }
    return true
  }

  @inlinable @inline(__always)
  static func equal(
    _ stored: inout Stored, _ next: Stored, _ isDuplicate: @Sendable (Stored, Stored) -> Bool
  ) -> Bool {
    isDuplicate(stored, next)
  }

  /// Stores `next`; returns the old value, to release after unlocking.
  @inlinable @inline(__always)
  static func replace(_ stored: inout Stored, with next: Stored) -> Stored {
    defer { stored = next }
    return stored
  }
}
