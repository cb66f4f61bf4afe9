// A computed node's commits: the state a root's commit made, computed and committed to
// the node's hub only if it is later than the state delivered last (promise 5, glitch
// freedom; DerivedProperty.swift says how), and the merging of a commit into the last
// waiting one when the node's deliveries back up, so that each observer holds O(1)
// undelivered state.

import Synchronization

extension DerivedProperty {
  /// Computes the state the commit of `snapshot` made and commits it, if it is later
  /// than the one delivered last. Runs in a root's delivery.
  ///
  /// - Parameters:
  ///   - snapshot: A snapshot of the commit of the only root being delivered
  ///     (``Snapshot/ofCommit(of:version:value:isPartial:_:)``), recycled here.
  ///   - inPass: Called by a root's delivery (see `Hub.proceed`), which checked that
  ///     the node is observed.
  @inlinable func refresh(commit snapshot: Snapshot, inPass: Bool) {
    // With one root, consistent by construction.
    let value = evaluate(in: snapshot)
    let versions = snapshot.versions(of: roots, identities: identities)
    // Returned to the thread before the node's observers, delivered below, run: so
    // that they find it spare when they read derived values.
    snapshot.recycle()
    if Self.isLarge { return commitIfLaterApart(value, versions, inPass: inPass) }
    commitIfLater(value, versions, inPass: inPass)
  }

  /// Computes the latest state from a consistent snapshot of the roots and commits it,
  /// if it is later than the one delivered last. Apart from
  /// ``refresh(commit:inPass:)``, so that neither keeps room for the other's
  /// temporaries (a large value's copies on the stack).
  ///
  /// - Parameters:
  ///   - reused: A snapshot to compute the latest state in (see
  ///     ``Snapshot/consistent(of:reusing:_:)``); nil to take the thread's spare.
  ///   - inPass: Called by a root's delivery (see `Hub.proceed`), which checked that
  ///     the node is observed; false for an arriving observer's catch-up, which may be
  ///     made inside a handler, and for the end of a transaction.
  @inlinable func refresh(reusing reused: Snapshot? = nil, inPass: Bool = false) {
    // Inside a transaction that wrote one of the roots (an observer arriving there),
    // this thread sees a state other threads do not: the node takes the state they
    // see, from before the transaction, and the transaction's end refreshes it from
    // the whole state.
    let reader: Snapshot.Reader = isHiddenByOwnTransaction ? .outsider : .calling
    let (value, versions) = Snapshot.consistent(of: roots, reusing: reused, as: reader) { evaluate(in: $0) }
    if Self.isLarge { return commitIfLaterApart(value, versions, inPass: inPass) }
    commitIfLater(value, versions, inPass: inPass)
  }

  /// ``commitIfLater(_:_:inPass:)`` in a frame of its own (``isLarge``).
  @inlinable @inline(never) func commitIfLaterApart(_ value: Value, _ versions: Versions, inPass: Bool) {
    commitIfLater(value, versions, inPass: inPass)
  }

  /// Commits `value`, the state `versions`, if it is later than the one delivered last.
  @inlinable @inline(__always) func commitIfLater(_ value: Value, _ versions: Versions, inPass: Bool) {
    let token = hub.lockForCommit()
    guard versions.isLater(than: delivered) else { return token.unlock() }
    delivered.assign(versions)
    deliveredFirstVersion.store(versions.first, ordering: .releasing)
    commitState(token, value, inPass: inPass)
  }

  /// Whether the calling thread runs a transaction that wrote one of the roots.
  @inlinable var isHiddenByOwnTransaction: Bool {
    guard Self.isInTransaction, let transaction = DeliveringThread.existing?.pointee.transaction else { return false }
    return identities.contains { transaction.written.contains($0) }
  }

  /// Commits `value`, computed directly from the commit with `version` of the one root,
  /// if no later state was delivered. Runs in the root's delivery.
  @inlinable func commitDirect(_ value: Value, version: UInt64) {
    let token = hub.lockForCommit()
    guard version > delivered.first else { return token.unlock() }
    delivered.first = version
    deliveredFirstVersion.store(version, ordering: .releasing)
    commitState(token, value, inPass: true)
  }

  /// Commits `value` as the node's new state; takes over the caller's lock of the hub.
  ///
  /// Bounded: if another thread is delivering the node's earlier states and the newest
  /// one it has not started is an update for every observer, that update is replaced by
  /// one to `value` (from the same old value) instead of queuing another. So a node
  /// holds at most one undelivered state beyond what its deliverer has started, however
  /// fast its roots change and however slow its observers are, and its observers skip
  /// to the newest state, never back. A thread with nobody else delivering commits and
  /// delivers every state: also when it is the deliverer itself, its delivery of earlier
  /// states postponed until a handler returns (the handler wrote the roots) or running
  /// further up its stack; then its states queue in order, as its roots' commits do.
  ///
  /// A queue observer (`.queue`, `.main`) that holds the backlog limit of submissions
  /// makes the committing thread wait for room, like a property's writer, but after its
  /// delivery frame ends (``Hub/waitForOwedRoom()``), since a commit made by a root's
  /// delivery cannot wait inside it: the observer receives every state, and holds at
  /// most the limit plus one update per committing thread.
  @inlinable func commitState(_ token: consuming Hub<Update<Value>, Value>.Token, _ value: Value, inPass: Bool) {
    guard let core = token.state.pointee.core else {
      if !hub.change(token, to: value, isDuplicate: isDuplicate, inPass: inPass) { hub.scanForDeadOwners() }
      return
    }
    let owesRoom = core.pointee.pressure?.isFull == true
    if core.pointee.queue.backlog > 0, !Self.waitsForOwnWrites(core.pointee.queue) {
      coalesce(token, value)
    } else if !hub.change(token, to: value, isDuplicate: isDuplicate, inPass: inPass) {
      hub.scanForDeadOwners()
    }
    if owesRoom { DeliveringThread.owe(hub.storage) }
  }

  /// Whether the node's waiting states wait for the calling thread's own delivery of its
  /// own writes: it is the node's deliverer (its delivery postponed until a handler
  /// returns, or running further up its stack), and the commit it delivers now is one
  /// it made. Then its next state queues, so that it sees every state it wrote. A
  /// thread delivering other threads' commits merges them, as any other thread does.
  @inlinable static func waitsForOwnWrites(_ queue: borrowing DeliveryQueue<Update<Value>>) -> Bool {
    guard let thread = DeliveringThread.existing, queue.deliverer == UInt(bitPattern: thread) else { return false }
    return !thread.pointee.deliversOthersCommit
  }

  /// ``commitState(_:_:inPass:)`` while earlier states wait for another thread: replaces the
  /// newest waiting update for every observer, if that is what waits last. Out of line,
  /// so that the common path's frame has no room for its temporaries.
  @inlinable @inline(never)
  func coalesce(_ token: consuming Hub<Update<Value>, Value>.Token, _ value: Value) {
    let state = token.state
    let core = state.pointee.core.unsafelyUnwrapped
    let index = core.pointee.queue.pending.count - 1
    // Not when `value` equals the stored value (nothing to commit) or the waiting
    // update's old value (the merged update would change nothing: an equal value must
    // not be delivered twice in a row), nor when a subscription was added since that
    // update was committed (its old value is older than the subscription).
    guard let last = core.pointee.queue.pending[index], case .all(let waiting) = last.recipients,
      !(isDuplicate.map { $0(state.pointee.stored, value) || $0(last.message.old, value) } ?? false),
      let recipients = state.pointee.recipientsOfCommit(), Self.adds(nothing: recipients, to: waiting)
    else {
      if !hub.change(token, to: value, isDuplicate: isDuplicate) { hub.scanForDeadOwners() }
      return
    }
    let merged = Parcel(message: Update(old: last.message.old, new: value, isInitial: false), recipients: recipients)
    merged.committer = Parcel<Update<Value>>.merged
    core.pointee.queue.pending[index] = merged
    HubState.countCommit(state)
    let old = Hub<Update<Value>, Value>.replace(&state.pointee.stored, with: value)
    token.unlock()
    withExtendedLifetime((old, last)) {}  // released after unlocking
  }

  /// Whether every subscription of `recipients` is one of `waiting` too: the same
  /// snapshot (no subscription change since), or one with only removals. Snapshots list
  /// subscriptions in the order they were added, so one pass over both decides.
  @inlinable static func adds(
    nothing recipients: Recipients<Update<Value>>, to waiting: ContiguousArray<Entry<Update<Value>>>
  ) -> Bool {
    guard case .all(let current) = recipients else { return false }
    let same = current.withUnsafeBufferPointer { now in
      waiting.withUnsafeBufferPointer { then in now.baseAddress == then.baseAddress && now.count == then.count }
    }
    if same { return true }
    var next = waiting.startIndex
    for entry in current {
      while next < waiting.endIndex, waiting[next] !== entry { next += 1 }
      if next == waiting.endIndex { return false }
      next += 1
    }
    return true
  }
}
