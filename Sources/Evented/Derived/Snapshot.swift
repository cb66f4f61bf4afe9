// Glitch freedom: a derived value is computed from one consistent state of its roots,
// the properties and arrays it ultimately reads.
//
// Every root's hub counts its committed changes (`HubState.version`). A `Snapshot` pins
// each root the first time an evaluation reads it: its value and version, read
// together under the root's lock. Every later read of that root in the same
// evaluation returns the pinned value, so the two sides of a diamond (`a.map(f)` and
// `a.map(g)` under one `combineLatest`) see the same `a`. With several roots, the pins
// are taken one after the other; the snapshot is consistent if no root's version moved
// by the time the last one was taken (then every pinned value held at that instant),
// and the evaluation is retried otherwise. One root is consistent by construction.
//
// Versions also order states: a root's version only grows, and two consistent states
// of the same roots are ordered component by component, so a derived value never
// delivers a state older than one it delivered (DerivedProperty.swift).

import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A source whose committed value derived values read: a property's hub, an array's, or
/// the hub of a derived value that follows others (`flatMapLatest`).
@usableFromInline
protocol Root: AnyObject, Sendable {
  /// The source's hub storage: two roots are the same root when this is the same.
  var identity: ObjectIdentifier { get }
  /// The version and the value now, read together under the source's lock.
  func pin() -> (version: UInt64, value: any Sendable)
  /// The version now.
  var version: UInt64 { get }
  /// Where the version can be loaded without the lock, if anywhere
  /// (``Hub/versionWord``); valid while the root lives.
  var versionWord: UnsafePointer<Atomic<UInt64>>? { get }
  /// Subscribes `refresh` to every commit of the source, with `node` as the owner;
  /// `refresh` receives a snapshot that pins only the commit, and recycles it
  /// (``Snapshot/ofCommit(of:version:value:isPartial:_:)``).
  func notify(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void
  ) -> SubscriptionCore
}

/// The root of a hub whose stored value is a property's value or an array.
@usableFromInline
final class HubRoot<Message: Sendable, Stored: Sendable>: Root {
  @usableFromInline let hub: Hub<Message, Stored>
  /// The value a message commits, boxed (nil for a root that is only read, never
  /// notified). Boxed by the closure, so that a large value is not copied on the way.
  @usableFromInline let committedValue: (@Sendable (Message) -> any Sendable)?

  /// The hooks of a lazy property: a derived value following it counts as its observer.
  @usableFromInline let lazy: LazyHooks?

  /// ``pin()`` and ``version``, as closures that capture nothing, made by the inlinable
  /// initializer: so they run code specialized for the hub's types, not the generic
  /// code that a call through the `Root` protocol would reach.
  @usableFromInline let pinning: @Sendable (Hub<Message, Stored>) -> (version: UInt64, value: any Sendable)
  @usableFromInline let versioning: @Sendable (Hub<Message, Stored>) -> UInt64
  /// ``notify(_:_:)``, made the same way: its handler runs for every commit.
  @usableFromInline let notifying:
    @Sendable (HubRoot, any ObservedNode, @escaping @Sendable (AnyObject, Snapshot) -> Void) -> SubscriptionCore

  @inlinable init(
    _ hub: Hub<Message, Stored>, committedValue: (@Sendable (Message) -> any Sendable)?, lazy: LazyHooks? = nil
  ) {
    self.hub = hub
    self.committedValue = committedValue
    self.lazy = lazy
    pinning = { hub in
      let me = currentThreadID()
      return hub.storage.withLock { $0.visible(to: me) }
    }
    versioning = { hub in hub.storage.withLock { $0.visibleVersion(current: $0.version) } }
    notifying = { root, node, refresh in root.subscribe(node, refresh) }
  }

  @usableFromInline var identity: ObjectIdentifier { ObjectIdentifier(hub.storage) }

  @usableFromInline func pin() -> (version: UInt64, value: any Sendable) { pinning(hub) }

  @usableFromInline var version: UInt64 { versioning(hub) }

  @usableFromInline var versionWord: UnsafePointer<Atomic<UInt64>>? { hub.versionWord }

  @usableFromInline func notify(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void
  ) -> SubscriptionCore {
    notifying(self, node, refresh)
  }

  /// Subscribes `refresh` to every commit, with `node` as the owner (see ``notify(_:_:)``).
  @inlinable func subscribe(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void
  ) -> SubscriptionCore {
    guard let committedValue else { fatalError("Evented: a root without a committed value was notified") }
    // Every commit after the subscription bumps the version by one and reaches this
    // subscription, in commit order: counting them gives each one's version.
    let version = Atomic<UInt64>(0)
    let lazyToken = lazy?.token()  // counts this subscription as an observer of a lazy source
    let entry = RootEntry<Message>(node: node, keeping: lazyToken) { [self] owner, message in
      let committed = version.add(1, ordering: .relaxed).newValue
      // A commit of a transaction is never a state of its own (Transaction.swift).
      let isPartial = transactionsBegun.load(ordering: .relaxed) && hub.isTransactional(committed)
      Snapshot.ofCommit(of: self, version: committed, value: committedValue(message), isPartial: isPartial) {
        refresh(owner, $0)
      }
    }
    hub.subscribe(entry) { state in version.store(state.version, ordering: .relaxed) }
    return entry
  }
}

extension HubRoot where Message == Update<Stored> {
  /// Subscribes `node`, a map of this property by `transform`, to every commit: each
  /// commit's value is computed from the commit itself and committed to the node
  /// (``DerivedProperty/commitDirect(_:version:)``), unless it was made inside a
  /// transaction, which the node computes whole.
  @inlinable func notifyDirectly<Value>(
    _ node: DerivedProperty<Value>, _ transform: @escaping @Sendable (Stored) -> Value
  ) -> SubscriptionCore {
    let version = Atomic<UInt64>(0)
    let lazyToken = lazy?.token()  // counts this subscription as an observer of a lazy source
    let hub = self.hub
    let entry = RootEntry<Message>(node: node, keeping: lazyToken) { owner, update in
      let committed = version.add(1, ordering: .relaxed).newValue
      let node = unsafeDowncast(owner, to: DerivedProperty<Value>.self)
      if transactionsBegun.load(ordering: .relaxed) && hub.isTransactional(committed) { return node.refresh() }
      node.commitDirect(transform(update.new), version: committed)
    }
    hub.subscribe(entry) { state in version.store(state.version, ordering: .relaxed) }
    return entry
  }
}

/// A derived value's subscription to one of its roots. It counts as alive only while
/// the derived value has observers, so that the root's `observerCount` and sweeps see
/// through an unobserved derived value (which then subscribes again when observed).
@usableFromInline
final class RootEntry<Message>: Entry<Message>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock; `handler` is ordered by `word` (see
  // SubscriptionCore), and `kept` with it; `node` is written once, before the
  // subscription is published; `isDropped` and `deliveries` are atomic.
  @usableFromInline typealias Handler = @Sendable (AnyObject, Message) -> Void

  @usableFromInline @exclusivity(unchecked) var handler: Handler?
  /// Written once before the subscription is published.
  @usableFromInline @exclusivity(unchecked) weak var node: (any ObservedNode)?

  /// What the subscription keeps alive until it ends (a lazy source's observer token);
  /// released with the handler.
  @usableFromInline @exclusivity(unchecked) var kept: LazyObserverToken?

  @usableFromInline init(node: any ObservedNode, keeping kept: LazyObserverToken? = nil, handler: @escaping Handler) {
    self.handler = handler
    self.kept = kept
    super.init(isOnce: false, target: nil)
    self.node = node
  }

  /// Set once the node was found unobserved: the subscription is over for good.
  @usableFromInline let isDropped = Atomic<Bool>(false)

  /// Deliveries since the node's observers were last checked.
  @usableFromInline let deliveries = Atomic<UInt8>(0)

  /// For a delivery: the node, checking that it is still observed once every 32
  /// deliveries (a full check takes the node's locks). Sweeps and counts check every
  /// time (`sweptOwner`), so an unobserved node is dropped by them at once, and by its
  /// deliveries within 32 commits.
  @usableFromInline override var liveOwner: AnyObject? {
    guard !isDropped.load(ordering: .acquiring), let node else { return nil }
    if deliveries.wrappingAdd(1, ordering: .relaxed).oldValue & 31 != 0 { return node }
    return observed(node)
  }

  @usableFromInline override var sweptOwner: AnyObject? {
    guard !isDropped.load(ordering: .acquiring), let node else { return nil }
    return observed(node)
  }

  /// `node` if it still has observers; else nil, and the subscription is over for good.
  @usableFromInline func observed(_ node: any ObservedNode) -> AnyObject? {
    guard node.keepsLinks() else {
      isDropped.store(true, ordering: .releasing)
      return nil
    }
    return node
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Message) {
    if let handler { handler(owner, message) }
  }

  /// Released when the subscription ends, outside every lock. If it ended because the
  /// node has no observer left, the node's observers whose owners died are swept out
  /// now: they hold the node, which would otherwise live until its next delivery.
  @usableFromInline override func releaseHandler() {
    handler = nil
    kept = nil
    node?.sweepObservers()
  }
}

extension HubRoot where Message == Update<Stored> {
  /// The root of a property's hub.
  @inlinable convenience init(property hub: Hub<Message, Stored>, lazy: LazyHooks? = nil) {
    self.init(hub, committedValue: { $0.new }, lazy: lazy)
  }
}

/// The versions of a derived value's roots, in the order of its `roots`.
@usableFromInline
struct Versions: Sendable, Equatable {
  /// The first two roots' versions, kept inline, so that the versions of one or two
  /// roots (a `map`, a `combineLatest`: the most common cases) need no array.
  @usableFromInline var first: UInt64
  @usableFromInline var second: UInt64
  /// The other roots' versions, from the third on.
  @usableFromInline var rest: [UInt64]

  @inlinable init(_ values: [UInt64]) {
    first = values.first ?? 0
    second = values.count > 1 ? values[1] : 0
    rest = values.count > 2 ? Array(values.dropFirst(2)) : []
  }

  /// The versions of `roots`, each read by `version`.
  @inlinable init(of roots: [any Root], _ version: (any Root) -> UInt64) {
    first = roots.isEmpty ? 0 : version(roots[0])
    second = roots.count > 1 ? version(roots[1]) : 0
    rest = []
    if roots.count > 2 {
      rest.reserveCapacity(roots.count - 2)
      for root in roots.dropFirst(2) { rest.append(version(root)) }
    }
  }

  /// The version of one root.
  @inlinable init(single version: UInt64) {
    first = version
    second = 0
    rest = []
  }

  /// Equal versions, root by root; the inline ones first, so that one or two roots
  /// compare without touching the array.
  @inlinable static func == (lhs: Versions, rhs: Versions) -> Bool {
    lhs.first == rhs.first && lhs.second == rhs.second && (lhs.rest.isEmpty ? rhs.rest.isEmpty : lhs.rest == rhs.rest)
  }

  /// Takes `other`'s versions; the array only when either side has one, so that
  /// updating the versions of one or two roots retains and releases nothing.
  @inlinable mutating func assign(_ other: Versions) {
    first = other.first
    second = other.second
    if !(rest.isEmpty && other.rest.isEmpty) { rest = other.rest }
  }

  /// The version of the root at `index`.
  @inlinable func version(at index: Int) -> UInt64 {
    switch index {
    case 0: first
    case 1: second
    default: rest[index - 2]
    }
  }

  /// Whether `self` is a later state than `other`: no root older, and one newer.
  @inlinable func isLater(than other: Versions) -> Bool {
    if first < other.first || second < other.second { return false }
    var newer = first > other.first || second > other.second
    for (mine, theirs) in zip(rest, other.rest) {
      if mine < theirs { return false }
      if mine > theirs { newer = true }
    }
    return newer
  }
}

/// The roots read by one evaluation, each pinned on its first read.
@usableFromInline
final class Snapshot {
  @usableFromInline struct Pin: Sendable {
    /// Not retained, so that copying a pin retains nothing: the roots this snapshot
    /// pins itself are kept by ``pinnedRoots``, and a commit's pin by the root that
    /// delivers it, until the evaluation is over.
    @usableFromInline unowned(unsafe) let root: any Root
    /// `root.identity`, kept so that finding a pin calls nothing.
    @usableFromInline let identity: ObjectIdentifier
    @usableFromInline let version: UInt64
    @usableFromInline let value: any Sendable
    /// A commit made inside a transaction: not a state of its own.
    @usableFromInline let isPartial: Bool

    @usableFromInline init(root: any Root, version: UInt64, value: any Sendable, isPartial: Bool = false) {
      self.root = root
      identity = root.identity
      self.version = version
      self.value = value
      self.isPartial = isPartial
    }
  }

  @usableFromInline @exclusivity(unchecked) var pins: [Pin] = []
  /// The roots pinned by ``index(of:)``, kept alive until the snapshot is recycled
  /// (a pin does not retain its root).
  @usableFromInline @exclusivity(unchecked) var pinnedRoots: [any Root] = []
  /// The values of the computed nodes evaluated so far, by node; nil except while a
  /// deep chain is evaluated.
  @usableFromInline @exclusivity(unchecked) var computed: [ObjectIdentifier: any Sendable]?

  @usableFromInline init() {}

  /// The height above which a chain of computed nodes is evaluated from the bottom up
  /// (``evaluateUpstream(of:)``) rather than by each body calling the one below.
  @inlinable static var deepChain: Int { 32 }

  /// Evaluates every computed node below `node`, from the roots up, keeping each value in
  /// the snapshot: then the body of each reads the values below it without recursion,
  /// so the stack does not grow with the length of a chain (5,000 maps evaluate on a
  /// 1 MB stack).
  @usableFromInline func evaluateUpstream(of node: any EvaluatedNode) {
    computed = [:]
    // Post-order without recursion: a node comes after every node it reads.
    var order: [any EvaluatedNode] = []
    var visited = Set<ObjectIdentifier>()
    var stack: [(node: any EvaluatedNode, expanded: Bool)] = node.upstream.map { ($0, false) }
    while let (next, expanded) = stack.popLast() {
      if expanded {
        order.append(next)
        continue
      }
      guard visited.insert(ObjectIdentifier(next)).inserted else { continue }
      stack.append((next, true))
      for below in next.upstream where !visited.contains(ObjectIdentifier(below)) { stack.append((below, false)) }
    }
    for each in order { each.evaluateIntoSnapshot(self) }
  }

  /// The pinned version and value of `root`, pinning it now if this is its first read.
  @usableFromInline func pin(_ root: any Root) -> Pin {
    pins[index(of: root)]
  }

  /// The index in `pins` of `root`'s pin, pinning it now if this is its first read.
  @usableFromInline func index(of root: any Root) -> Int {
    let identity = root.identity
    for index in pins.indices where pins[index].identity == identity { return index }
    let (version, value) = root.pin()
    pinnedRoots.append(root)
    pins.append(Pin(root: root, version: version, value: value))
    return pins.count - 1
  }

  /// The pinned value of `hub`'s stored value.
  @inlinable func read<Message, Value: Sendable>(_ hub: Hub<Message, Value>) -> Value {
    let identity = ObjectIdentifier(hub.storage)
    for index in pins.indices where pins[index].identity == identity { return unbox(pins[index].value) }
    return unbox(pins[index(of: HubRoot(hub, committedValue: nil))].value)
  }

  /// The versions of `roots` in this snapshot, pinning those not read yet.
  @usableFromInline func versions(of roots: [any Root]) -> Versions {
    Versions(of: roots) { pins[index(of: $0)].version }
  }

  /// The versions of `roots`, whose identities are `identities`, in this snapshot,
  /// pinning those not read yet. Found by identity, so that a root already pinned is
  /// found without a call through `Root` (and one root pinned alone, the snapshot of a
  /// commit, without a loop).
  @inlinable func versions(of roots: [any Root], identities: [ObjectIdentifier]) -> Versions {
    if identities.count == 1, pins.count == 1, pins[0].identity == identities[0] {
      return Versions(single: pins[0].version)
    }
    return versions(of: roots)
  }

  /// Whether every pinned value held at one instant: no root moved since it was pinned.
  @usableFromInline var isConsistent: Bool {
    if pins.count <= 1 { return true }
    for index in pins.indices where pins[index].root.version != pins[index].version { return false }
    return true
  }

  /// Runs `evaluate` on a consistent snapshot, retrying while writers move the roots
  /// between two pins. `evaluate` must pin every root of `roots` first.
  ///
  /// - Parameter reused: A snapshot to empty and evaluate in (a commit's, whose
  ///   pin is not needed), recycled afterwards like one taken here; nil to take the
  ///   thread's spare.
  /// - Returns: What `evaluate` returned, and the versions of `roots` it saw.
  @inlinable static func consistent<Result>(
    of roots: [any Root], reusing reused: Snapshot? = nil, _ evaluate: (Snapshot) -> Result
  ) -> (Result, Versions) {
    let snapshot = reused ?? Snapshot.make()
    var attempts = 0
    while true {
      snapshot.empty()
      let result = evaluate(snapshot)
      if snapshot.isConsistent {
        let versions = snapshot.versions(of: roots)
        snapshot.recycle()
        return (result, versions)
      }
      attempts += 1
      if attempts > 16 { sched_yield() }
    }
  }

  /// Runs `body` with a snapshot whose one pin is a commit of `root`: its `version`
  /// and committed `value`. The pin is made in place, so that the value is not copied
  /// on its way. `body` takes the snapshot over: it recycles it once done with it.
  @inlinable static func ofCommit(
    of root: any Root, version: UInt64, value: consuming any Sendable, isPartial: Bool, _ body: (Snapshot) -> Void
  ) {
    let snapshot = make()
    snapshot.pins.append(Pin(root: root, version: version, value: value, isPartial: isPartial))
    body(snapshot)
  }

  /// The commit of a snapshot made by ``ofCommit(of:version:value:isPartial:_:)``.
  @inlinable var commit: Pin {
    _read { yield pins[0] }
  }

  /// A snapshot with no pins: the calling thread's spare one if it has one (its pins
  /// keep their capacity), so that an evaluation allocates nothing; else a new one.
  /// An evaluation inside an evaluation (a transform that reads a derived `value`)
  /// finds no spare and makes its own.
  @inlinable static func make() -> Snapshot {
    let thread = DeliveringThread.current
    guard let spare = thread.pointee.spareSnapshot else { return Snapshot() }
    thread.pointee.spareSnapshot = nil
    return spare
  }

  /// Removes every pin and computed value, keeping the arrays' capacity.
  @inlinable func empty() {
    // One by one: `removeAll(keepingCapacity:)` goes through the general
    // `replaceSubrange`, several times dearer for the one or two pins usually here.
    while !pins.isEmpty { pins.removeLast() }
    while !pinnedRoots.isEmpty { pinnedRoots.removeLast() }
    if computed != nil { computed = nil }
  }

  /// Empties this snapshot and keeps it as the calling thread's spare, unless the
  /// thread has one. The snapshot must not be used afterwards.
  @inlinable func recycle() {
    empty()
    let thread = DeliveringThread.current
    if thread.pointee.spareSnapshot == nil { thread.pointee.spareSnapshot = self }
  }
}

/// `value`, a pinned or computed value known to be a `Value`, unboxed without the
/// runtime's general cast (a few hundred instructions for an `Int`): the existential is
/// opened, and its type compared with `Value`'s.
@inlinable @inline(__always)
func unbox<Value>(_ value: any Sendable) -> Value {
  func open<Boxed>(_ boxed: Boxed) -> Value {
    if Boxed.self == Value.self { return unsafeBitCast(boxed, to: Value.self) }
    return boxed as! Value
  }
  return _openExistential(value, do: open)
}
