// The node behind a derived property.
//
// A node has a hub of its own, exactly like a `Property`'s: its stored value is the
// derived value as last delivered, and its observers subscribe to it with the usual
// replay. There are two kinds.
//
// A computed node (`map`, `combineLatest`, an array's `readOnly`) knows its roots, the
// properties and arrays it ultimately reads, each once however many paths lead to it,
// and how to compute its value from a consistent snapshot of them (Snapshot.swift).
// It subscribes to each root directly, never to the nodes in between. When a root
// commits, the node takes a consistent snapshot of all its roots, computes its value
// from it, and commits it to its own hub only if that state is later than the one it
// delivered last (by the roots' versions): so an observer sees only states that
// existed, one commit reaches it at most once whatever the paths (a diamond, a
// self-combination, a chain), and states only move forward. The last value computed
// and its versions are kept (the memo): a transform runs once per change of its
// inputs, and reading an unchanged value costs a version check per root.
//
// A following node (`flatMapLatest`) subscribes to its outer source and to its
// current target, and commits each update it receives; seen from nodes built on it,
// it is a root of its own (its hub's value and version).
//
// Reading `value` never uses a delivery: a computed node reads its roots' latest
// committed values (or its memo, when they have not moved), so a thread reads its own
// writes through any chain without waiting.
//
// How a computed node reads its value: DerivedProperty+Evaluate.swift. How it commits:
// DerivedProperty+Commit.swift. How a node links to its sources, and how it follows a
// `flatMapLatest` target: DerivedProperty+Links.swift.

import Synchronization

/// The engine of one derived property.
@usableFromInline
final class DerivedProperty<Value: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: `delivered` and `followed` are guarded by the lock of this node's own `hub`
  // (touched only under `hub.storage`'s lock, or between `hub.lockForCommit()` and the
  // commit that unlocks); `memo` and `links` are guarded by their own locks;
  // `generation` and `observation` are atomic. `directLink` and `catchingUp` are written once, before the
  // node is shared; `body` and `upstream` are written after that only by the node's own
  // deinit (``detachForTeardown()``), when nothing else can reach it. Everything else
  // is immutable.
  /// The last computed value and the versions it was computed from. Made once, then
  /// updated in place; read and written only under the `memo` lock, which holds the
  /// only reference (so it needs no `Sendable` conformance of its own). A class, so
  /// that a large value is not copied to the stack on its way in and out of the lock.
  @usableFromInline final class Memo {
    @usableFromInline @exclusivity(unchecked) var versions: Versions
    @usableFromInline @exclusivity(unchecked) var value: Value

    @usableFromInline init(_ versions: Versions, _ value: Value) {
      self.versions = versions
      self.value = value
    }

    /// The value, if it was computed from `versions`.
    @inlinable func value(at versions: Versions) -> Value? {
      self.versions == versions ? value : nil
    }

    /// Takes `value` and its `versions` if they are a later state than the memo's;
    /// `value` is left holding the value replaced (released by the caller after
    /// unlocking).
    @inlinable func update(_ versions: Versions, _ value: inout Value?) {
      guard versions.isLater(than: self.versions) else { return }
      self.versions.assign(versions)
      swap(&self.value, &value!)
    }
  }

  /// The derived value as last delivered, and the observers.
  @usableFromInline let hub: Hub<Update<Value>, Value>
  @usableFromInline let isDuplicate: (@Sendable (Value, Value) -> Bool)?
  /// A computed node's roots, each once; empty for a following node.
  @usableFromInline let roots: [any Root]
  /// The identities of `roots`, in the same order.
  @usableFromInline let identities: [ObjectIdentifier]
  /// The root, if there is exactly one: read without the array (and without retaining
  /// it: `roots` keeps it).
  @usableFromInline unowned(unsafe) let singleRoot: (any Root)?
  /// The one root's version word, if it has one (``Root/versionWord``): ``value`` loads
  /// it without locking or retaining the root.
  @usableFromInline let singleVersionWord: UnsafePointer<Atomic<UInt64>>?
  /// A computed node's value in a snapshot of its roots; keeps its sources alive.
  /// Set to nil only by the teardown of a chain (``detachForTeardown()``).
  @usableFromInline @exclusivity(unchecked) var body: (@Sendable (Snapshot) -> Value)?
  /// A computed node's response to a commit of one of its roots: ``refresh(commit:reusing:inPass:)``.
  @usableFromInline let onCommit: (@Sendable (AnyObject, Snapshot) -> Void)?
  /// ``keepsLinks()``, made in code specialized for `Value` (it runs before every
  /// delivery of a root's commit).
  @usableFromInline let checkLinks: (@Sendable (DerivedProperty<Value>) -> Bool)?
  /// ``refresh(commit:reusing:inPass:)`` of the latest state, made in code specialized for
  /// `Value`, for the callers that reach the node through a protocol (the end of a
  /// transaction, an arriving observer).
  @usableFromInline let refreshing: (@Sendable (DerivedProperty<Value>) -> Void)?
  /// A following node's value from its sources' latest values; keeps them alive.
  @usableFromInline let compute: (@Sendable () -> Value)?
  /// A computed node's last computed value and the versions it was computed from.
  @usableFromInline let memo = Lock<Memo?>.make(nil)
  /// The first root's version in `memo`, stored with each change of it under its lock:
  /// a direct map's delivery loads it to learn, without the lock, whether the memo
  /// holds the commit it delivers (``commitMemoized(version:)``).
  @usableFromInline let memoFirstVersion = Atomic<UInt64>(0)
  /// The versions of the state last committed to the hub. Guarded by the hub's lock.
  @usableFromInline @exclusivity(unchecked) var delivered = Versions([])
  /// The first root's version in `delivered`, stored with each change of it under the
  /// hub's lock: reads load it to learn, without the lock, that the state last delivered
  /// is not the one they look for (``value``, ``evaluate(in:)``).
  @usableFromInline let deliveredFirstVersion = Atomic<UInt64>(0)
  /// A following node's state last committed to the hub (nil before its first
  /// commit). Guarded by the hub's lock.
  @usableFromInline @exclusivity(unchecked) var followed: FollowedState?
  /// A following node's ``catchUp(outer:roots:select:wrap:)``, made in code
  /// specialized for its types. Set once, right after initialization, before the node
  /// is shared.
  @usableFromInline @exclusivity(unchecked) var catchingUp: (@Sendable (DerivedProperty<Value>) -> Void)?
  /// The node's own subscriptions to its sources.
  @usableFromInline let links = Lock.make(LinkState())
  /// `flatMapLatest` only: the number of the current target.
  @usableFromInline let generation = Atomic<UInt>(0)
  /// The computed nodes whose values `body` reads directly.
  /// Emptied only by the teardown of a chain (``detachForTeardown()``).
  @usableFromInline @exclusivity(unchecked) var upstream: [any EvaluatedNode]
  /// The length of the longest chain of computed nodes from a root to this one.
  @usableFromInline let height: Int
  /// Observation's view of this value (see ObservationSite.swift).
  @usableFromInline let observation = ObservationSlot()
  /// A map of one property: subscribes the node to the property with a handler that
  /// computes each commit's value directly, without a snapshot (``commitDirect(_:version:)``).
  /// Set once, right after initialization, before the node is shared.
  @usableFromInline @exclusivity(unchecked) var directLink: (@Sendable (DerivedProperty<Value>) -> SubscriptionCore)?

  /// A computed node: its value is `body` applied to a consistent snapshot of `roots`.
  ///
  /// Inlinable, so that `onCommit`, which runs for every commit of a root, is made in
  /// code specialized for `Value`.
  @inlinable init(
    roots: [any Root], upstream: [any EvaluatedNode] = [], isDuplicate: (@Sendable (Value, Value) -> Bool)?,
    body: @escaping @Sendable (Snapshot) -> Value
  ) {
    // With one root, each commit is computed as it was committed, so that no state is
    // skipped; with several, from the latest state of all of them.
    let isSingle = roots.count == 1
    let identities = Self.identities(of: roots)
    onCommit = { node, commit in
      let node = unsafeDowncast(node, to: DerivedProperty<Value>.self)
      // The one root's own commit: computed from the commit itself (its memo, if the
      // state was computed already; `refresh` delivers it only if it is later).
      if (isSingle && !commit.commit.isPartial) || Self.plantedUsesDeliveredValue {
        return node.refresh(commit: commit, inPass: true)
      }
      // A commit that a state already delivered includes (a transaction's, refreshed
      // when it ended) needs no snapshot.
      let (identity, version) = (commit.commit.identity, commit.commit.version)
      if let index = identities.firstIndex(of: identity),
        node.hub.storage.withLock({ _ in node.delivered.version(at: index) >= version })
      {
        return commit.recycle()
      }
      // The latest state of all the roots, evaluated in the commit's snapshot (the
      // thread's spare is taken by it).
      node.refresh(reusing: commit, inPass: true)
    }
    checkLinks = { node in node.keepsLinksNow() }
    refreshing = { node in node.refresh() }
    // Made inside a transaction, the node starts from the state other threads see: the
    // state this thread sees may hold part of the transaction, which neither the
    // node's observers nor its memo may ever hold.
    let reader: Snapshot.Reader = Self.isInTransaction ? .outsider : .calling
    let (initial, versions) = Snapshot.consistent(of: roots, as: reader) { snapshot in
      _ = snapshot.versions(of: roots)
      return body(snapshot)
    }
    hub = Hub.make(initial, backlogLimit: roots.lazy.map(\.backlogLimit).min() ?? defaultBacklogLimit)
    self.isDuplicate = isDuplicate
    self.roots = roots
    self.identities = identities
    singleRoot = isSingle ? roots[0] : nil
    singleVersionWord = isSingle ? roots[0].versionWord : nil
    self.body = body
    compute = nil
    delivered = versions
    deliveredFirstVersion.store(versions.first, ordering: .releasing)
    self.upstream = upstream
    height = Self.height(above: upstream)
    let box = Memo(delivered, initial)
    memo.withLock { $0 = box }
    memoFirstVersion.store(versions.first, ordering: .releasing)
  }

  /// The identities of `roots`, in order.
  @usableFromInline static func identities(of roots: [any Root]) -> [ObjectIdentifier] {
    roots.map(\.identity)
  }

  /// The height of a node that reads `upstream` directly.
  @usableFromInline static func height(above upstream: [any EvaluatedNode]) -> Int {
    var highest = 0
    for node in upstream where node.height > highest { highest = node.height }
    return highest + 1
  }

  /// A following node, whose value is committed by its links (see ``follow(_:missing:wrap:)``);
  /// `backlogLimit` is its outer source's.
  @usableFromInline init(
    initial: Value, backlogLimit: Int, isDuplicate: (@Sendable (Value, Value) -> Bool)?,
    compute: @escaping @Sendable () -> Value
  ) {
    hub = Hub.make(initial, backlogLimit: backlogLimit)
    self.isDuplicate = isDuplicate
    upstream = []
    height = 1
    roots = []
    identities = []
    singleRoot = nil
    singleVersionWord = nil
    body = nil
    onCommit = nil
    checkLinks = nil
    refreshing = nil
    self.compute = compute
  }

  /// The roots a node built on this one reads: a computed node's, or this node's hub.
  @usableFromInline var rootsSeenFromAbove: [any Root] {
    body == nil ? [HubRoot(property: hub, countsCommits: false)] : roots
  }

  /// Commits the memo's value if it was computed from the commit with `version` of the
  /// one root (``commitDirect(_:version:)``): a value built on this one computed it
  /// first, in its own delivery of that commit. Out of line, so that a direct map's
  /// delivery keeps no room for the memo's value when it is not there.
  ///
  /// - Returns: Whether the memo held that commit's value.
  @inlinable @inline(never) func commitMemoized(version: UInt64) -> Bool {
    guard let value = memo.withLock({ $0?.versions.first == version ? $0.unsafelyUnwrapped.value : nil }) else {
      return false
    }
    commitDirect(value, version: version)
    return true
  }

  /// Whether the calling thread runs a transaction.
  @inlinable static var isInTransaction: Bool {
    transactionsBegun.load(ordering: .relaxed) && DeliveringThread.existing?.pointee.transaction != nil
  }

  deinit {
    let (cores, target) = links.withLock { state -> ([SubscriptionCore], (any Sendable)?) in
      var cores = state.sources
      if let inner = state.inner { cores.append(inner) }
      let target = state.target
      state = LinkState()
      return (cores, target)
    }
    for core in cores { core.endSwept() }
    _ = target
    guard !upstream.isEmpty else { return }
    // The nodes below are released one at a time by the outermost deinit of the
    // thread, not by each other's deinit in turn, so that freeing a chain of 5,000 maps
    // does not recurse 5,000 deep.
    var below = detachForTeardown()
    let thread = DeliveringThread.current
    if thread.pointee.isTearingDown { return thread.pointee.teardown.append(contentsOf: below) }
    thread.pointee.isTearingDown = true
    swap(&thread.pointee.teardown, &below)  // moved, so that no second array holds them
    while let node = thread.pointee.teardown.popLast() { _ = node }
    thread.pointee.isTearingDown = false
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
}
