// Glitch freedom: a derived value is computed from one consistent state of its roots,
// the properties and arrays it reads.
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
// A snapshot also records which roots each computed value read (dynamic dependencies):
// an evaluation opens a frame, every read appends its pin to `trail`, and closing the
// frame turns that tail into the value's `Reads`, each root once, and hands them on
// to the frame around it. A `flatMapLatest` reads its outer source and then the target
// picked, so its reads follow its switches.
//
// Versions also order states: a root's version only grows, and two consistent states
// are ordered by the roots both read, so an effect never delivers a state older than
// one it delivered (DerivedProperty+Run.swift).

import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The roots read by one evaluation, each pinned on its first read.
@usableFromInline
final class Snapshot {
  @usableFromInline struct Pin: Sendable {
    /// Not retained, so that copying a pin retains nothing: ``pinnedRoots`` keeps it.
    @usableFromInline unowned(unsafe) let root: any Root
    /// `root.identity`, kept so that finding a pin calls nothing.
    @usableFromInline let identity: ObjectIdentifier
    @usableFromInline let version: UInt64
    @usableFromInline let value: any Sendable

    @inlinable init(root: any Root, version: UInt64, value: any Sendable) {
      self.root = root
      identity = root.identity
      self.version = version
      self.value = value
    }
  }

  @usableFromInline @exclusivity(unchecked) var pins: [Pin] = []
  /// The root of each pin, in the order of `pins`, kept alive until the snapshot is
  /// recycled (a pin does not retain its root).
  @usableFromInline @exclusivity(unchecked) var pinnedRoots: [any Root] = []
  /// Past ``scanLimit`` pins, where a pin that is not the one guessed is found by its
  /// root's identity: an open-addressing table of indices in `pins` plus one (0 for an
  /// empty slot), whose size is a power of two, at least twice the pins. Filled from the
  /// pins when a search needs it, so that emptying a snapshot costs nothing more.
  /// Allocated here, not an array, so that filling it checks no sharing and retains
  /// nothing; freed with the snapshot.
  @usableFromInline @exclusivity(unchecked) var slots = UnsafeMutableBufferPointer<Int32>(start: nil, count: 0)
  /// 64 minus the base-2 logarithm of `slots.count`: the shift of ``hash(_:shift:)``.
  @usableFromInline @exclusivity(unchecked) var slotShift = 64
  /// The pins entered in ``slots``: the first `indexed`.
  @usableFromInline @exclusivity(unchecked) var indexed = 0
  /// The pin that the next search tries first: the one after the pin found last. An
  /// evaluation mostly reads roots in the order its memo's reads were pinned, and the
  /// values below it read runs of them in that order too.
  @usableFromInline @exclusivity(unchecked) var guess = 0
  /// The pins read by the open frames, in the order read (``openFrame()``).
  @usableFromInline @exclusivity(unchecked) var trail: [Int32] = []
  /// The number of open frames: reads are recorded while it is above zero.
  @usableFromInline @exclusivity(unchecked) var frames = 0
  /// By pin: the number of the last frame closing that listed it, so that a frame's
  /// reads list each pin once.
  @usableFromInline @exclusivity(unchecked) var listed: [UInt32] = []
  @usableFromInline @exclusivity(unchecked) var closings: UInt32 = 0
  /// The reads of the last frame closed that read one root, which the next such frame
  /// returns again if it read the same root at the same version: the values of a chain
  /// of maps, or the sides of a diamond, then share one list of reads instead of
  /// allocating one each.
  @usableFromInline @exclusivity(unchecked) var lastOfOneRoot: Reads?
  /// Whose view of the roots the pins take; back to `.calling` when recycled.
  @usableFromInline @exclusivity(unchecked) var reader = Reader.calling
  /// Inside a transaction, where memos keep nothing (other threads do not see its
  /// writes), the values this snapshot's evaluations computed, by node, with their
  /// reads: so that one read evaluates each value once, and a deep chain's pass from
  /// the roots up leaves its values here for the bodies above. Emptied with the pins.
  @usableFromInline @exclusivity(unchecked) var computed: [ObjectIdentifier: (value: any Sendable, reads: Reads)] =
    [:]
  /// Set while a deep chain is evaluated from the roots up (DerivedProperty+Evaluate.swift).
  @usableFromInline @exclusivity(unchecked) var isEvaluatingUpstream = false
  /// The nodes that pass met: an open-addressing table of their addresses (0 for an
  /// empty slot), its size a power of two, kept for the next pass unless large; memory
  /// allocated here, like ``slots``.
  @usableFromInline @exclusivity(unchecked) var met = UnsafeMutableBufferPointer<UInt>(start: nil, count: 0)
  /// The slots of `met` filled, so that forgetting them costs what the pass met.
  @usableFromInline @exclusivity(unchecked) var metSlots: [Int32] = []

  /// The height above which a chain of computed nodes is evaluated from the roots up
  /// rather than by each body calling the one below.
  @inlinable static var deepChain: Int { 32 }

  @usableFromInline init() {}

  deinit {
    slots.deallocate()
    met.deallocate()
  }

  /// The thread whose view of the roots a snapshot takes: they differ while a
  /// transaction is open (Transaction.swift).
  @usableFromInline
  enum Reader: Sendable {
    /// The calling thread, which reads its own transaction's writes.
    case calling
    /// A thread that runs no transaction: what every other thread sees while the
    /// calling thread's transaction is open.
    case outsider

    /// The thread ID that `HubState.visible(to:)` compares with transactions' owners.
    @inlinable var threadID: UInt {
      switch self {
      case .calling: currentThreadID()
      case .outsider: UInt.max
      }
    }
  }

  // MARK: Pins

  /// The index in `pins` of `root`'s pin, pinning it now if this is its first read;
  /// recorded as read by the open frames.
  @inlinable func index(of root: any Root) -> Int {
    let index = find(root.identity) ?? pinNew(root)
    if frames > 0 { trail.append(Int32(truncatingIfNeeded: index)) }
    return index
  }

  /// The pinned version and value of `root`, pinning it now if this is its first read.
  @inlinable func pin(_ root: any Root) -> Pin {
    pins[index(of: root)]
  }

  /// The pinned value of `property`.
  @inlinable func read<Value: Sendable>(_ property: Property<Value>) -> Value {
    let identity = ObjectIdentifier(property.hub.storage)
    let index = find(identity) ?? pinNew(property.root)
    if frames > 0 { trail.append(Int32(truncatingIfNeeded: index)) }
    return unbox(pins[index].value)
  }

  /// Pins `root` now: its first read in this snapshot.
  @usableFromInline func pinNew(_ root: any Root) -> Int {
    let (version, value) = root.pin(for: reader)
    pinnedRoots.append(root)
    pins.append(Pin(root: root, version: version, value: value))
    guess = pins.count
    return pins.count - 1
  }

  // MARK: Taking and recycling

  /// Runs `evaluate` on a consistent snapshot, retrying while writers move the roots
  /// between two pins.
  ///
  /// - Parameters:
  ///   - reused: A snapshot to empty and evaluate in (a commit's, whose pin is not
  ///     needed), recycled afterwards like one taken here; nil to take the thread's
  ///     spare.
  ///   - reader: Whose view of the roots to take.
  @inlinable static func consistent<Result>(
    reusing reused: Snapshot? = nil, as reader: Reader = .calling, _ evaluate: (Snapshot) -> Result
  ) -> Result {
    let snapshot = reused ?? Snapshot.make()
    if case .outsider = reader { snapshot.reader = reader }
    var attempts = 0
    while true {
      snapshot.empty()
      let result = evaluate(snapshot)
      if snapshot.isConsistent {
        snapshot.recycle()
        return result
      }
      attempts += 1
      if attempts > 16 { sched_yield() }
    }
  }

  /// A snapshot whose one pin is a commit of `root`: its `version` and committed
  /// `value`. The caller takes the snapshot over: it recycles it once done. Returned,
  /// not passed to a closure, which would retain what it captures (the node a commit
  /// runs, whose retains take the runtime's slow path: it is weakly referenced).
  @inlinable static func ofCommit(of root: any Root, version: UInt64, value: consuming any Sendable) -> Snapshot {
    let snapshot = make()
    snapshot.pins.append(Pin(root: root, version: version, value: value))
    snapshot.pinnedRoots.append(root)
    return snapshot
  }

  /// The commit of a snapshot made by ``ofCommit(of:version:value:)``.
  @inlinable var commit: Pin {
    _read { yield pins[0] }
  }

  /// A snapshot with no pins: the calling thread's spare one if it has one (its arrays
  /// keep their capacity), so that an evaluation allocates nothing; else a new one.
  @inlinable static func make() -> Snapshot {
    let thread = DeliveringThread.current
    guard let spare = thread.pointee.spareSnapshot else { return Snapshot() }
    thread.pointee.spareSnapshot = nil
    return spare
  }

  /// Removes every pin and record, keeping the arrays' capacity.
  @inlinable func empty() {
    // One by one: `removeAll(keepingCapacity:)` goes through the general
    // `replaceSubrange`, several times dearer for the one or two pins usually here.
    while !pins.isEmpty { pins.removeLast() }
    while !pinnedRoots.isEmpty { pinnedRoots.removeLast() }
    (indexed, guess) = (0, 0)
    if lastOfOneRoot != nil { lastOfOneRoot = nil }
    if !computed.isEmpty { computed.removeAll() }
    clearTrail()
    frames = 0
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
