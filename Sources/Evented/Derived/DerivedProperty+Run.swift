// The effect of an observed derived value: a run, made by a commit of a linked root,
// by an arriving observer or by the end of a transaction, evaluates the value (memo
// first) and commits it to the node's hub only if that state is later than the one
// delivered last (promises "Glitch-free", "Once per commit", "Ordered"), then links
// the node to the roots it read (a `flatMapLatest`'s switch).
//
// A commit that reaches a link is evaluated in a snapshot that pins only that commit:
// if the value reads nothing else, that is the state the commit made, delivered even
// while later commits wait (a thread's own writes, seen one by one); if it reads other
// roots too, the latest consistent state of all of them is taken instead. A `map` of a
// property needs no snapshot: the commit is its state, and its transform runs on the
// committed value (``publishMapped(_:)``).
//
// Bounded: a commit that reaches a link while a thread delivers the node's states
// (another thread, or this one further up its stack) only marks the node: one run
// waits in the hub's queue, and evaluates the newest state when the deliverer reaches
// it (``markRun(_:)``). The mark is the node's whole backlog.

import Synchronization

extension DerivedProperty {
  /// Runs the node for the commit of `snapshot`, the only root pinned there
  /// (``Snapshot/ofCommit(of:version:value:)``), which is recycled here.
  /// Runs in the root's delivery.
  @inlinable func refresh(commit snapshot: Snapshot) {
    // Each step in a frame of its own for a large value (Parcel.swift), so that the
    // value computed here is off the stack while the next step runs.
    if Self.isLarge ? publishCommitApart(snapshot) : publishCommit(snapshot) { return }
    if Self.isLarge { return refreshApart(reusing: snapshot) }
    refresh(reusing: snapshot, inPass: true)
  }

  /// Whether a value is large (Parcel.swift). A constant in specialized code.
  @inlinable static var isLarge: Bool { MemoryLayout<Value>.size > largeMessageSize }

  /// Publishes the state the commit of `snapshot` made, if the value reads nothing else
  /// or the other roots it reads are at their versions in the state delivered last;
  /// else the state it read, if every root it read is still at the version read (the
  /// commit is the latest of its root, and the others held with it at one instant:
  /// the latest consistent state, as a new snapshot would take).
  ///
  /// - Returns: false if that state may never have existed: then the snapshot is the
  ///   caller's still.
  @inlinable func publishCommit(_ snapshot: Snapshot) -> Bool {
    let (value, reads) = evaluateRecording(in: snapshot)
    guard
      snapshot.pins.count == 1 || Self.plantedUsesDeliveredValue || extendsDelivered(reads, snapshot.commit)
        || snapshot.isConsistent
    else {
      return false
    }
    // Returned to the thread before the node's observers, delivered below, run: so that
    // they find it spare when they read derived values.
    snapshot.recycle()
    publish(value, reads, inPass: true)
    return true
  }

  /// ``publishCommit(_:)`` of a `map` of a property, whose commit is the state, without
  /// a snapshot: the memo's value if the memo holds that commit, else the transform of
  /// the committed value, remembered as ``compute(in:)`` would. Runs in the property's
  /// delivery.
  @inlinable func publishMapped(_ commit: Snapshot.Pin) {
    let (identity, version) = (commit.identity, commit.version)
    var word: UInt = 0
    let found = memo.withLock { memo -> (Value, Reads)? in
      guard memo.reads.count == 1, memo.reads.entries[0].identity == identity, !memo.values.isEmpty else { return nil }
      guard memo.reads.entries[0].version == version else {
        word = memo.word
        return nil
      }
      return (memo.values[0], memo.reads)
    }
    if let found { return publish(found.0, found.1, inPass: true) }
    // Called through the optional, which binding or unwrapping would copy (a retain).
    guard let value = transformOfRoot?(commit.value) else { fatalError("Evented: a map without its transform") }
    // New reads, never the memo's earlier ones changed in place: other threads may have
    // read those outside every lock, and a reference count tells nothing about when.
    if word == 0 { word = UInt(bitPattern: commit.root.versionWord) }
    let reads = Reads(entries: [Reads.Read(root: commit.root, identity: identity, version: version, word: word)])
    if !Self.isInTransaction { rememberInPlace(value, reads, word) }
    publish(value, reads, inPass: true)
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
  ///     It marks the node instead of committing if a thread delivers its states now.
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
    // A root's commit while the node's states are being delivered marks the node
    // instead. An arriving observer commits the state it could read: the changes it
    // receives start there.
    if inPass, Self.isBusy(token) { return markRun(token) }
    let last = delivered
    guard reads.isLater(than: last) || Self.plantedDeliversStaleState else {
      guard relinking else { return token.unlock() }
      // The state delivered last is at least as late: follow what it read.
      let number = commits
      token.unlock()
      return relink(to: last, at: 2 &* number)
    }
    guard relinking || !reads.readsSameRoots(as: last) else {
      delivered = reads
      commits &+= 1
      commitState(token, value, inPass: inPass)
      // The reads replaced are released after unlocking: the last reference to a root
      // may be among them.
      return withExtendedLifetime(last) {}
    }
    // A switch: the roots no longer read are dropped before the state is delivered.
    let ahead = 2 &* (commits &+ 1) &- 1
    token.unlock()
    relink(to: reads, at: ahead, ending: true)
    token = hub.lockForCommit()
    guard reads.isLater(than: delivered) else {
      // A later state was delivered meanwhile, and the links may have been changed for
      // this one: follow what that state read.
      let (later, number) = (delivered, commits)
      token.unlock()
      return relink(to: later, at: 2 &* number)
    }
    let replaced = delivered
    delivered = reads
    commits &+= 1
    let number = 2 &* commits
    commitState(token, value, inPass: inPass)
    withExtendedLifetime(replaced) {}
    relink(to: reads, at: number)
  }

  /// Whether the calling thread runs a transaction that wrote one of the roots of `reads`.
  @inlinable func readsOwnTransaction(_ reads: Reads) -> Bool {
    guard let transaction = DeliveringThread.existing?.pointee.transaction else { return false }
    return reads.entries.contains { transaction.written.contains($0.identity) }
  }

  /// Commits `value` as the node's new state; takes over the caller's lock of the hub.
  ///
  /// A queue observer (`.queue`, `.main`) that holds the backlog limit of submissions
  /// makes the committing thread wait for room, like a property's writer, but after its
  /// delivery frame ends (``Hub/waitForOwedRoom()``), since a commit made by a root's
  /// delivery cannot wait inside it.
  @inlinable func commitState(_ token: consuming Hub<Update<Value>, Value>.Token, _ value: Value, inPass: Bool) {
    let owesRoom = token.state.pointee.core?.pointee.pressure?.isFull == true
    if !hub.change(token, to: value, isDuplicate: isDuplicate, inPass: inPass, isSource: false) {
      hub.scanForDeadOwners()
    }
    if owesRoom { DeliveringThread.owe(hub.storage) }
  }

  /// Whether a thread delivers the node's states now (this one, further up its stack or
  /// postponed, or another): then a root's commit only marks the node (``markRun(_:)``).
  @inlinable static func isBusy(_ token: borrowing Hub<Update<Value>, Value>.Token) -> Bool {
    token.state.pointee.core?.pointee.queue.isDelivering == true
  }

  /// The dirty mark, the node's whole backlog: queues a run behind the states its
  /// deliverer has still to deliver, unless one waits already. The run evaluates the
  /// newest state when the deliverer reaches it (``runMarked()``), so however fast the
  /// roots change and however slow the observers are, at most one run and the states
  /// already committed wait. Takes over the caller's lock.
  @inlinable @inline(never) func markRun(_ token: consuming Hub<Update<Value>, Value>.Token) {
    if isMarked { return token.unlock() }
    isMarked = true
    let entry = runner ?? makeRunner()
    hub.commit(token, to: .one(entry)) { stored in Update(old: stored, new: stored, isInitial: false) }
  }

  /// The entry that runs the node when its deliverer reaches a mark. Under the hub's lock.
  @inlinable func makeRunner() -> Entry<Update<Value>> {
    let entry = HandleEntry<Update<Value>>(target: nil) { [weak self] _ in self?.runMarked() }
    runner = entry
    return entry
  }

  /// Runs the node on the newest state, on its deliverer, which reached the mark: the
  /// state is queued behind the mark and delivered next.
  @inlinable func runMarked() {
    hub.storage.withLock { _ in isMarked = false }
    refresh()
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
