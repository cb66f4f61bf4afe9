// The state of one source, guarded by its hub's lock.
//
// - `slots` lists the subscriptions in the order they subscribed. Cancelling takes no
//   lock: an ended subscription stays listed until the source meets it. Every
//   subscribe first drops ended subscriptions from the end of the list (so that a
//   subscription made and cancelled is replaced where it was), then checks the next
//   two slots (`scanCursor`) and vacates an ended or ownerless one, leaving a nil
//   tombstone. No path drops an ended subscription whose handler still runs
//   (`isDone`): `removeAllObservers()` must find it to wait for it. Tombstones are
//   compacted once they
//   outnumber the live subscriptions, and all of them are swept together when the
//   slots have doubled since the last sweep (amortized O(1) per subscribe), after a
//   delivery pass that met an ended or ownerless subscription, and when
//   `observerCount` is read. `slots` is never shared outside the lock, so it may be
//   mutated in place.
// - `snapshot` is an immutable array of the subscriptions, built on demand by a send
//   and dropped whenever `slots` changes. It is never mutated, only replaced, so a
//   delivering thread can iterate it without the lock.
// - `pending` is the FIFO of committed deliveries that wait for the delivering thread
//   (`isDelivering`): a send or write made while another delivery pass runs is
//   committed at once and queued here, with the snapshot of its commit, in a `Parcel`
//   on the heap.
// - Large messages: a message of more than `largeMessageSize` bytes is put in a
//   `Parcel` when it is made, and only the reference travels: through the commit, the
//   queue and the delivery. A `Pending` or `Start` that held it inline would cost a
//   copy of it on the stack in every frame it passes through.
// - The backlog (`pending` from `pendingHead`) is bounded by `backlogLimit` for threads
//   that may wait: one that is not delivering for any source and not running a handler
//   waits before committing while the backlog is full, in arrival order
//   (the tickets of `room`, `roomWaiters`). Threads inside a handler
//   never wait and may exceed the limit.
// - Hand-off: a deliverer's turn (`passLength`, the messages it delivered) lasts at
//   most its own message plus `backlogLimit` others when another thread wants the
//   role. A thread that may wait and commits while the deliverer is past that length
//   queues its message and becomes an heir (`heirs`); the deliverer, between two
//   messages, sets `handOff` and returns; one heir takes the role and continues with
//   the head of the queue. An heir whose own message has been taken by then
//   (`taken` >= its ticket in `queued`) leaves.
// - `removals` holds the subscriptions taken out by each `removeAllObservers()` call
//   that is still ending them (keyed by a ticket). A concurrent call ends and waits
//   for those too, so that no call returns while a subscription it did not see is
//   still to be ended or still running on another thread.
//
// Nothing that may hold user objects is released under the lock: removed
// subscriptions, replaced snapshots and owners loaded to test liveness are moved into
// a `Garbage` that the caller drops after unlocking.

/// A committed delivery that has not run yet, held inline (a small message).
@usableFromInline
enum Pending<Message> {
  /// To every subscription of the snapshot taken at commit time.
  case all(Message, ContiguousArray<Entry<Message>>)
  /// To one new subscription only (a property's current value).
  case one(Message, Entry<Message>)

  /// Delivers the message to its recipients.
  ///
  /// - Returns: false if a recipient has ended or its owner is gone.
  @inlinable @inline(__always)
  func deliver(me: UInt) -> Bool where Message: Sendable {
    switch self {
    case .all(let message, let entries):
      var allLive = true
      entries.withUnsafeBufferPointer { buffer in
        for index in buffer.indices {
          let live = unretainedEntry(buffer, index)._withUnsafeGuaranteedRef { $0.deliver(message, me: me) }
          if !live { allLive = false }
        }
      }
      return allLive
    case .one(let message, let entry):
      return entry.deliver(message, me: me)
    }
  }
}

/// The entry at `index` of a snapshot's buffer, unretained, to be used at +0 without a
/// retain and release (two atomic operations) per delivery: the snapshot, which is
/// never mutated, keeps every entry alive for the pass. Reading the reference as a
/// raw pointer is what keeps it unretained; a `for` loop over the buffer, or a
/// subscript, copies it.
@inlinable @inline(__always)
func unretainedEntry<Message>(
  _ buffer: UnsafeBufferPointer<Entry<Message>>, _ index: Int
) -> Unmanaged<Entry<Message>> {
  let raw = UnsafeRawPointer(buffer.baseAddress.unsafelyUnwrapped)
  let opaque = raw.load(fromByteOffset: index &* MemoryLayout<Entry<Message>>.stride, as: UnsafeRawPointer.self)
  return Unmanaged.fromOpaque(opaque)
}

/// Whom a delivery in a `Parcel` is for.
@usableFromInline
enum Recipients<Message> {
  /// Not committed (yet): nobody.
  case none
  /// Every subscription of the snapshot taken at commit time.
  case all(ContiguousArray<Entry<Message>>)
  /// One new subscription only (a property's current value).
  case one(Entry<Message>)
}

/// Messages larger than this many bytes are put in a `Parcel` as soon as they are made.
@usableFromInline let largeMessageSize = 1_024

/// A delivery on the heap: a queued one, or one whose message is large.
///
/// The message is set when the parcel is made; the recipients when it is committed,
/// under the hub's lock, through which the parcel then passes to the delivering thread.
@usableFromInline
final class Parcel<Message> {
  /// The message. A constant, so that it is passed on in place, never copied out.
  @usableFromInline let message: Message
  @usableFromInline var recipients: Recipients<Message> = .none

  @inlinable init(_ message: consuming Message) {
    self.message = message
  }

  @inlinable convenience init(_ delivery: consuming Pending<Message>) {
    switch consume delivery {
    case .all(let message, let entries):
      self.init(message)
      recipients = .all(entries)
    case .one(let message, let entry):
      self.init(message)
      recipients = .one(entry)
    }
  }

  /// Delivers the message to its recipients.
  ///
  /// - Returns: false if the owner of a recipient is gone.
  @inlinable func deliver(me: UInt) -> Bool where Message: Sendable {
    switch recipients {
    case .none: return true
    case .all(let entries):
      var allLive = true
      entries.withUnsafeBufferPointer { buffer in
        for index in buffer.indices {
          let live = unretainedEntry(buffer, index)._withUnsafeGuaranteedRef { deliver(to: $0, me: me) }
          if !live { allLive = false }
        }
      }
      return allLive
    case .one(let entry): return deliver(to: entry, me: me)
    }
  }

  /// Delivers the message to `entry`. Not inlined, so that the room a delivery takes
  /// on the stack is taken once, not once per place that delivers.
  @inlinable @inline(never)
  func deliver(to entry: Entry<Message>, me: UInt) -> Bool where Message: Sendable {
    entry.deliver(message, me: me)
  }
}

/// What a committing thread does after its commit.
@usableFromInline
enum Start<Delivery> {
  /// Nothing to deliver.
  case none
  /// Queued for the thread delivering now.
  case queued
  /// This thread is the deliverer now: deliver this, then the queue.
  case deliver(Delivery)
  /// Queued; the deliverer is past its turn: wait to take the role over, until the
  /// message with this ticket has been taken.
  case heir(UInt)
}

/// What a transition took out of the state, to release after unlocking.
@usableFromInline
struct Garbage<Message> {
  @usableFromInline var snapshot: ContiguousArray<Entry<Message>>?
  /// Removed by `removeAllObservers` (this call's and those of calls still ending
  /// theirs): ended with a wait, as `cancel()` does.
  @usableFromInline var removed: ContiguousArray<Entry<Message>> = []
  /// The list of a finished `removeAllObservers` call, dropped after unlocking.
  @usableFromInline var finishedRemoval: ContiguousArray<Entry<Message>>?
  /// Removed by a scan or a sweep: already ended, or ownerless; ended without a wait.
  /// The first two are kept apart, so that a scan (two slots) allocates no array.
  @usableFromInline var sweptFirst: Entry<Message>?
  @usableFromInline var sweptSecond: Entry<Message>?
  @usableFromInline var swept: [Entry<Message>] = []
  @usableFromInline var owners: [AnyObject] = []
  /// Owners loaded by the incremental scan, released after unlocking.
  @usableFromInline var scannedOwners: (AnyObject?, AnyObject?)

  @inlinable init() {}

  /// Keeps a removed subscription to end after unlocking.
  @inlinable mutating func sweep(_ entry: consuming Entry<Message>) {
    if sweptFirst == nil {
      sweptFirst = entry
    } else if sweptSecond == nil {
      sweptSecond = entry
    } else {
      swept.append(entry)
    }
  }

  /// Ends the removed subscriptions, waiting for any of them that runs on another
  /// thread, and the swept ones without waiting. Must be called without any lock held.
  @inlinable func dispose() {
    // First end the subscriptions that are not running, so that none of them starts
    // while this waits for one that is; then end (or wait for) every one.
    for entry in removed where entry.runner == 0 { entry.end() }
    for entry in removed { entry.end() }
    sweptFirst?.endSwept()
    sweptSecond?.endSwept()
    for entry in swept { entry.endSwept() }
  }
}

@usableFromInline
struct HubState<Message, Stored> {
  @usableFromInline var stored: Stored
  @usableFromInline var slots: ContiguousArray<Entry<Message>?> = []
  @usableFromInline var live = 0
  @usableFromInline var snapshot: ContiguousArray<Entry<Message>>?
  @usableFromInline var pending: ContiguousArray<Parcel<Message>?> = []
  @usableFromInline var pendingHead = 0
  /// The live count found by the last sweep.
  @usableFromInline var liveAtSweep = 0
  /// Where the incremental scan for dead owners continues.
  @usableFromInline var scanCursor = 0
  /// The subscriptions of each `removeAllObservers()` call still ending them.
  @usableFromInline var removals: [UInt: ContiguousArray<Entry<Message>>] = [:]
  @usableFromInline var nextRemoval: UInt = 0
  /// The most messages that may wait for the deliverer, for threads that may wait.
  @usableFromInline let backlogLimit: Int
  /// Messages delivered by the current deliverer since it took the role.
  @usableFromInline var passLength = 0
  /// Threads waiting to take the delivering role over.
  @usableFromInline var heirs = 0
  /// Messages ever queued, and ever taken from the queue.
  @usableFromInline var queued: UInt = 0
  @usableFromInline var taken: UInt = 0
  /// Threads waiting for room in the backlog, served in ticket order (the tickets are
  /// in `room`).
  @usableFromInline var roomWaiters = 0
  /// Where threads wait for room in the backlog or for the delivering role; made when
  /// a thread first has to wait, so that an idle source does not pay for it.
  @usableFromInline var room: Condition?
  @usableFromInline var isDelivering = false
  /// The deliverer stepped down; the first heir to wake takes the role.
  @usableFromInline var handOff = false

  init(stored: Stored, backlogLimit: Int) {
    self.stored = stored
    self.backlogLimit = backlogLimit
  }

  /// The waiting room, made on first use.
  @usableFromInline mutating func waitingRoom() -> Condition {
    if let room { return room }
    let made = Condition()
    room = made
    return made
  }

  /// The number of committed messages waiting for the deliverer.
  @inlinable var backlog: Int { pending.count - pendingHead }

  /// Whether a committing thread that may wait must check for room first.
  @inlinable var mayHaveToWait: Bool { roomWaiters > 0 || backlog >= backlogLimit }

  /// Whether a waiting thread should be woken after a change.
  @inlinable var hasWaiters: Bool { roomWaiters > 0 || heirs > 0 }

  /// Whether the deliverer, having just taken a message, handed the role over or
  /// stopped, should wake the waiters: heirs on a hand-off or a stop; threads waiting
  /// for room once the backlog is down to half the limit, so that they do not wake
  /// for every message taken.
  @inlinable var shouldWakeWaiters: Bool {
    handOff || !isDelivering || (roomWaiters > 0 && backlog <= backlogLimit / 2)
  }

  /// The subscriptions as of now, as an immutable array.
  @inlinable mutating func currentSnapshot() -> ContiguousArray<Entry<Message>> {
    if let snapshot { return snapshot }
    var fresh = ContiguousArray<Entry<Message>>()
    fresh.reserveCapacity(live)
    for case let entry? in slots { fresh.append(entry) }
    snapshot = fresh
    return fresh
  }

  /// Commits `message` to every current subscription.
  ///
  /// - Returns: the delivery to run now, or nil when there is nobody to deliver to or
  ///   another thread is delivering (then it is queued for that thread).
  @inlinable mutating func commit(_ message: Message) -> Start<Pending<Message>> {
    guard live > 0 else { return .none }
    return start(.all(message, currentSnapshot()))
  }

  /// ``commit(_:)`` for a write: always inlined into the write path, which the
  /// compiler would otherwise split at this call (and then destroy the delivery
  /// through its generic value witnesses), while a send is better off calling it.
  @inlinable @inline(__always) mutating func commitWrite(_ message: Message) -> Start<Pending<Message>> {
    guard live > 0 else { return .none }
    return start(.all(message, currentSnapshot()))
  }

  /// Commits the large message in `parcel` to every current subscription.
  @inlinable mutating func commit(_ parcel: Parcel<Message>) -> Start<Parcel<Message>> {
    guard live > 0 else { return .none }
    parcel.recipients = .all(currentSnapshot())
    return start(parcel)
  }

  /// Runs `delivery` now if nobody is delivering, else queues it.
  @inlinable mutating func start(_ delivery: Pending<Message>) -> Start<Pending<Message>> {
    if isDelivering {
      return enqueue(Parcel(delivery))
    }
    isDelivering = true
    passLength = 1
    return .deliver(delivery)
  }

  /// Runs the delivery in `parcel` now if nobody is delivering, else queues it.
  @inlinable mutating func start(_ parcel: Parcel<Message>) -> Start<Parcel<Message>> {
    if isDelivering {
      return enqueue(parcel)
    }
    isDelivering = true
    passLength = 1
    return .deliver(parcel)
  }

  /// Queues `parcel` for the thread delivering now.
  @inlinable mutating func enqueue<Delivery>(_ parcel: Parcel<Message>) -> Start<Delivery> {
    pending.append(parcel)
    queued &+= 1
    if passLength > backlogLimit, !DeliveringThread.isDelivering {
      heirs += 1
      return .heir(queued)
    }
    return .queued
  }

  /// The next queued delivery, or nil after marking delivery finished or handing the
  /// role to an heir.
  @inlinable mutating func next() -> Parcel<Message>? {
    guard pendingHead < pending.count else {
      isDelivering = false
      return nil
    }
    if passLength > backlogLimit, heirs > 0 {
      handOff = true
      return nil
    }
    passLength += 1
    taken &+= 1
    if pending.count - pendingHead > 1, deliversOutOfOrder() {
      let delivery = pending.removeLast()
      return delivery
    }
    let delivery = pending[pendingHead]
    pending[pendingHead] = nil
    pendingHead += 1
    if pendingHead == pending.count {
      pending.removeAll(keepingCapacity: pending.count <= 64)
      pendingHead = 0
    } else if pendingHead >= 32, pendingHead * 2 >= pending.count {
      // Under steady contention the queue may never run empty: drop the taken (nil)
      // slots so it does not grow by one per delivery.
      pending.removeSubrange(0..<pendingHead)
      pendingHead = 0
    }
    return delivery
  }

  /// Appends a subscription; sweeps first once the slots have grown to twice the
  /// live count of the last sweep (plus 32), so each sweep is paid for by as many adds.
  @inlinable mutating func add(_ entry: Entry<Message>, garbage: inout Garbage<Message>) {
    trimTail(into: &garbage)
    if slots.count >= 2 * liveAtSweep + 32 { sweep(into: &garbage) }
    slots.append(entry)
    live += 1
    dropSnapshot(into: &garbage)
    scanNext(into: &garbage)
  }

  /// Removes up to two ended subscriptions (whose handler is not running; see
  /// `isDone`) or tombstones from the end of the slots.
  /// A subscription made and cancelled before the next subscribe (a reused cell, a
  /// screen opened and closed) is thus replaced where it was, in constant time: churn
  /// at the end of the list neither grows the slots nor waits for a sweep. The order
  /// of the others is untouched.
  @inlinable mutating func trimTail(into garbage: inout Garbage<Message>) {
    for _ in 0..<2 {
      guard let last = slots.last else { return }
      guard let entry = last else {
        slots.removeLast()
        continue
      }
      if !entry.isDone { return }
      slots.removeLast()
      live -= 1
      garbage.sweep(entry)
      dropSnapshot(into: &garbage)
    }
  }

  /// Checks the next two slots for a subscription that ended or whose owner is gone,
  /// and removes it: every subscribe moves the scan on, so the subscriptions of dead
  /// owners are found within half as many subscribes as there are slots, even
  /// without a send.
  @inlinable mutating func scanNext(into garbage: inout Garbage<Message>) {
    for step in 0..<2 {
      if scanCursor >= slots.count { scanCursor = 0 }
      let index = scanCursor
      scanCursor += 1
      guard let entry = slots[index] else { continue }
      if entry.isEnded {
        // One still running stays listed until it returns (see `isDone`).
        if entry.isDone { vacate(index, into: &garbage) }
        continue
      }
      if entry.isOwnedByHandle { continue }
      if let owner = entry.liveOwner {
        if step == 0 { garbage.scannedOwners.0 = owner } else { garbage.scannedOwners.1 = owner }
        continue
      }
      if keepsDeadOwners() { continue }
      vacate(index, into: &garbage)
    }
    sweepIfMostlyTombstones(into: &garbage)
  }

  /// Leaves a tombstone at `index` and moves its subscription into `garbage`.
  @inlinable mutating func vacate(_ index: Int, into garbage: inout Garbage<Message>) {
    guard let entry = slots[index] else { return }
    slots[index] = nil
    live -= 1
    garbage.sweep(entry)
    dropSnapshot(into: &garbage)
  }

  /// Sweeps once tombstones outnumber the live subscriptions (or 32).
  @inlinable mutating func sweepIfMostlyTombstones(into garbage: inout Garbage<Message>) {
    if slots.count - live > Swift.max(live, 32) { sweep(into: &garbage) }
  }

  /// Moves the cached snapshot, if any, into `garbage`.
  @inlinable mutating func dropSnapshot(into garbage: inout Garbage<Message>) {
    if let old = snapshot.take() { garbage.snapshot = old }
  }

  /// Removes every subscription. `garbage.removed` receives them together with those
  /// that concurrent calls took and are still ending.
  ///
  /// - Returns: the ticket to pass to ``finishRemoval(_:into:)`` once they are ended.
  @usableFromInline mutating func removeAll(into garbage: inout Garbage<Message>) -> UInt {
    var taken = ContiguousArray<Entry<Message>>()
    taken.reserveCapacity(live)
    for case let entry? in slots {
      taken.append(entry)
    }
    for other in removals.values { garbage.removed.append(contentsOf: other) }
    garbage.removed.append(contentsOf: taken)
    let ticket = nextRemoval
    nextRemoval &+= 1
    removals[ticket] = taken
    slots = []
    live = 0
    dropSnapshot(into: &garbage)
    return ticket
  }

  /// Forgets the subscriptions of a finished `removeAll`.
  @usableFromInline mutating func finishRemoval(_ ticket: UInt, into garbage: inout Garbage<Message>) {
    garbage.finishedRemoval = removals.removeValue(forKey: ticket)
  }

  /// Drops tombstones and subscriptions that ended or whose owner is gone.
  ///
  /// - Complexity: O(n) in the number of slots.
  ///
  /// - Returns: How many of the kept subscriptions have ended (their handler still
  ///   runs; see `isDone`): `live` less these is the number of live subscriptions.
  @inlinable @discardableResult
  mutating func sweep(into garbage: inout Garbage<Message>) -> Int {
    var endedAndRunning = 0
    compact(into: &garbage) { entry, garbage in
      if entry.isEnded {
        if entry.isDone { return false }
        endedAndRunning += 1
        return true
      }
      if entry.isOwnedByHandle { return true }
      if let owner = entry.liveOwner {
        garbage.owners.append(owner)
        return true
      }
      return keepsDeadOwners()
    }
    return endedAndRunning
  }

  /// Drops tombstones and the subscriptions that ended, without looking at owners:
  /// after a delivery pass, which ends the subscriptions whose owner it found gone.
  ///
  /// - Complexity: O(n) in the number of slots.
  @inlinable mutating func removeEnded(into garbage: inout Garbage<Message>) {
    compact(into: &garbage) { entry, _ in !entry.isDone }
  }

  /// Keeps the subscriptions for which `keep` is true, in order, and moves the others
  /// into `garbage`. Compacts in place: kept subscriptions move down by swapping, so
  /// nothing is retained or released for them and no new array is made.
  @inlinable mutating func compact(
    into garbage: inout Garbage<Message>, keeping keep: (Entry<Message>, inout Garbage<Message>) -> Bool
  ) {
    var kept = 0
    for index in slots.indices {
      guard let entry = slots[index] else { continue }
      if keep(entry, &garbage) {
        if kept != index { slots.swapAt(kept, index) }
        kept += 1
      } else {
        slots[index] = nil
        garbage.sweep(entry)
      }
    }
    if kept != slots.count || kept != live { dropSnapshot(into: &garbage) }
    slots.removeLast(slots.count - kept)
    live = kept
    liveAtSweep = live
    if scanCursor > kept { scanCursor = 0 }
  }

}
