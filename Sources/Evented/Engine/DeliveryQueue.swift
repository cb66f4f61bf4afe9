// Promises 3 and 4 (serial delivery in commit order) and the overload bound: which
// thread delivers for a source, and what waits for it. Guarded by the hub's lock.
//
// - One thread at a time delivers (`isDelivering`). A commit made while another
//   thread delivers is queued in `pending` (from `pendingHead`), in commit order, for
//   that thread; the deliverer takes the queue one delivery at a time until it is empty.
// - `flags`, the one field read and written without the lock: whether a thread
//   delivers, and whether deliveries are queued. Under the lock they change together
//   with `pending`; a deliverer that finds nothing queued stops with one
//   compare-and-exchange (`tryStop`), without a lock round trip, and a commit that
//   finds a deliverer marks the queue with a compare-and-exchange, so that one of the
//   two always sees the other.
// - The backlog (`pending` from `pendingHead`) is bounded by `backlogLimit` for threads
//   that may wait: one that is not delivering for any source and not running a handler
//   waits before committing while the backlog is full, let in in arrival order (the
//   tickets of `room`, `roomWaiters`): once the backlog is down to half the limit, every
//   waiter there is room for may commit at once. Threads inside a handler never wait
//   and may exceed the limit.
// - Hand-off: a deliverer's turn (`passLength`, the deliveries it made) lasts at most
//   its own delivery plus `backlogLimit` others when another thread wants the role. A
//   thread that may wait and commits while the deliverer is past that length queues its
//   delivery and becomes an heir (`heirs`); one that commits from inside a handler (a
//   derived event source's forward) becomes one once that handler has returned, at its
//   outermost frame's boundary (`claimTurn`). The deliverer, between two deliveries,
//   sets `handOff` and stops; one heir takes the role and continues with the head of
//   the queue. An heir whose own delivery has been taken by then (`taken` >= its ticket
//   in `queued`) leaves.
//
// Transitions take what they need as arguments (whether the calling thread may wait, a
// planted bug) and return what the hub must do; none reads a thread-local or a switch.

import Synchronization

/// What a committing thread does after its commit.
@usableFromInline
enum Start {
  /// Queued for the thread delivering now.
  case queued
  /// This thread is the deliverer now: deliver its commit, then the queue.
  case deliver
  /// Queued; the deliverer is past its turn: wait to take the role over, until the
  /// delivery with this ticket has been taken.
  case heir(UInt)
}

/// What a waiting heir does next.
@usableFromInline
enum HeirStep<Message: Sendable> {
  /// The role was handed over: wake the other waiters, then deliver this (if
  /// anything) and the queue.
  case takeOver(Parcel<Message>?, wake: Condition?)
  /// Its delivery was taken, or delivery stopped: nothing left to do.
  case leave
  /// Wait on the room and ask again.
  case wait(Condition)
}

/// The delivering role and the queue of one source; a value guarded by the hub's lock,
/// except `flags` (see above).
@usableFromInline
struct DeliveryQueue<Message: Sendable>: ~Copyable {
  /// Committed deliveries waiting for the deliverer; nil before `pendingHead` (taken).
  @usableFromInline var pending: ContiguousArray<Parcel<Message>?> = []
  /// The index of the next delivery to take.
  @usableFromInline var pendingHead = 0
  /// The most deliveries that may wait, for threads that may wait.
  @usableFromInline let backlogLimit: Int
  /// `delivering` while a thread delivers (the deliverer); `queuedFlag` while `pending`
  /// has deliveries. The deliverer clears `delivering` without the lock (`tryStop`)
  /// when `queuedFlag` is clear.
  @usableFromInline let flags = Atomic<UInt>(0)
  @usableFromInline static var delivering: UInt { 1 }
  @usableFromInline static var queuedFlag: UInt { 2 }
  /// Deliveries made by the current deliverer since it took the role.
  @usableFromInline var passLength = 0
  /// Threads waiting to take the delivering role over.
  @usableFromInline var heirs = 0
  /// The deliverer stepped down; the first heir to wake takes the role.
  @usableFromInline var handOff = false
  /// Deliveries ever queued, and ever taken from the queue (the heirs' tickets).
  @usableFromInline var queued: UInt = 0
  @usableFromInline var taken: UInt = 0
  /// Threads waiting for room in the backlog, served in ticket order (the tickets are
  /// in `room`).
  @usableFromInline var roomWaiters = 0
  /// Where threads wait for room or for the role; made when a thread first has to
  /// wait, so that an idle source does not pay for it.
  @usableFromInline var room: Condition?

  @usableFromInline init(backlogLimit: Int) {
    self.backlogLimit = backlogLimit
  }

  /// Whether a thread is delivering (the deliverer).
  @inlinable var isDelivering: Bool { flags.load(ordering: .acquiring) & Self.delivering != 0 }

  /// The number of committed deliveries waiting for the deliverer.
  @inlinable var backlog: Int { pending.count - pendingHead }

  /// Whether a committing thread that may wait must check for room first.
  @inlinable var mayHaveToWait: Bool { roomWaiters > 0 || backlog >= backlogLimit }

  /// The room to wake after the deliverer took a delivery, handed the role over or
  /// stopped: heirs on a hand-off or a stop; threads asleep waiting for room once the
  /// backlog is down to half the limit, so that they do not wake for every delivery
  /// taken, nor the deliverer broadcast to threads that are awake already.
  @inlinable var roomToWake: Condition? {
    guard roomWaiters > 0 || heirs > 0, let room else { return nil }
    if heirs > 0, handOff || !isDelivering || backlog == 0 { return room }
    if roomWaiters > 0, room.asleep > 0, !isDelivering || backlog <= backlogLimit / 2 { return room }
    return nil
  }

  /// Makes the committing thread the deliverer of `delivery` if nobody is delivering,
  /// else queues a copy of it. The delivery is only borrowed, so that the deliverer's
  /// path moves it on to the drain without a second reference to it.
  ///
  /// The caller that becomes the deliverer records itself in ``deliverer``.
  ///
  /// - Parameter mayWait: Whether the committing thread may wait (it is not delivering
  ///   for any source nor running a handler); asked only when it matters.
  @inlinable mutating func start<P: Package<Message>>(_ delivery: borrowing P, mayWait: () -> Bool) -> Start {
    var current = flags.load(ordering: .acquiring)
    while true {
      if current & Self.delivering == 0 {
        // Nobody delivers, so nobody writes `flags` without the lock.
        flags.store(Self.delivering, ordering: .relaxed)
        passLength = 1
        return .deliver
      }
      if current & Self.queuedFlag != 0 { break }
      // The deliverer may stop meanwhile: then this thread delivers instead.
      let marked = flags.compareExchange(
        expected: current, desired: current | Self.queuedFlag, ordering: .acquiringAndReleasing)
      if marked.exchanged { break }
      current = marked.original
    }
    enqueue((copy delivery).parcel())
    if passLength > backlogLimit, mayWait() {
      heirs += 1
      _checkInvariants()
      return .heir(queued)
    }
    return .queued
  }

  /// Queues `parcel`, committed by the calling thread, for the deliverer. Out of line,
  /// so that the path of a commit nobody else delivers stays small.
  @inlinable @inline(never)
  mutating func enqueue(_ parcel: Parcel<Message>) {
    pending.append(parcel)
    queued &+= 1
  }

  /// Whether another thread delivers and is past its turn: a thread that queued a
  /// delivery from inside a handler, where it cannot wait, claims the role at its
  /// outermost frame's boundary (``claimTurn()``).
  @inlinable var isPastTurn: Bool { passLength > backlogLimit && isDelivering }

  /// Makes the calling thread an heir, if the deliverer is past its turn and deliveries
  /// wait: the claim of a thread that queued one from inside a handler (see
  /// `Hub.forward`), made once that handler has returned.
  ///
  /// - Returns: The ticket to wait with (the newest delivery queued), or nil.
  @inlinable mutating func claimTurn() -> UInt? {
    guard isPastTurn, backlog > 0 else { return nil }
    heirs += 1
    _checkInvariants()
    return queued
  }

  /// Stops delivering if nothing is queued: the deliverer's step after a delivery,
  /// without the lock.
  ///
  /// - Returns: false if deliveries are queued: take the next under the lock.
  @inlinable func tryStop() -> Bool {
    flags.compareExchange(expected: Self.delivering, desired: 0, ordering: .releasing).exchanged
  }

  /// The next queued delivery, or nil after stopping (or handing the role to an heir).
  ///
  /// - Parameter newestFirst: Take the newest instead (a planted bug).
  @inlinable mutating func next(newestFirst: Bool = false) -> Parcel<Message>? {
    defer { _checkInvariants() }
    guard pendingHead < pending.count else {
      flags.store(0, ordering: .releasing)
      return nil
    }
    if passLength > backlogLimit, heirs > 0 {
      handOff = true
      return nil
    }
    passLength += 1
    taken &+= 1
    if newestFirst, pending.count - pendingHead > 1 {
      return pending.removeLast()
    }
    let delivery = pending[pendingHead]
    pending[pendingHead] = nil
    pendingHead += 1
    if pendingHead == pending.count {
      pending.removeAll(keepingCapacity: pending.count <= 64)
      pendingHead = 0
      flags.store(Self.delivering, ordering: .relaxed)
    } else if pendingHead >= 32, pendingHead * 2 >= pending.count {
      // Under steady contention the queue may never run empty: drop the taken (nil)
      // slots so it does not grow by one per delivery.
      pending.removeSubrange(0..<pendingHead)
      pendingHead = 0
    }
    return delivery
  }

  /// The next step of an heir waiting with `ticket`.
  @inlinable mutating func heirStep(_ ticket: UInt, newestFirst: Bool = false) -> HeirStep<Message> {
    defer { _checkInvariants() }
    if handOff {
      handOff = false
      heirs -= 1
      passLength = 0
      let first = next(newestFirst: newestFirst)
      // The other waiters woke for the hand-off; they sleep again only if nothing
      // changed for them, unless the queue was empty and nobody delivers now.
      return .takeOver(first, wake: roomToWake)
    }
    if !isDelivering || taken >= ticket {
      heirs -= 1
      return .leave
    }
    return .wait(waitingRoom())
  }

  /// Takes a ticket for room in the backlog.
  @inlinable mutating func enterRoom() -> (Condition, UInt) {
    let room = waitingRoom()
    let ticket = room.nextTicket
    room.nextTicket &+= 1
    roomWaiters += 1
    return (room, ticket)
  }

  /// Whether the waiter with `ticket` may commit now: there is room, and for it too
  /// after the waiters ahead of it (those that have not left, as far as `leftTickets`
  /// tells) have committed. So every waiter allowed in lets those ahead in too, and
  /// when the backlog drains, every waiter there is room for commits as soon as it
  /// runs, without waiting for the others to take their turns one by one (a convoy:
  /// one thread woken and scheduled per commit).
  @inlinable func hasRoom(for ticket: UInt, in room: Condition) -> Bool {
    backlog < backlogLimit && Int(bitPattern: ticket &- room.leftTickets) < backlogLimit - backlog
  }

  /// Ends a wait for room that `hasRoom` allowed.
  ///
  /// - Returns: whether to wake the waiters asleep: some are, and there is room for the
  ///   first of them.
  @inlinable mutating func leaveRoom(_ room: Condition) -> Bool {
    room.leftTickets &+= 1
    roomWaiters -= 1
    _checkInvariants()
    return roomWaiters > 0 && room.asleep > 0 && backlog < backlogLimit
  }

  /// The waiting room, made on first use.
  @usableFromInline mutating func waitingRoom() -> Condition {
    if let room { return room }
    let made = Condition()
    room = made
    return made
  }

  /// Stops on an impossible state; in debug builds only, after each transition.
  @inlinable func _checkInvariants() {
    #if DEBUG
      if pendingHead > pending.count { preconditionFailure("Evented: the queue's head is past its end") }
      if heirs < 0 || roomWaiters < 0 { preconditionFailure("Evented: \(heirs) heirs, \(roomWaiters) room waiters") }
      if !isDelivering, backlog != 0 { preconditionFailure("Evented: \(backlog) deliveries queued with no deliverer") }
      if (flags.load(ordering: .relaxed) & Self.queuedFlag != 0) != (backlog > 0) {
        preconditionFailure("Evented: the queued flag disagrees with a backlog of \(backlog)")
      }
      if handOff, !isDelivering || heirs == 0 { preconditionFailure("Evented: a hand-off with no heir") }
      if taken > queued { preconditionFailure("Evented: \(taken) deliveries taken of \(queued) queued") }
    #endif
  }
}
