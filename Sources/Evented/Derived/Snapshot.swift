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
  /// Past ``scanLimit`` pins, where each is found by its root's identity: an
  /// open-addressing table of indices in `pins` plus one (0 for an empty slot), whose
  /// size is a power of two, at least twice the pins. Built again from the pins by each
  /// evaluation that needs it, so that emptying a snapshot costs nothing more.
  @usableFromInline @exclusivity(unchecked) var slots: [Int32] = []
  /// 64 minus the base-2 logarithm of `slots.count`: the shift of ``hash(_:shift:)``.
  @usableFromInline @exclusivity(unchecked) var slotShift = 64
  /// The roots pinned by ``index(of:)``, kept alive until the snapshot is recycled
  /// (a pin does not retain its root).
  @usableFromInline @exclusivity(unchecked) var pinnedRoots: [any Root] = []
  /// The values of the computed nodes evaluated so far, by node; nil except while a
  /// deep chain is evaluated.
  @usableFromInline @exclusivity(unchecked) var computed: [ObjectIdentifier: any Sendable]?
  /// Whose view of the roots the pins take; back to `.calling` when recycled.
  @usableFromInline @exclusivity(unchecked) var reader = Reader.calling

  @usableFromInline init() {}

  /// The thread whose view of the roots a snapshot takes: they differ while a
  /// transaction is open (Transaction.swift).
  @usableFromInline
  enum Reader: Sendable {
    /// The calling thread, which reads its own transaction's writes.
    case calling
    /// A thread that runs no transaction: what every other thread sees while the
    /// calling thread's transaction is open. For an observer that arrives inside it,
    /// whose first value must be a state that other threads see too.
    case outsider

    /// The thread ID that `HubState.visible(to:)` compares with transactions' owners.
    @inlinable var threadID: UInt {
      switch self {
      case .calling: currentThreadID()
      case .outsider: UInt.max
      }
    }
  }

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
    if let index = find(identity) { return index }
    let (version, value) = root.pin(for: reader)
    pinnedRoots.append(root)
    pins.append(Pin(root: root, version: version, value: value))
    indexLast()
    return pins.count - 1
  }

  /// The pinned value of `hub`'s stored value.
  @inlinable func read<Message, Value: Sendable>(_ hub: Hub<Message, Value>) -> Value {
    if let index = find(ObjectIdentifier(hub.storage)) { return unbox(pins[index].value) }
    return unbox(pins[index(of: HubRoot(reading: hub))].value)
  }

  /// The number of pins up to which a pin is found by comparing each: a constant, so
  /// that finding one costs O(1) at any size, and the one or two pins of most
  /// evaluations need no table.
  @inlinable static var scanLimit: Int { 8 }

  /// The index in `pins` of the pin of the root whose identity is `identity`, if it is
  /// pinned: by a scan of at most ``scanLimit`` pins, else from ``slots``.
  @inlinable func find(_ identity: ObjectIdentifier) -> Int? {
    if pins.count <= Self.scanLimit {
      for index in pins.indices where pins[index].identity == identity { return index }
      return nil
    }
    let mask = slots.count - 1
    var slot = Self.hash(identity, shift: slotShift)
    while true {
      let stored = Int(slots[slot])
      if stored == 0 { return nil }
      if pins[stored - 1].identity == identity { return stored - 1 }
      slot = (slot + 1) & mask
    }
  }

  /// Where a root's search in ``slots`` starts: its address, multiplied (Fibonacci
  /// hashing: the top bits of the product are spread even for aligned addresses), with
  /// no call to the standard library's hasher.
  @inlinable static func hash(_ identity: ObjectIdentifier, shift: Int) -> Int {
    Int(truncatingIfNeeded: (UInt64(UInt(bitPattern: identity)) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
  }

  /// Indexes the last pin in ``slots`` once there are more than ``scanLimit``; the
  /// table is built, or grown, when the pins would fill more than half of it.
  @usableFromInline func indexLast() {
    let count = pins.count
    guard count > Self.scanLimit else { return }
    if count * 2 > slots.count || count == Self.scanLimit + 1 {
      var size = max(slots.count, 32)
      while count * 2 > size { size *= 2 }
      if size != slots.count {
        slots = [Int32](repeating: 0, count: size)
      } else {
        for slot in slots.indices { slots[slot] = 0 }
      }
      slotShift = 64 - size.trailingZeroBitCount
      for index in 0..<count { place(index) }
      return
    }
    place(count - 1)
  }

  /// Enters the pin at `index` in ``slots``, which has room for it.
  @usableFromInline func place(_ index: Int) {
    let mask = slots.count - 1
    var slot = Self.hash(pins[index].identity, shift: slotShift)
    while slots[slot] != 0 { slot = (slot + 1) & mask }
    slots[slot] = Int32(index + 1)
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

  /// Whether every pinned value held at one instant: no root moved since it was pinned
  /// (each root's version read again, without its lock where it can be).
  @usableFromInline var isConsistent: Bool {
    if pins.count <= 1 { return true }
    for index in pins.indices where pins[index].root.versionNow(for: reader) != pins[index].version { return false }
    return true
  }

  /// Runs `evaluate` on a consistent snapshot, retrying while writers move the roots
  /// between two pins. `evaluate` must pin every root of `roots` first.
  ///
  /// - Parameters:
  ///   - reused: A snapshot to empty and evaluate in (a commit's, whose pin is not
  ///     needed), recycled afterwards like one taken here; nil to take the thread's
  ///     spare.
  ///   - reader: Whose view of the roots to take.
  /// - Returns: What `evaluate` returned, and the versions of `roots` it saw.
  @inlinable static func consistent<Result>(
    of roots: [any Root], reusing reused: Snapshot? = nil, as reader: Reader = .calling,
    _ evaluate: (Snapshot) -> Result
  ) -> (Result, Versions) {
    let snapshot = reused ?? Snapshot.make()
    if case .outsider = reader { snapshot.reader = reader }
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
    if case .outsider = reader { reader = .calling }
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
