// The engine behind every lock-based source: one lock around `HubState`, and the
// drain loop that makes exactly one thread at a time deliver for a source.
//
// A commit (send, write, subscribe with replay) happens under the lock. If no thread
// is delivering for the source, the committing thread becomes the deliverer: it
// delivers its own commit outside the lock, then takes queued commits one by one
// until the queue is empty. Commits made meanwhile, by other threads or by handlers
// on this one, are queued with the snapshot of their commit time. This gives every
// subscription its deliveries one at a time, in commit order, without nesting.
//
// Overload: the queue holds at most `backlogLimit` messages for threads that may wait
// (they wait for room before committing, so their commit order is their queue order),
// and a deliverer past its turn hands the role to a thread waiting for it; see
// HubState.

/// The backlog limit of a source created without one.
@usableFromInline let defaultBacklogLimit = 1_024

/// One source's subscriptions, its stored value and its delivery queue: a handle to
/// one heap object (`HubStorage`) holding `HubState` and the mutex that guards it.
@usableFromInline
struct Hub<Message: Sendable, Stored>: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is in the state, guarded by the mutex the
  // storage holds; the waiting room is used only with that mutex.
  @usableFromInline let storage: HubStorage<Message, Stored>

  /// Makes a hub holding `stored`.
  @usableFromInline static func make(_ stored: Stored, backlogLimit: Int = defaultBacklogLimit) -> Hub {
    precondition(backlogLimit >= 1, "Evented: a backlog limit must be at least 1")
    return Hub(storage: .make(HubStorage.self, HubState(stored: stored, backlogLimit: backlogLimit)))
  }

  @usableFromInline init(storage: HubStorage<Message, Stored>) {
    self.storage = storage
  }

  /// The state and its lock (`withLock`, `lock()`, `unlock()`, `wait(_:)`).
  @inlinable var state: HubStorage<Message, Stored> {
    @inline(__always) get { storage }
  }

  @usableFromInline typealias Locked = UnsafeMutablePointer<HubState<Message, Stored>>

  /// Locks for a commit; first waits, if the backlog is full and this thread may wait,
  /// until there is room.
  @inlinable @inline(__always)
  func lockForCommit() -> Locked {
    let locked = state.lock()
    if locked.pointee.mayHaveToWait { waitForRoom(locked) }
    return locked
  }

  /// Waits, in arrival order, until the backlog has room, unless this thread is
  /// delivering for a source or running a handler.
  @usableFromInline func waitForRoom(_ locked: Locked) {
    guard !DeliveringThread.isDelivering else { return }
    let room = locked.pointee.waitingRoom()
    let ticket = room.nextTicket
    room.nextTicket &+= 1
    locked.pointee.roomWaiters += 1
    while room.servedTicket != ticket || locked.pointee.backlog >= locked.pointee.backlogLimit {
      state.wait(room)
    }
    room.servedTicket &+= 1
    locked.pointee.roomWaiters -= 1
    if locked.pointee.roomWaiters > 0 { room.broadcast() }
  }

  /// Whether messages are put in a `Parcel` as soon as they are made (see HubState).
  /// A constant in specialized code.
  @inlinable static var hasLargeMessages: Bool { MemoryLayout<Message>.size > largeMessageSize }

  /// Carries out `start` after a commit: unlocks, then delivers, or waits to take the
  /// delivering role over.
  @inlinable @inline(__always)
  func proceed(_ locked: Locked, _ start: consuming Start<Pending<Message>>) {
    switch consume start {
    case .none, .queued:
      state.unlock()
    case .deliver(let first):
      state.unlock()
      drain(first)
    case .heir(let ticket):
      waitForTurn(locked, ticket)
    }
  }

  /// Carries out `start` after the commit of a parcel, as the other `proceed`.
  @inlinable @inline(__always)
  func proceed(_ locked: Locked, _ start: consuming Start<Parcel<Message>>) {
    switch consume start {
    case .none, .queued:
      state.unlock()
    case .deliver(let first):
      state.unlock()
      drain(first)
    case .heir(let ticket):
      waitForTurn(locked, ticket)
    }
  }

  /// Waits until the deliverer hands the role over (then delivers the queue) or the
  /// message with `ticket` has been taken by a deliverer. Unlocks.
  @usableFromInline func waitForTurn(_ locked: Locked, _ ticket: UInt) {
    while true {
      if locked.pointee.handOff {
        locked.pointee.handOff = false
        locked.pointee.heirs -= 1
        locked.pointee.passLength = 0
        let first = locked.pointee.next()
        if locked.pointee.hasWaiters { locked.pointee.room?.broadcast() }
        state.unlock()
        if let first { drain(first) }
        return
      }
      if !locked.pointee.isDelivering || locked.pointee.taken >= ticket {
        locked.pointee.heirs -= 1
        state.unlock()
        return
      }
      state.wait(locked.pointee.waitingRoom())
    }
  }

  /// Commits `message` to the current subscriptions and delivers it.
  @inlinable @inline(__always)
  func send(_ message: Message) {
    // Two functions, so that neither keeps room for the other's temporaries.
    if Self.hasLargeMessages {
      send(large: message)
    } else {
      send(inline: message)
    }
  }

  /// Commits the small `message` to the current subscriptions and delivers it.
  @inlinable @inline(__always)
  func send(inline message: Message) {
    let locked = lockForCommit()
    proceed(locked, locked.pointee.commit(message))
  }

  /// Commits the large `message` to the current subscriptions, in a parcel, and
  /// delivers it.
  @usableFromInline func send(large message: Message) {
    send(parcel: Self.parcel(message))
  }

  /// Commits the large message in `parcel` to the current subscriptions and delivers it.
  @usableFromInline func send(parcel: Parcel<Message>) {
    let locked = lockForCommit()
    proceed(locked, locked.pointee.commit(parcel))
  }

  /// `message` in a parcel. Not inlined, so that the temporaries of making it are off
  /// the stack before it is delivered.
  @usableFromInline @inline(never)
  static func parcel(_ message: Message) -> Parcel<Message> {
    Parcel(message)
  }

  /// Runs `body` on the stored value under the lock; delivers the message it returns.
  ///
  /// `body` is user code run under the lock (a `modify` closure or `==`); it must not
  /// touch this source. What it returns is released after unlocking.
  @inlinable @inline(__always)
  func commit<Result, Failure: Error>(
    _ body: (inout Stored) throws(Failure) -> (Result, Message?)
  ) throws(Failure) -> Result {
    let locked = lockForCommit()
    let outcome: (Result, Message?)
    do throws(Failure) {
      outcome = try body(&locked.pointee.stored)
    } catch {
      state.unlock()
      throw error
    }
    guard let message = outcome.1 else {
      state.unlock()
      return outcome.0
    }
    commitLocked(locked, message)
    return outcome.0
  }

  /// Commits `message` under the lock taken by a write, unlocks and delivers. Out of
  /// line, so that a write that commits nothing (an equal value) stays small enough to
  /// be inlined where it is called.
  @inlinable @inline(never)
  func commitLocked(_ locked: Locked, _ message: Message) {
    proceed(locked, locked.pointee.commitWrite(message))
  }

  /// Runs `body` on the stored value under the lock, as ``commit(_:)`` does, for a large
  /// message: `body` returns its message in a parcel, and whether to commit it. The
  /// parcel is released after unlocking, committed or not.
  @inlinable
  func commitParcel<Result, Failure: Error>(
    _ body: (inout Stored) throws(Failure) -> (Result, Parcel<Message>?, commits: Bool)
  ) throws(Failure) -> Result {
    let locked = lockForCommit()
    let outcome: (Result, Parcel<Message>?, commits: Bool)
    do throws(Failure) {
      outcome = try body(&locked.pointee.stored)
    } catch {
      state.unlock()
      throw error
    }
    guard outcome.commits, let parcel = outcome.1 else {
      state.unlock()
      return outcome.0
    }
    proceed(locked, locked.pointee.commit(parcel))
    return outcome.0
  }

  /// Locks the state for an in-place mutation of the stored value by a yielding
  /// accessor. Balance with ``commitInPlace(_:_:)`` after the yield, or
  /// ``abandonInPlace()`` when the caller's access is aborted.
  @inlinable @inline(__always)
  func beginInPlace() -> Locked {
    lockForCommit()
  }

  /// Ends an in-place mutation begun by ``beginInPlace()``: commits `message`, if any,
  /// unlocks, and delivers. `message` is released after unlocking.
  @inlinable
  func commitInPlace(_ locked: Locked, _ message: Message?) {
    guard let message else {
      state.unlock()
      return
    }
    proceed(locked, locked.pointee.commitWrite(message))
  }

  /// Ends an in-place mutation whose access was aborted: unlocks without committing.
  @inlinable @inline(__always)
  func abandonInPlace() {
    state.unlock()
  }

  /// Reads the stored value under the lock.
  @inlinable @inline(__always)
  func read<Result>(_ body: (borrowing Stored) -> Result) -> Result {
    state.withLock { body($0.stored) }
  }

  /// Adds `entry`; if `replay` is given, first delivers its message to `entry` alone,
  /// taken from the stored value at the same instant.
  @inlinable
  func subscribe(_ entry: Entry<Message>, replay: ((borrowing Stored) -> Message)? = nil) {
    var garbage = Garbage<Message>()
    guard let replay else {
      state.withLock { $0.add(entry, garbage: &garbage) }
      garbage.dispose()
      return
    }
    // Two functions, so that neither keeps room for the other's temporaries.
    if Self.hasLargeMessages {
      subscribe(entry, largeReplay: replay, garbage: &garbage)
    } else {
      subscribe(entry, inlineReplay: replay, garbage: &garbage)
    }
    garbage.dispose()
  }

  /// Subscribes with a replay whose message is small: it is delivered inline.
  @inlinable @inline(never)
  func subscribe(
    _ entry: Entry<Message>, inlineReplay replay: (borrowing Stored) -> Message, garbage: inout Garbage<Message>
  ) {
    let locked = lockForCommit()
    locked.pointee.add(entry, garbage: &garbage)
    let start = locked.pointee.start(.one(replay(locked.pointee.stored), entry))
    proceed(locked, start)
  }

  /// Subscribes with a replay whose message is large: it is made in a parcel.
  @inlinable @inline(never)
  func subscribe(
    _ entry: Entry<Message>, largeReplay replay: (borrowing Stored) -> Message, garbage: inout Garbage<Message>
  ) {
    let locked = lockForCommit()
    locked.pointee.add(entry, garbage: &garbage)
    let parcel = Self.parcel(replay, locked.pointee.stored)
    parcel.recipients = .one(entry)
    proceed(locked, locked.pointee.start(parcel))
  }

  /// The message `replay` makes of `stored`, in a parcel. Not inlined, so that the
  /// temporaries of making it are off the stack before it is delivered.
  @inlinable @inline(never)
  static func parcel(_ replay: (borrowing Stored) -> Message, _ stored: borrowing Stored) -> Parcel<Message> {
    Parcel(replay(stored))
  }

  /// Ends and removes every subscription; also ends, and waits for, those that a
  /// concurrent call removed and has not finished ending.
  func removeAll() {
    var garbage = Garbage<Message>()
    let ticket = state.withLock { $0.removeAll(into: &garbage) }
    garbage.dispose()
    var finished = Garbage<Message>()
    state.withLock { $0.finishRemoval(ticket, into: &finished) }
    _ = finished
  }

  /// Moves the incremental scan for dead owners on by two slots. A derived value calls
  /// it when it skips an update (a duplicate, a filtered-out event), so that observers
  /// whose owner died are found, and the derived value freed, even when it never
  /// delivers again.
  @usableFromInline func scanForDeadOwners() {
    var garbage = Garbage<Message>()
    state.withLock { state in
      if !state.slots.isEmpty { state.scanNext(into: &garbage) }
    }
    garbage.dispose()
  }

  /// The number of subscriptions whose owner is alive, after sweeping the others out.
  ///
  /// - Complexity: O(n) in the number of subscriptions.
  var liveCount: Int {
    var garbage = Garbage<Message>()
    let count = state.withLock { state in
      let endedAndRunning = state.sweep(into: &garbage)
      return state.live - endedAndRunning
    }
    garbage.dispose()
    return count
  }

  /// Takes the next queued delivery, or stops delivering (or hands the role over).
  @inlinable @inline(__always)
  func takeNext() -> Parcel<Message>? {
    let locked = state.lock()
    let next = locked.pointee.next()
    if locked.pointee.hasWaiters, locked.pointee.shouldWakeWaiters { locked.pointee.room?.broadcast() }
    state.unlock()
    return next
  }

  /// ``takeNext()`` after a pass that met an ended or ownerless subscription (the pass
  /// ended the ownerless ones): removes the ended subscriptions first, and releases
  /// them after unlocking.
  @inlinable @inline(never)
  func sweepAndTakeNext() -> Parcel<Message>? {
    var garbage = Garbage<Message>()
    let next = state.withLock { state in
      state.removeEnded(into: &garbage)
      let next = state.next()
      if state.hasWaiters, state.shouldWakeWaiters { state.room?.broadcast() }
      return next
    }
    garbage.dispose()
    return next
  }

  /// Delivers `first`, then every delivery queued meanwhile, then stops delivering.
  ///
  /// The thread counts as delivering meanwhile (it never waits for room in any
  /// backlog), and hands the role over between two messages when its turn is over and
  /// another thread waits for it.
  @inlinable
  func drain(_ first: Pending<Message>) {
    drain { first.deliver(me: $0) }
  }

  /// Delivers the parcel `first`, then every delivery queued meanwhile, as the other
  /// `drain`.
  @inlinable
  func drain(_ first: Parcel<Message>) {
    drain { first.deliver(me: $0) }
  }

  /// Runs `deliverFirst` (given the thread's ID; false if it met an ended or ownerless
  /// subscription), then the queue, counting the thread as delivering meanwhile.
  @inlinable @inline(__always)
  func drain(deliveringFirst deliverFirst: (UInt) -> Bool) {
    let me = currentThreadID()
    let depth = DeliveringThread.enter()
    defer { DeliveringThread.exit(depth) }
    drainQueue(me: me, foundGone: !deliverFirst(me))
  }

  /// Delivers the queued deliveries until the queue is empty or the role is handed
  /// over. Called by the deliverer after its first delivery; `foundGone` tells whether
  /// that delivery met a subscription that ended or lost its owner.
  @inlinable
  func drainQueue(me: UInt, foundGone: Bool) {
    var foundGone = foundGone
    while true {
      let next = foundGone ? sweepAndTakeNext() : takeNext()
      guard let next else { return }
      foundGone = !next.deliver(me: me)
    }
  }
}

/// The heap object of a `Hub`: its state, with the mutex as the tail element.
@usableFromInline
final class HubStorage<Message: Sendable, Stored>: LockStorage<HubState<Message, Stored>>, Detaching {
  /// Ends every subscription without waiting, so that deliveries already submitted to
  /// a queue and not started never run: a source that is gone delivers nothing more.
  /// A handler running on another thread finishes and then releases itself.
  deinit {
    let entries = withLock { state in
      var entries = ContiguousArray<Entry<Message>>()
      for case let entry? in state.slots { entries.append(entry) }
      for removal in state.removals.values { entries.append(contentsOf: removal) }
      return entries
    }
    for entry in entries { entry.endSwept() }
  }

}
