// The node behind a derived property: a computed value and, while observed, its effect.
//
// Computed value: a pure `body` of a snapshot (Snapshot.swift), memoized with the roots
// it read and their versions (`Reads`, recorded as it pins them: dynamic dependencies).
// `map`, `combineLatest`, an array's `readOnly` and `flatMapLatest` are all computed
// values; a `flatMapLatest` reads its outer source and then the target it picks, in
// one snapshot, so values built on it read through it. Reading `value` returns the
// memo if every root it read is still at the version read, else evaluates a
// consistent snapshot; it never waits for a delivery.
//
// Effect: the node's hub holds the state last delivered and the observers, with the
// usual replay. While it has observers, the node is linked to the roots its last
// evaluation read (a subscription on each root's hub). A root's commit reaches the
// link, which runs the node: it evaluates (memo first), commits the value to the hub
// if that state is later than the one delivered last, then links to the roots it
// read that it did not, and ends the links to those it no longer reads: that is all a
// switch of a `flatMapLatest` is (DerivedProperty+Run.swift).

import Synchronization

/// The engine of one derived property.
@usableFromInline
final class DerivedProperty<Value: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: `delivered`, `commits`, `isMarked` and `runner` are guarded by the lock of this node's
  // own `hub` (touched only under `hub.storage`'s lock, or between `hub.lockForCommit()`
  // and the commit that unlocks); `memo` and `links` are guarded by their own locks.
  // `bodyOwner` and `sources` are written after initialization only by the node's own
  // deinit (``detachForTeardown()``), when nothing else can reach it. Everything else
  // is immutable.

  /// The last value computed from a consistent state, and its reads. Changed in place
  /// under its lock, so that remembering a small value allocates nothing.
  @usableFromInline struct Memo: Sendable {
    @usableFromInline var reads = Reads()
    /// The value, once one is known (a node made inside a transaction starts with none):
    /// one element. A small value is copied out under the lock and replaced in place; a
    /// large one (Parcel.swift) is replaced with a new array, and readers copy it out of
    /// the array they took after unlocking, so that it reaches their stack once.
    @usableFromInline var values: [Value] = []
    /// The version word of the one root read, if there is one and it has a word: a read
    /// checks it without a call through `Root` (``Root/versionWord``), as an address so
    /// that the memo stays `Sendable`; valid while the root lives, which `reads` keeps.
    @usableFromInline var word: UInt = 0

    @inlinable init() {}

    /// Whether the value was computed from one root that is still at the version read,
    /// as a load of the root's version word tells without a lock; false if that cannot
    /// tell.
    @inlinable var isCurrentOfOneRoot: Bool {
      guard word != 0, let version = unlockedVersion(UnsafePointer(bitPattern: word)) else { return false }
      return version == reads.entries[0].version
    }

    /// Whether the memo holds the state `reads`: the same array, since a memo's reads are
    /// replaced, never changed in place, and the caller's copy keeps them alive.
    @inlinable func holds(_ reads: Reads) -> Bool {
      self.reads.entries.withUnsafeBufferPointer { mine in
        reads.entries.withUnsafeBufferPointer { mine.baseAddress == $0.baseAddress }
      }
    }
  }

  /// The derived value as last delivered, and the observers.
  @usableFromInline let hub: Hub<Update<Value>, Value>
  @usableFromInline let isDuplicate: (@Sendable (Value, Value) -> Bool)?
  /// The value in a snapshot of the roots (``Body``); keeps its sources alive. Set to
  /// nil only by the teardown of a chain (``detachForTeardown()``), which frees what the
  /// body holds.
  @usableFromInline @exclusivity(unchecked) var bodyOwner: Body?
  /// ``bodyOwner``, called without a retain (a call through the `var` would retain the
  /// closure): valid while the node is not being freed, the only time a body runs.
  @usableFromInline let body: Unmanaged<Body>
  /// For a `map` of a property: the transform of the property's value, which a commit of
  /// the property runs without a snapshot (``publishMapped(_:)``).
  @usableFromInline let transformOfRoot: (@Sendable (any Sendable) -> Value)?
  /// The response to a commit of a linked root: ``refresh(commit:)``, made in code
  /// specialized for `Value`.
  @usableFromInline let onCommit: @Sendable (AnyObject, Snapshot) -> Void
  /// ``publishMapped(_:)``, made in code specialized for `Value`, for a `map` of a
  /// property (with ``transformOfRoot``).
  @usableFromInline let onMappedCommit: (@Sendable (AnyObject, Snapshot.Pin) -> Void)?
  /// ``keepsLinksNow()``, made in code specialized for `Value`.
  @usableFromInline let checkLinks: @Sendable (DerivedProperty<Value>) -> Bool
  /// ``hasDelivered(_:at:)`` of a node given as an object, made in code specialized for
  /// `Value`: a link runs it for every commit of a transaction.
  @usableFromInline let checkDelivered: @Sendable (AnyObject, ObjectIdentifier, UInt64) -> Bool
  /// The steps of a deep chain's evaluation from the roots up (``isMemoized(in:)``,
  /// then ``computeIntoMemo(_:)``: `true` computes), made in code specialized for
  /// `Value`: called through the protocol, they would run unspecialized, looking up
  /// the memo's generic metadata at every node.
  @usableFromInline let upstreamStep: @Sendable (DerivedProperty<Value>, Snapshot, Bool) -> Bool
  /// ``refresh(reusing:inPass:relinking:)`` of the latest state, made in code
  /// specialized for `Value`, for the callers that reach the node through a protocol
  /// (an arriving observer, the end of a transaction).
  @usableFromInline let refreshing: @Sendable (DerivedProperty<Value>) -> Void
  /// The last value computed from a consistent state, and its reads.
  @usableFromInline let memo = Lock.make(Memo())
  /// The reads of the state last committed to the hub. Guarded by the hub's lock.
  @usableFromInline @exclusivity(unchecked) var delivered: Reads
  /// The number of states committed to the hub. Guarded by the hub's lock.
  @usableFromInline @exclusivity(unchecked) var commits: UInt64 = 0
  /// Whether a run waits in the hub's queue (the dirty mark). Guarded by the hub's lock.
  @usableFromInline @exclusivity(unchecked) var isMarked = false
  /// The entry that runs the node when its deliverer reaches the mark; made at the
  /// first mark. Guarded by the hub's lock.
  @usableFromInline @exclusivity(unchecked) var runner: Entry<Update<Value>>?
  /// The links to the roots, while observed.
  @usableFromInline let links = Lock.make(EffectState())
  /// The computed nodes whose values `body` reads directly, known when the node is made.
  /// Emptied only by the teardown of a chain (``detachForTeardown()``).
  @usableFromInline @exclusivity(unchecked) var sources: [any EvaluatedNode]
  /// A `flatMapLatest`'s current target.
  @usableFromInline let keeper: TargetKeeper?
  /// The length of the longest chain of computed nodes from a root to this one.
  @usableFromInline let height: Int
  /// Whether every evaluation reads the same roots: no `flatMapLatest` here or below.
  @usableFromInline let readsFixedRoots: Bool
  /// Observation's view of this value (see ObservationSite.swift).
  @usableFromInline let observation = ObservationSlot()

  /// A node whose value is `body` applied to a consistent snapshot of its roots.
  ///
  /// Inlinable, so that `onCommit`, which runs for every commit of a root, is made in
  /// code specialized for `Value`.
  @inlinable init(
    upstream: [any EvaluatedNode] = [], keeper: TargetKeeper? = nil, isDuplicate: (@Sendable (Value, Value) -> Bool)?,
    transformOfRoot: (@Sendable (any Sendable) -> Value)? = nil, body: @escaping @Sendable (Snapshot) -> Value
  ) {
    onCommit = { node, commit in unsafeDowncast(node, to: DerivedProperty<Value>.self).refresh(commit: commit) }
    if transformOfRoot == nil || Self.isLarge {
      onMappedCommit = nil
    } else {
      onMappedCommit = { node, commit in unsafeDowncast(node, to: DerivedProperty<Value>.self).publishMapped(commit) }
    }
    checkLinks = { node in node.keepsLinksNow() }
    checkDelivered = { node, identity, version in
      unsafeDowncast(node, to: DerivedProperty<Value>.self).hasDelivered(identity, at: version)
    }
    refreshing = { node in node.refresh() }
    upstreamStep = { node, snapshot, computes in
      if computes {
        _ = node.compute(in: snapshot)
        return true
      }
      if !snapshot.computed.isEmpty, snapshot.computed[ObjectIdentifier(node)] != nil { return true }
      return node.memoizedReads(in: snapshot) != nil
    }
    self.isDuplicate = isDuplicate
    sources = upstream
    self.keeper = keeper
    height = Self.height(above: upstream)
    readsFixedRoots = keeper == nil && upstream.allSatisfy(\.readsFixedRoots)
    let owner = Body(body)
    (bodyOwner, self.body) = (owner, Unmanaged.passUnretained(owner))
    self.transformOfRoot = Self.isLarge ? nil : transformOfRoot
    // Made inside a transaction, the node starts from the state other threads see: the
    // state this thread sees may hold part of the transaction, which neither the
    // node's observers nor its memo may ever hold.
    let inTransaction = Self.isInTransaction
    let (initial, reads) = Snapshot.consistent(as: inTransaction ? .outsider : .calling) { snapshot in
      let start = snapshot.openFrame()
      let value = body(snapshot)
      return (value, snapshot.closeFrame(start))
    }
    hub = Hub.make(initial, backlogLimit: reads.roots.lazy.map(\.backlogLimit).min() ?? defaultBacklogLimit)
    delivered = reads
    if !inTransaction { remember(initial, reads) }
  }

  /// The height of a node that reads `upstream` directly.
  @usableFromInline static func height(above upstream: [any EvaluatedNode]) -> Int {
    var highest = 0
    for node in upstream where node.height > highest { highest = node.height }
    return highest + 1
  }

  /// Whether the calling thread runs a transaction.
  @inlinable static var isInTransaction: Bool {
    transactionsBegun.load(ordering: .relaxed) && DeliveringThread.existing?.pointee.transaction != nil
  }

  /// The roots the node reads now, as its links or its memo know them.
  @usableFromInline var readRoots: [any Root] {
    let linked = links.withLock { $0.isLinked ? $0.linkedRoots : nil }
    return linked ?? memo.withLock { $0.reads.roots }
  }

  deinit {
    let cores = links.withLock { $0.unlink() }
    for core in cores { core.endSwept() }
    guard !sources.isEmpty || keeper != nil else { return }
    // The nodes below are released one at a time by the outermost deinit of the thread.
    DeliveringThread.tearDown(detachForTeardown().map { $0 as AnyObject })
  }
}

extension DerivedProperty {
  /// A node's body, in an object of its own, so that it is called through a `let`
  /// (``DerivedProperty/body``) and still freed by the teardown of a chain.
  @usableFromInline final class Body: Sendable {
    @usableFromInline let evaluate: @Sendable (Snapshot) -> Value

    @usableFromInline init(_ evaluate: @escaping @Sendable (Snapshot) -> Value) {
      self.evaluate = evaluate
    }
  }
}

/// A computed node, seen by the evaluation of a deep chain and by its teardown.
@usableFromInline
protocol EvaluatedNode: AnyObject, Sendable {
  /// The computed nodes whose values this node's body reads directly.
  var upstream: [any EvaluatedNode] { get }
  /// The length of the longest chain of computed nodes from a root to this one.
  var height: Int { get }
  /// Whether every evaluation reads the same roots: no `flatMapLatest` here or below.
  var readsFixedRoots: Bool { get }
  /// Computes the node in `snapshot`, whose memo was found not to hold its value there,
  /// leaving the value in its memo.
  func computeIntoMemo(_ snapshot: Snapshot)
  /// Whether the memo holds the value in `snapshot` (its reads then count as read).
  func isMemoized(in snapshot: Snapshot) -> Bool
  /// Drops the references to the nodes below (in `upstream` and in the body's
  /// captures) and returns them: for a node being freed, whose body never runs again.
  func detachForTeardown() -> [any EvaluatedNode]
}

extension DerivedProperty: EvaluatedNode {
  @usableFromInline var upstream: [any EvaluatedNode] {
    guard let target = keeper?.node else { return sources }
    return sources + [target]
  }

  @usableFromInline func detachForTeardown() -> [any EvaluatedNode] {
    var below = sources
    sources = []
    bodyOwner = nil
    if let target = keeper?.take() { below.append(target) }
    return below
  }

  @usableFromInline func computeIntoMemo(_ snapshot: Snapshot) {
    _ = upstreamStep(self, snapshot, true)
  }

  @usableFromInline func isMemoized(in snapshot: Snapshot) -> Bool {
    upstreamStep(self, snapshot, false)
  }
}
