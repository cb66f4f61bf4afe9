// Promise 1 (thread safety): everything a lock-based source keeps under its one lock,
// as a plain value: the stored value, the subscribers (SubscriberList.swift) and the
// delivery queue (DeliveryQueue.swift). The hub (Hub.swift) locks, calls a transition
// here, unlocks, then carries out what the transition returned.
//
// The subscribers and the queue live in a `HubCore`, allocated by the first subscribe
// (or at once, for a source made with a backlog limit of its own): an idle source holds
// only its value and a nil pointer. The core is freed with the source.

import Synchronization

/// ``HubState/mayHideBit``, for code that has no hub type at hand.
@inlinable var versionMayHideBit: UInt64 { 1 << 63 }

/// The state of one source, guarded by its hub's lock.
@usableFromInline
struct HubState<Message: Sendable, Stored> {
  /// The source's value (`Void` for an event source).
  @usableFromInline var stored: Stored
  /// The subscribers and the delivery queue; nil until the first subscribe.
  @usableFromInline var core: UnsafeMutablePointer<HubCore<Message>>?
  /// The number of changes committed to `stored` (what a derived value compares to
  /// know whether its inputs moved, Snapshot.swift), with ``mayHideBit`` set while an
  /// open transaction may hide them from other threads. Read under the lock through
  /// ``version``, or loaded without it through ``Hub/versionWord``; so written only as
  /// an atomic reached by address (``countCommit(_:)``, ``storeVersion(_:_:)``), never
  /// by an `inout` access, which Thread Sanitizer counts as a plain write of the first
  /// byte it reaches. So it is not the first field: a `mutating` call on the state, or
  /// an `inout` access to a zero-sized `stored`, reaches the state's first byte.
  @usableFromInline var versionBits: UInt64 = 0

  @usableFromInline init(stored: Stored, backlogLimit: Int) {
    self.stored = stored
    core = backlogLimit == defaultBacklogLimit ? nil : HubCore.make(backlogLimit: backlogLimit)
  }

  /// The number of changes committed to `stored`.
  @inlinable var version: UInt64 { versionBits & ~Self.mayHideBit }

  /// Set in ``versionBits`` from a transaction's first write to the source until it
  /// ends: a thread that loads the version
  /// without the lock and finds it set must read it under the lock instead, where the
  /// transaction's record decides what the thread sees (Transaction.swift).
  @inlinable static var mayHideBit: UInt64 { versionMayHideBit }

  /// Counts one more change committed to the stored value of `state`, locked, with a
  /// releasing atomic store: a thread that loads the new version without the lock sees
  /// everything written before. Keeps ``mayHideBit``.
  @inlinable @inline(__always) static func countCommit(_ state: UnsafeMutablePointer<HubState>) {
    let next = state.pointee.versionBits &+ 1
    versionWord(of: state).pointee.store(next, ordering: .releasing)
  }

  /// The ``versionBits`` of `state`, as the atomic they are written as.
  @inlinable @inline(__always)
  static func versionWord(of state: UnsafeMutablePointer<HubState>) -> UnsafePointer<Atomic<UInt64>> {
    (UnsafeRawPointer(state) + versionOffset).assumingMemoryBound(to: Atomic<UInt64>.self)
  }

  /// Where ``versionBits`` lies in the state.
  @inlinable static var versionOffset: Int { MemoryLayout<HubState>.offset(of: \.versionBits).unsafelyUnwrapped }

  /// The core, made now if there is none yet.
  @inlinable mutating func existingCore() -> UnsafeMutablePointer<HubCore<Message>> {
    if let core { return core }
    let made = HubCore<Message>.make(backlogLimit: defaultBacklogLimit)
    core = made
    return made
  }

  /// The subscriptions, in subscription order (empty while there is no core).
  @inlinable var subscribers: SubscriberList<Message> {
    get { core?.pointee.subscribers ?? SubscriberList() }
    _modify { yield &existingCore().pointee.subscribers }
  }

  /// The delivering role and the deliveries that wait for it (an idle queue while there
  /// is no core). Every delivery has a core: it had a subscriber.
  @inlinable var queue: DeliveryQueue<Message> {
    _read {
      if let core {
        yield core.pointee.queue
      } else {
        yield DeliveryQueue(backlogLimit: defaultBacklogLimit)
      }
    }
    _modify { yield &existingCore().pointee.queue }
  }

  // The two members below are `mutating` although they change nothing: so `self` is
  // passed by address, and unoptimized builds do not copy the stored value to call them.

  /// Whether a committing thread that may wait must check for room first, or for the
  /// end of a transaction that holds the source.
  @inlinable @inline(__always) mutating func mayHaveToWait() -> Bool {
    guard let core else { return false }
    return core.pointee.queue.mayHaveToWait || core.pointee.pressure?.isFull == true
      || core.pointee.transaction.map { $0.mark.owner != currentThreadID() } == true
  }

  /// Whether a committing thread that may wait must check for room first: all that
  /// ``mayHaveToWait()`` asks of an event source, which no transaction ever holds (it
  /// keeps the events sent inside it instead, TransactionWrites.swift).
  @inlinable @inline(__always) mutating func mayHaveToWaitForRoom() -> Bool {
    guard let core else { return false }
    return core.pointee.queue.mayHaveToWait || core.pointee.pressure?.isFull == true
  }

  /// The recipients of a commit now: every current subscription; nil if there is none.
  @inlinable mutating func recipientsOfCommit() -> Recipients<Message>? {
    guard let core, core.pointee.subscribers.live > 0 else { return nil }
    return .all(core.pointee.subscribers.currentSnapshot())
  }

  /// Adds `entry`. An event observer on a queue shares the source's pressure; a state
  /// observer's mailbox is never full, so it has none.
  @inlinable mutating func subscribe(
    _ entry: Entry<Message>, into garbage: inout Garbage, keepingDeadOwners: Bool
  ) {
    let core = existingCore()
    if let target = entry.target, target.mailbox == nil { core.pointee.attach(target) }
    core.pointee.subscribers.add(entry, into: &garbage, keepingDeadOwners: keepingDeadOwners)
  }

  /// The next queued delivery; nil after stopping or handing the role over.
  ///
  /// - Returns: the delivery, and the room to wake, if any.
  @inlinable @inline(__always)
  mutating func takeNext(newestFirst: Bool) -> (Parcel<Message>?, wake: Condition?) {
    let core = core.unsafelyUnwrapped
    let next = core.pointee.queue.next(newestFirst: newestFirst)
    return (next, core.pointee.queue.roomToWake)
  }

  /// ``takeNext(newestFirst:)`` after a delivery that met an ended or ownerless
  /// subscription: first removes the subscriptions that ended.
  @inlinable mutating func sweepAndTakeNext(
    into garbage: inout Garbage, newestFirst: Bool
  ) -> (Parcel<Message>?, wake: Condition?) {
    core.unsafelyUnwrapped.pointee.subscribers.removeEnded(into: &garbage)
    return takeNext(newestFirst: newestFirst)
  }
}

/// The subscribers and the delivery queue of a source that has had a subscriber.
@usableFromInline
struct HubCore<Message: Sendable>: ~Copyable {
  @usableFromInline var subscribers = SubscriberList<Message>()
  @usableFromInline var queue: DeliveryQueue<Message>
  /// The queue subscriptions that are full (QueueDelivery.swift); made by the first one.
  @usableFromInline var pressure: QueuePressure?
  /// The hooks of a lazy event source, which makes its core at once (LazyHooks.swift).
  @usableFromInline var lazy: LazyHooks?
  /// The open transaction that wrote this property or array, if any (Transaction.swift).
  @usableFromInline var transaction: TransactionRecord?

  /// Allocates a core; `free` it with its source.
  @usableFromInline static func make(backlogLimit: Int) -> UnsafeMutablePointer<HubCore> {
    let core = UnsafeMutablePointer<HubCore>.allocate(capacity: 1)
    core.initialize(to: HubCore(queue: DeliveryQueue(backlogLimit: backlogLimit)))
    return core
  }

  @usableFromInline init(queue: consuming DeliveryQueue<Message>) {
    self.queue = queue
  }

  /// Gives a new queue subscription's target the source's pressure.
  @usableFromInline mutating func attach(_ target: DeliveryTarget) {
    let pressure = self.pressure ?? QueuePressure(limit: queue.backlogLimit)
    self.pressure = pressure
    _ = target.pressure.storeIfNil(pressure)
  }
}
