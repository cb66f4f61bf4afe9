// How a computed node reads its value (promise "Always current, never torn", and
// "Memoized"): from its memo when no root moved since it was computed, else from a
// consistent snapshot of its roots (Snapshot.swift), remembering the result. Each step
// keeps its temporaries in a frame of its own, out of line for a value over 1 KB, so
// that a chain of maps of a 64 KB value runs on a 1 MB stack (Guarantees.md, "Large
// values").

import Synchronization

extension DerivedProperty {
  /// The value now: for a computed node, from its memo if no root moved since, else
  /// from a consistent snapshot; for a following node, from its sources.
  @inlinable var value: Value {
    guard body != nil else { return compute.unsafelyUnwrapped() }
    // One optional in this frame, unwrapped without a second copy: a large value keeps
    // few copies on the stack while the evaluation below runs.
    let known = roots.count == 1 ? knownValue(version: singleVersion) : knownValue(now: ())
    if known != nil { return known.unsafelyUnwrapped }
    return Snapshot.consistent(of: roots) { evaluate(in: $0) }.0
  }

  /// The value of a one-root node at the root's `version`, if the memo or the state
  /// delivered last holds it: the root's version against each one's word, then under
  /// its lock. The memo's value is copied under its lock (the box is not retained).
  @inlinable @inline(__always) func knownValue(version: UInt64) -> Value? {
    if memoFirstVersion.load(ordering: .acquiring) == version {
      let value = memo.withLock({ $0?.versions.first == version ? $0.unsafelyUnwrapped.value : nil })
      if value != nil { return value }
    }
    guard deliveredFirstVersion.load(ordering: .acquiring) == version else { return nil }
    return hub.storage.withLock({ delivered.first == version ? $0.stored : nil })
  }

  /// The value of a node of several roots now, if the memo holds it: if each root had
  /// the memo's version when read, the memo's state is current, and consistent (it held
  /// when the memo was computed).
  @inlinable @inline(__always) func knownValue(now _: Void) -> Value? {
    let versions = Versions(of: roots, { $0.versionNow })
    return memo.withLock({ $0?.value(at: versions) })
  }

  /// The one root's version now, as ``Root/versionNow`` reads it, from the word kept here
  /// (no call through `Root`, no retain of the root).
  @inlinable var singleVersion: UInt64 {
    unlockedVersion(singleVersionWord) ?? singleRoot.unsafelyUnwrapped.version(for: .calling)
  }

  /// A computed node's value in `snapshot`: the memo if its versions are the
  /// snapshot's, else `body`, remembered for the next read.
  @inlinable func evaluate(in snapshot: Snapshot) -> Value {
    guard let body else { return snapshot.read(hub) }
    if snapshot.computed != nil, let value = snapshot.computed?[ObjectIdentifier(self)] { return unbox(value) }
    let versions = snapshot.versions(of: roots, identities: identities)
    // The words stored with the memo and with the state delivered last tell, without
    // their locks, when neither can hold this state: the common case, a commit's
    // evaluation, goes to the body without keeping room for a value found there.
    let mayBeKnown =
      memoFirstVersion.load(ordering: .acquiring) == versions.first
      || (directLink != nil && deliveredFirstVersion.load(ordering: .acquiring) == versions.first)
    if Self.isLarge {
      if mayBeKnown { return knownValueApart(at: versions, orBody: body, in: snapshot) }
      return computeValueApart(body, in: snapshot, at: versions)
    }
    return mayBeKnown
      ? knownValue(at: versions, orBody: body, in: snapshot) : computeValue(body, in: snapshot, at: versions)
  }

  /// Whether a value is large (Parcel.swift): then each step of an evaluation and of a
  /// commit keeps its temporaries in a frame of its own, off the stack while the next
  /// step runs, so that a chain keeps few copies of the value at once. A constant in
  /// specialized code.
  @inlinable static var isLarge: Bool { MemoryLayout<Value>.size > largeMessageSize }

  /// ``knownValue(at:orBody:in:)`` in a frame of its own (``isLarge``).
  @inlinable @inline(never) func knownValueApart(
    at versions: Versions, orBody body: @Sendable (Snapshot) -> Value, in snapshot: Snapshot
  ) -> Value {
    knownValue(at: versions, orBody: body, in: snapshot)
  }

  /// ``computeValue(_:in:at:)`` in a frame of its own (``isLarge``).
  @inlinable @inline(never) func computeValueApart(
    _ body: @Sendable (Snapshot) -> Value, in snapshot: Snapshot, at versions: Versions
  ) -> Value {
    computeValue(body, in: snapshot, at: versions)
  }

  /// ``knownValue(at:)``, or else ``computeValue(_:in:at:)``.
  @inlinable @inline(__always) func knownValue(
    at versions: Versions, orBody body: @Sendable (Snapshot) -> Value, in snapshot: Snapshot
  ) -> Value {
    let known = knownValue(at: versions)
    if known != nil { return known.unsafelyUnwrapped }
    return computeValue(body, in: snapshot, at: versions)
  }

  /// `body`'s value in `snapshot`, whose versions of the roots are `versions`,
  /// remembered if the state is consistent.
  @inlinable @inline(__always)
  func computeValue(_ body: @Sendable (Snapshot) -> Value, in snapshot: Snapshot, at versions: Versions) -> Value {
    if height > Snapshot.deepChain, snapshot.computed == nil { snapshot.evaluateUpstream(of: self) }
    let value = body(snapshot)
    // Only a consistent state is remembered: an evaluation whose roots moved between
    // two pins is retried by its caller, and its versions, which never held together,
    // must not be found by a later read. Nor one made inside a transaction: it sees the
    // transaction's writes, which other threads do not see yet, so its versions may
    // pair a root's earlier version with another's later one, a state that never held
    // for them (one thread reading the first root before the transaction ends and the
    // second after would find it).
    if snapshot.isConsistent, !Self.isInTransaction {
      if Self.isLarge { rememberApart(value, at: versions) } else { remember(value, at: versions) }
    }
    return value
  }

  /// ``remember(_:at:)`` in a frame of its own (``isLarge``).
  @inlinable @inline(never) func rememberApart(_ value: Value, at versions: Versions) {
    remember(value, at: versions)
  }

  /// The value in the state `versions`, if the memo holds it, or the state a direct map
  /// delivered last: the words stored with each tell, without its lock, when it cannot
  /// (the common case, a commit's evaluation). Apart from ``evaluate(in:)``, so that
  /// its temporaries are off the stack while the body runs.
  @inlinable @inline(__always) func knownValue(at versions: Versions) -> Value? {
    if memoFirstVersion.load(ordering: .acquiring) == versions.first {
      let value = memo.withLock({ $0?.value(at: versions) })
      if value != nil { return value }
    }
    // A direct map's latest commit, which did not update the memo.
    guard directLink != nil, deliveredFirstVersion.load(ordering: .acquiring) == versions.first else { return nil }
    return hub.storage.withLock({ delivered == versions ? $0.stored : nil })
  }

  /// Keeps `value`, computed from the consistent state `versions`, in the memo if that
  /// state is later than the memo's.
  @inlinable @inline(__always) func remember(_ value: Value, at versions: Versions) {
    var kept: Value? = value
    memo.withLock { memo in
      defer { memoFirstVersion.store(memo.unsafelyUnwrapped.versions.first, ordering: .releasing) }
      guard memo != nil else {
        memo = Memo(versions, kept.take().unsafelyUnwrapped)
        return
      }
      memo.unsafelyUnwrapped.update(versions, &kept)
    }
    _ = kept  // the value replaced, released after unlocking
  }
}

/// A computed node, seen by the evaluation of a deep chain (Snapshot.swift).
@usableFromInline
protocol EvaluatedNode: AnyObject, Sendable {
  /// The computed nodes whose values this node's body reads directly.
  var upstream: [any EvaluatedNode] { get }
  /// The length of the longest chain of computed nodes from a root to this one.
  var height: Int { get }
  /// Evaluates the node in `snapshot` and keeps the value in the snapshot.
  func evaluateIntoSnapshot(_ snapshot: Snapshot)
  /// Drops the references to the nodes below (in `upstream` and in the body's
  /// captures) and returns them: for a node being freed, whose body never runs again.
  func detachForTeardown() -> [any EvaluatedNode]
}

extension DerivedProperty: EvaluatedNode {
  @usableFromInline func detachForTeardown() -> [any EvaluatedNode] {
    let below = upstream
    upstream = []
    body = nil
    return below
  }

  @usableFromInline func evaluateIntoSnapshot(_ snapshot: Snapshot) {
    let value = evaluate(in: snapshot)
    snapshot.computed?[ObjectIdentifier(self)] = value
  }
}
