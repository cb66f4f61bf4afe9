// The effect of an observed derived value: a run, made by a commit of a linked root,
// by an arriving observer or by the end of a transaction, evaluates the value (memo
// first) and commits it to the node's hub only if that state is later than the one
// delivered last (promises "Glitch-free", "Once per commit", "Ordered"), then links
// the node to the roots it read (a `flatMapLatest`'s switch).
//
// A commit that reaches a link is evaluated in a snapshot that pins only that commit:
// if the value reads nothing else, that is the state the commit made, delivered even
// while later commits wait (a thread's own writes, seen one by one); if it reads other
// roots too, the latest consistent state of all of them is taken instead.

import Synchronization

extension DerivedProperty {
  /// Runs the node for the commit of `snapshot`, the only root pinned there
  /// (``Snapshot/ofCommit(of:version:value:isPartial:_:)``), which is recycled here.
  /// Runs in the root's delivery.
  @inlinable func refresh(commit snapshot: Snapshot) {
    if !snapshot.commit.isPartial {
      // Each step in a frame of its own for a large value (Parcel.swift), so that the
      // value computed here is off the stack while the next step runs.
      if Self.isLarge ? publishCommitApart(snapshot) : publishCommit(snapshot) { return }
    }
    if Self.isLarge { return refreshApart(reusing: snapshot) }
    refresh(reusing: snapshot, inPass: true)
  }

  /// Whether a value is large (Parcel.swift). A constant in specialized code.
  @inlinable static var isLarge: Bool { MemoryLayout<Value>.size > largeMessageSize }

  /// Publishes the state the commit of `snapshot` made, if the value reads nothing else
  /// or the other roots it reads are at their versions in the state delivered last.
  ///
  /// - Returns: false if that state may never have existed: then the snapshot is the
  ///   caller's still.
  @inlinable func publishCommit(_ snapshot: Snapshot) -> Bool {
    let (value, reads) = evaluateRecording(in: snapshot)
    guard snapshot.pins.count == 1 || Self.plantedUsesDeliveredValue || extendsDelivered(reads, snapshot.commit) else {
      return false
    }
    // Returned to the thread before the node's observers, delivered below, run: so that
    // they find it spare when they read derived values.
    snapshot.recycle()
    publish(value, reads, inPass: true)
    return true
  }

  /// ``publishCommit(_:)`` in a frame of its own.
  @inlinable @inline(never) func publishCommitApart(_ snapshot: Snapshot) -> Bool {
    publishCommit(snapshot)
  }

  /// ``refresh(reusing:inPass:relinking:)`` from a root's delivery, in a frame of its own.
  @inlinable @inline(never) func refreshApart(reusing snapshot: Snapshot) {
    refresh(reusing: snapshot, inPass: true)
  }

  /// Whether `reads`, made in the snapshot of `commit` (the other roots pinned there at
  /// their latest versions), are a state that existed: they read the roots the state
  /// delivered last read, each other root still at its version there, and the commit
  /// later than that state's. That state held at some instant; each other root kept
  /// its version from then until it was pinned, and the commit came in between, so
  /// they all held together just after it. O(n) in the roots read.
  @inlinable func extendsDelivered(_ reads: Reads, _ commit: Snapshot.Pin) -> Bool {
    hub.storage.withLock { _ in
      guard reads.readsSameRoots(as: delivered) else { return false }
      var found = false
      for index in reads.entries.indices {
        let (read, last) = (reads.entries[index], delivered.entries[index])
        if read.identity == commit.identity {
          guard read.version > last.version else { return false }
          found = true
        } else if read.version != last.version {
          return false
        }
      }
      return found
    }
  }

  /// Runs the node on the latest consistent state of its roots.
  ///
  /// - Parameters:
  ///   - reused: A snapshot to evaluate in (see ``Snapshot/consistent(reusing:as:_:)``);
  ///     nil to take the thread's spare.
  ///   - inPass: Called by a root's delivery (see `Hub.proceed`); false for an arriving
  ///     observer, which may be made inside a handler, and for the end of a transaction.
  ///   - relinking: Links the node to what it read even if the state is not later.
  @inlinable func refresh(reusing reused: Snapshot? = nil, inPass: Bool = false, relinking: Bool = false) {
    // Inside a transaction that wrote one of the roots (an observer arriving there), this
    // thread sees a state other threads do not: the node takes the state they see, and
    // the transaction's end runs it again on the whole state.
    let (value, reads) = latest(reusing: reused, as: .calling)
    if Self.isInTransaction, readsOwnTransaction(reads) {
      return refreshAsOutsider(inPass: inPass, relinking: relinking)
    }
    publish(value, reads, inPass: inPass, relinking: relinking)
  }

  /// ``refresh(reusing:inPass:relinking:)`` of the state other threads see, in a frame of
  /// its own.
  @inlinable @inline(never) func refreshAsOutsider(inPass: Bool, relinking: Bool) {
    let (value, reads) = latest(as: .outsider)
    publish(value, reads, inPass: inPass, relinking: relinking)
  }

  /// The value in a consistent snapshot taken as `reader`, and what it read.
  @inlinable func latest(reusing reused: Snapshot? = nil, as reader: Snapshot.Reader) -> (Value, Reads) {
    Snapshot.consistent(reusing: reused, as: reader) { evaluateRecording(in: $0) }
  }

  /// Commits `value`, the state `reads`, if it is later than the one delivered last; a
  /// state that reads other roots than the one delivered last relinks the node first,
  /// so that the roots no longer read drop this node before the state is delivered.
  @inlinable func publish(_ value: Value, _ reads: Reads, inPass: Bool, relinking: Bool = false) {
    var token = hub.lockForCommit()
    guard reads.isLater(than: delivered) || Self.plantedDeliversStaleState else {
      guard relinking else { return token.unlock() }
      // The state delivered last is at least as late: follow what it read.
      let (current, number) = (delivered, commits)
      token.unlock()
      return relink(to: current, at: 2 &* number)
    }
    guard relinking || !reads.readsSameRoots(as: delivered) else {
      delivered = reads
      commits &+= 1
      return commitState(token, value, inPass: inPass)
    }
    // A switch: the roots no longer read are dropped before the state is delivered.
    let ahead = 2 &* (commits &+ 1) &- 1
    token.unlock()
    relink(to: reads, at: ahead)
    token = hub.lockForCommit()
    guard reads.isLater(than: delivered) else { return token.unlock() }
    delivered = reads
    commits &+= 1
    let number = 2 &* commits
    commitState(token, value, inPass: inPass)
    relink(to: reads, at: number)
  }

  /// Whether the calling thread runs a transaction that wrote one of the roots of `reads`.
  @inlinable func readsOwnTransaction(_ reads: Reads) -> Bool {
    guard let transaction = DeliveringThread.existing?.pointee.transaction else { return false }
    return reads.identities.contains { transaction.written.contains($0) }
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
  /// delivery cannot wait inside it.
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
  /// own writes: it is the node's deliverer, and the commit it delivers now is one it
  /// made. Then its next state queues, so that it sees every state it wrote.
  @inlinable static func waitsForOwnWrites(_ queue: borrowing DeliveryQueue<Update<Value>>) -> Bool {
    guard let thread = DeliveringThread.existing, queue.deliverer == UInt(bitPattern: thread) else { return false }
    return !thread.pointee.deliversOthersCommit
  }

  /// ``commitState(_:_:inPass:)`` while earlier states wait for another thread: replaces
  /// the newest waiting update for every observer, if that is what waits last.
  @inlinable @inline(never)
  func coalesce(_ token: consuming Hub<Update<Value>, Value>.Token, _ value: Value) {
    let state = token.state
    let core = state.pointee.core.unsafelyUnwrapped
    let index = core.pointee.queue.pending.count - 1
    // Not when `value` equals the stored value (nothing to commit), nor when a
    // subscription was added since that update was committed (its old value is older
    // than the subscription).
    guard let last = core.pointee.queue.pending[index], case .all(let waiting) = last.recipients,
      !(isDuplicate.map { $0(state.pointee.stored, value) } ?? false),
      let recipients = state.pointee.recipientsOfCommit(), Self.adds(nothing: recipients, to: waiting)
    else {
      if !hub.change(token, to: value, isDuplicate: isDuplicate) { hub.scanForDeadOwners() }
      return
    }
    if let isDuplicate, isDuplicate(last.message.old, value) {
      // Back to the value the waiting update starts from: that update is withdrawn
      // (merged, it would change nothing), unless a thread waits for its turn by it.
      guard core.pointee.queue.heirs == 0 else {
        if !hub.change(token, to: value, isDuplicate: isDuplicate) { hub.scanForDeadOwners() }
        return
      }
      let withdrawn = core.pointee.queue.pending.removeLast()
      core.pointee.queue.queued &-= 1
      HubState.countCommit(state)
      let old = Hub<Update<Value>, Value>.replace(&state.pointee.stored, with: value)
      token.unlock()
      withExtendedLifetime((old, withdrawn)) {}  // released after unlocking
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

  /// Whether every subscription of `recipients` is one of `waiting` too.
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

extension DerivedProperty {
  @inlinable static var plantedUsesDeliveredValue: Bool {
    #if FaultInjection
      Planted.derivedUsesDeliveredValue
    #else
      false
    #endif
  }

  @inlinable static var plantedDeliversStaleState: Bool {
    #if FaultInjection
      Planted.derivedDeliversStaleState
    #else
      false
    #endif
  }
}
