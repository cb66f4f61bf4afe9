// How a computed value reads its value (promises "Always current, never torn" and
// "Memoized"): its memo when every root it read is still at the version read, else
// its body in a consistent snapshot (Snapshot.swift), remembered with what it read.
// A chain taller than `Snapshot.deepChain` is evaluated from the roots up, each node
// left in its memo, so that no body calls a body below it that is not memoized and the
// stack does not grow with the chain.

import Synchronization

extension DerivedProperty {
  /// The value now: the memo if no root it read moved since, else a consistent
  /// snapshot's.
  @inlinable var value: Value {
    // One root: its word, loaded under the memo's lock (no other lock taken there).
    let single = memoValue(where: { $0.isCurrentOfOneRoot })
    if single != nil { return single.unsafelyUnwrapped }
    if let reads = memo.withLock({ $0.values.isEmpty ? nil : $0.reads }), reads.areCurrent(for: .calling) {
      let found = memoValue(where: { $0.holds(reads) })
      if found != nil { return found.unsafelyUnwrapped }
    }
    return Snapshot.consistent { evaluate(in: $0) }
  }

  /// The value in `snapshot`: the memo if the snapshot holds the versions it read,
  /// else the body's, remembered for the next read if the state held.
  @inlinable func evaluate(in snapshot: Snapshot) -> Value {
    if !snapshot.computed.isEmpty, isComputed(in: snapshot) { return computedValue(in: snapshot) }
    if let reads = memoizedReads(in: snapshot) {
      let found = memoValue(where: { $0.holds(reads) })
      if found != nil { return found.unsafelyUnwrapped }
    }
    return compute(in: snapshot).0
  }

  /// ``evaluate(in:)`` at the top of a snapshot (no frame open), and what it read.
  @inlinable func evaluateRecording(in snapshot: Snapshot) -> (Value, Reads) {
    if !snapshot.computed.isEmpty, isComputed(in: snapshot) {
      return (computedValue(in: snapshot), computedReads(in: snapshot))
    }
    if let reads = memoizedReads(in: snapshot) {
      let found = memoValue(where: { $0.holds(reads) })
      if found != nil { return (found.unsafelyUnwrapped, reads) }
    }
    return compute(in: snapshot)
  }

  /// The memo's reads, if it holds a value and they are `snapshot`'s state. The value is
  /// taken afterwards, if the memo still holds that state, so that a large value is not
  /// copied for a state that does not match.
  @inlinable func memoizedReads(in snapshot: Snapshot) -> Reads? {
    var isKnown = false
    let reads = memo.withLock { memo -> Reads? in
      if memo.values.isEmpty {
        isKnown = true
        return nil
      }
      // Of one root pinned already: told here, and a miss copies nothing out (a retain).
      guard memo.reads.count == 1, let matched = snapshot.matchesPinned(memo.reads) else { return memo.reads }
      isKnown = true
      return matched ? memo.reads : nil
    }
    if isKnown { return reads }
    guard let reads, snapshot.matches(reads, pinningAll: readsFixedRoots) else { return nil }
    return reads
  }

  /// The memo's value, if there is one and `holds` is true of the memo: a small value
  /// copied out under the lock, a large one out of the array taken there, after
  /// unlocking (``Memo/values``).
  @inlinable func memoValue(where holds: (borrowing Memo) -> Bool) -> Value? {
    if !Self.isLarge { return memo.withLock { holds($0) ? $0.values.first : nil } }
    let values = memo.withLock { holds($0) ? $0.values : [] }
    return values.isEmpty ? nil : values[0]
  }

  /// The body's value in `snapshot`, and what it read, remembered for the next read if
  /// the state held.
  @inlinable func compute(in snapshot: Snapshot) -> (Value, Reads) {
    if height > Snapshot.deepChain || keeper != nil {
      if !snapshot.isEvaluatingUpstream {
        Self.evaluateUpstream(upstream, in: snapshot)
      } else if snapshot.meet(ObjectIdentifier(self)) {
        // A node that the pass running did not reach: the target a switch picked while
        // the pass computes. Its chain is evaluated from the roots up in turn.
        Self.passUpstream(upstream, in: snapshot)
      }
    }
    let start = snapshot.openFrame()
    let value = body._withUnsafeGuaranteedRef { $0.evaluate(snapshot) }
    let reads = snapshot.closeFrame(start)
    // Only a state that held is remembered: an evaluation whose roots moved between two
    // pins is retried by its caller, and its versions, which never held together, must
    // not be found by a later read. Nor one made inside a transaction: it sees the
    // transaction's writes, which other threads do not see yet; the snapshot keeps it,
    // so that one read evaluates each value once there too.
    if snapshot.held(reads) {
      if !Self.isInTransaction { remember(value, reads) } else { keepComputed(value, reads, in: snapshot) }
    }
    return (value, reads)
  }

  // Inside a transaction, where the memo keeps nothing, the values one snapshot computed
  // (``Snapshot/computed``). Each step is a function of its own, so that no frame on the
  // common path holds a value-sized local for it (Parcel.swift).

  /// Whether `snapshot` computed this value already; its reads then count as read by the
  /// open frames.
  @inlinable @inline(never) func isComputed(in snapshot: Snapshot) -> Bool {
    guard let reads = snapshot.computed[ObjectIdentifier(self)]?.reads else { return false }
    return snapshot.matches(reads)
  }

  /// The value `snapshot` computed (``isComputed(in:)``).
  @inlinable @inline(never) func computedValue(in snapshot: Snapshot) -> Value {
    unbox(snapshot.computed[ObjectIdentifier(self)].unsafelyUnwrapped.value)
  }

  /// What `snapshot` read to compute the value (``isComputed(in:)``).
  @inlinable @inline(never) func computedReads(in snapshot: Snapshot) -> Reads {
    snapshot.computed[ObjectIdentifier(self)].unsafelyUnwrapped.reads
  }

  /// Keeps `value`, computed from `reads`, in `snapshot`.
  @inlinable @inline(never) func keepComputed(_ value: Value, _ reads: Reads, in snapshot: Snapshot) {
    snapshot.computed[ObjectIdentifier(self)] = (value, reads)
  }

  /// Keeps `value`, computed from the state `reads`, in the memo, unless the memo holds
  /// a later state. What it replaces is released after unlocking.
  @inlinable func remember(_ value: Value, _ reads: Reads) {
    let word = reads.wordOfOneRoot
    if Self.isLarge { rememberApart(value, reads, word) } else { rememberInPlace(value, reads, word) }
  }

  /// ``remember(_:_:)`` of a small value, in place; the value replaced is released after
  /// unlocking (its deinit may run user code).
  @inlinable func rememberInPlace(_ value: Value, _ reads: Reads, _ word: UInt) {
    var (old, replaced) = (value, reads)
    memo.withLock { memo in
      guard memo.values.isEmpty || reads.isLater(than: memo.reads) else { return }
      swap(&memo.reads, &replaced)
      if memo.values.isEmpty { memo.values = [old] } else { swap(&memo.values[0], &old) }
      memo.word = word
    }
    withExtendedLifetime((old, replaced)) {}
  }

  /// ``remember(_:_:)`` of a large value, in a frame of its own, in a new array:
  /// readers copy a large value out of the array after unlocking.
  @inlinable func rememberApart(_ value: Value, _ reads: Reads, _ word: UInt) {
    var (values, replaced) = ([value], reads)
    memo.withLock { memo in
      guard memo.values.isEmpty || reads.isLater(than: memo.reads) else { return }
      swap(&memo.reads, &replaced)
      swap(&memo.values, &values)
      memo.word = word
    }
    withExtendedLifetime((values, replaced)) {}
  }

  /// Evaluates every computed node below `upstream`, from the roots up, each into its
  /// memo: then each body finds the values below it memoized, without recursion. A node
  /// whose memo holds its value in `snapshot` is not evaluated, nor what is below it, so
  /// that a run costs what changed (a chain whose top input was written checks the node
  /// below the top, not every node of the chain).
  @usableFromInline static func evaluateUpstream(_ upstream: [any EvaluatedNode], in snapshot: Snapshot) {
    snapshot.isEvaluatingUpstream = true
    defer {
      snapshot.isEvaluatingUpstream = false
      snapshot.forgetMet()
    }
    passUpstream(upstream, in: snapshot)
  }

  /// The pass of ``evaluateUpstream(_:in:)``, with the reads of the frames open set aside:
  /// what the pass pins or computes is not read by the evaluation that started it (its
  /// body reads what it reads next, from the memos).
  @usableFromInline static func passUpstream(_ upstream: [any EvaluatedNode], in snapshot: Snapshot) {
    let (frames, trail) = (snapshot.frames, snapshot.trail)
    if frames > 0 { (snapshot.frames, snapshot.trail) = (0, []) }
    defer { if frames > 0 { (snapshot.frames, snapshot.trail) = (frames, trail) } }
    // Post-order without recursion: a node comes after every node it reads.
    var order: [any EvaluatedNode] = []
    var stack: [(node: any EvaluatedNode, expanded: Bool)] = upstream.map { ($0, false) }
    while let (next, expanded) = stack.popLast() {
      if expanded {
        order.append(next)
        continue
      }
      guard snapshot.meet(ObjectIdentifier(next)), !next.isMemoized(in: snapshot) else { continue }
      stack.append((next, true))
      for below in next.upstream { stack.append((below, false)) }
    }
    for each in order { each.computeIntoMemo(snapshot) }
  }
}

extension Snapshot {
  /// Adds `identity` to the nodes the pass from the roots up met; false if it was
  /// there. A table, not a `Set`, whose hashing costs several times more.
  @inlinable func meet(_ identity: ObjectIdentifier) -> Bool {
    if (metSlots.count &+ 1) &* 2 > met.count { growMet() }
    return enterMet(UInt(bitPattern: identity))
  }

  /// Enters `key` in the table of met nodes, which has room; false if it was there.
  @inlinable func enterMet(_ key: UInt) -> Bool {
    let mask = met.count &- 1
    var slot = Int(
      truncatingIfNeeded: (UInt64(key) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 &- met.count.trailingZeroBitCount))
    while met[slot] != 0 {
      if met[slot] == key { return false }
      slot = (slot &+ 1) & mask
    }
    met[slot] = key
    metSlots.append(Int32(truncatingIfNeeded: slot))
    return true
  }

  /// Doubles the table of met nodes, entering them again.
  @usableFromInline func growMet() {
    let old = met
    met = .allocate(capacity: max(old.count * 2, 64))
    met.initialize(repeating: 0)
    metSlots.removeAll(keepingCapacity: true)
    for key in old where key != 0 { _ = enterMet(key) }
    old.deallocate()
  }

  /// Forgets the nodes met, for the next pass: empties the slots filled, or drops a
  /// table grown past 4,096 slots, so that one long chain leaves no cost or memory to
  /// the thread's later passes.
  @inlinable func forgetMet() {
    if met.count > 4096 {
      met.deallocate()
      met = UnsafeMutableBufferPointer(start: nil, count: 0)
      metSlots = []
      return
    }
    for slot in metSlots { met[Int(slot)] = 0 }
    metSlots.removeAll(keepingCapacity: true)
  }
}
