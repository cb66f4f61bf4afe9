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
  /// Inside a transaction, a source's write (`isSource`) is kept for the transaction's
  /// commit instead (Transaction.swift); a derived value's commit never is.
  ///
  /// - Returns: Whether a change was committed now: false if `next` was a duplicate,
  ///   or if the write was kept for the running transaction, whose commit notifies
  ///   Observation (or, rolled back, notifies nobody).
  @inlinable @discardableResult
  func change(
    _ token: consuming Token, to next: Stored, isDuplicate: (@Sendable (Stored, Stored) -> Bool)?,
    inPass: Bool = false, isSource: Bool = true
  ) -> Bool where Message == Update<Stored> {
    // The stored value is reached as an `inout` argument throughout, so that unoptimized
    // builds pass it by address instead of copying it to the stack.
    if Self.equal(&token.state.pointee.stored, next, isDuplicate) {
      token.unlock()
      return false
    }
    if isSource, transactionsBegun.load(ordering: .relaxed), let thread = DeliveringThread.existing,
      thread.pointee.transaction != nil
    {
      // Not retained: the thread's state holds its running transaction.
      let running = Unmanaged.passUnretained(thread.pointee.transaction.unsafelyUnwrapped)
      writeInTransaction(token, next, running, isDuplicate: isDuplicate)
      return false
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
      return Update(old: stored, new: next, isInitial: false)
    }
    return true
  }

  /// Stores `next` for the running transaction: the first write keeps the state before
  /// it in a record, which other threads read meanwhile, and counts one change; later
  /// ones save the state for a nested transaction's rollback. Commits nothing; takes
  /// over the caller's lock.
  @inlinable @inline(never)
  func writeInTransaction(
    _ token: consuming Token, _ next: Stored, _ running: Unmanaged<RunningTransaction>,
    isDuplicate: (@Sendable (Stored, Stored) -> Bool)?
  ) where Message == Update<Stored> {
    let state = token.state
    running._withUnsafeGuaranteedRef { record(in: state, $0, isDuplicate: isDuplicate) }
    let old = Self.replace(&state.pointee.stored, with: next)
    token.unlock()
    withExtendedLifetime(old) {}
  }

  /// The record part of ``writeInTransaction(_:_:_:isDuplicate:)``: makes the first
  /// write's record, or notes a later write. Under the property's lock.
  @inlinable @inline(__always)
  func record(
    in state: UnsafeMutablePointer<HubState<Message, Stored>>, _ running: RunningTransaction,
    isDuplicate: (@Sendable (Stored, Stored) -> Bool)?
  ) where Message == Update<Stored> {
    // Not retained: the core holds the record.
    let found = state.pointee.core?.pointee.transaction.map { Unmanaged.passUnretained($0) }
    if let found, found._withUnsafeGuaranteedRef({ running.ownWrite($0) != nil }) {
      found._withUnsafeGuaranteedRef { record in
        // The first write kept no duplicate check: its value differs from the one before.
        if !record.mustSettle || record.isUndone { Self.keepDuplicateCheck(record, isDuplicate) }
        if running.rewrite(record) {
          let current = state.pointee.stored
          running.save { [self] in
            let old = storage.withLock { Self.replace(&$0.stored, with: current) }
            withExtendedLifetime(old) {}
          }
        }
      }
    } else {
      let record = PropertyWrite(
        self, running.mark, earlier: state.pointee.stored, earlierVersion: state.pointee.version)
      HubState.storeVersion(state, (state.pointee.version &+ 1) | versionMayHideBit)
      running.add(record)
      state.pointee.existingCore().pointee.transaction = consume record
    }
  }

  /// Gives the record of a property written again in the running transaction the
  /// property's duplicate check, for its settling (``PropertyWrite/settleNow()``).
  @inlinable @inline(never)
  static func keepDuplicateCheck(_ record: TransactionRecord, _ isDuplicate: (@Sendable (Stored, Stored) -> Bool)?)
  where Message == Update<Stored> {
    unsafeDowncast(record, to: PropertyWrite<Stored>.self).isDuplicate = isDuplicate
  }

  /// The value the calling thread reads: the one before an open transaction of another
  /// thread that wrote it, else the stored one. Inside a transaction, the read is
  /// recorded (TransactionReads.swift).
  @inlinable func readVisible() -> Stored where Message == Update<Stored> {
    storage.withLock { state in
      noteRead(&state)
      if let record = state.hidingRecord { return unsafeDowncast(record, to: PropertyWrite<Stored>.self).earlierValue }
      return state.stored
    }
  }

  /// Whether `next` is a duplicate of `stored` (never, without `isDuplicate`). Called
  /// through the optional, which binding would copy: a retain of the closure's context
  /// on every write.
  @inlinable @inline(__always)
  static func equal(
    _ stored: inout Stored, _ next: Stored, _ isDuplicate: (@Sendable (Stored, Stored) -> Bool)?
  ) -> Bool {
    isDuplicate?(stored, next) == true
  }

  /// Stores `next`; returns the old value, to release after unlocking.
  @inlinable @inline(__always)
  static func replace(_ stored: inout Stored, with next: Stored) -> Stored {
    defer { stored = next }
    return stored
  }
}
