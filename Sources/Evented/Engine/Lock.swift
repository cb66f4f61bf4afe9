// Promise 1 (thread safety) and promise 2's one exception: every lock in Evented
// lives in this file, and so does every platform `#if`.
//
// `LockStorage<State>` is one heap object holding the state (as the header) and a
// `LockCell` (as the element): one atomic word, 0 when the lock is free, else the ID of
// the thread that holds it, with `waitersBit` set while threads are parked for it (so a
// free lock may read `waitersBit` alone, while the thread woken for it is on its way).
//
// - Locking is one compare-and-exchange (0 to the caller's ID, acquiring); unlocking
//   one exchange (to 0, releasing). A thread that finds the lock held spins briefly
//   while nobody is parked for it, yielding the processor after the first few tries,
//   then sets `waitersBit` and parks in the `ParkingLot`: a fixed table of places shared
//   by every lock, keyed by the lock's address, each a pthread mutex and a first-in
//   first-out queue of the threads parked there, each on a condition variable of its
//   own. So a lock costs 8 bytes, and an idle source no mutex of its own.
// - An unlock that finds `waitersBit` wakes one thread parked for that lock, the one
//   parked longest, and sets the bit again if others remain, under the place's mutex,
//   where a thread about to park checks the bit: no wake-up is lost. The woken thread
//   competes for the lock like any other (threads that run may take it first, so the
//   lock never waits for a sleeping thread to be scheduled); it parks again, at the
//   back of the queue, if it loses. Waking every parked thread instead made each
//   unlock a stampede once there were more threads than cores: every woken thread
//   re-spun and re-parked, and the lock ran at the pace of context switches
//   (Performance.md, "Many writers").
// - Thread Sanitizer: the acquiring and releasing operations on the word are compiled
//   into this module, so TSan sees every happens-before edge of the lock (it could not
//   see `Synchronization.Mutex`'s, whose atomics run inside a library TSan does not
//   instrument). The parking lot's pthread primitives only put threads to sleep; they
//   order nothing the lock relies on.
// - Reentrancy check: Evented never holds a lock across user code except two closures
//   that must run under it (a property's `modify` body, or an in-place mutation through
//   `value`, and the `==` of duplicate detection). If one of those uses the same source,
//   locking again would deadlock. A thread that finds the lock held compares the holder
//   with its own ID, and stops with a message if it is itself, in release builds too.
//
// `LockToken` is what `lock()` returns: a noncopyable value that gives access to the
// state. A function that takes a token as `consuming` takes over the caller's lock and
// unlocks it; one that borrows it does not. Dropping a token unlocks too.

import Synchronization

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A non-recursive lock stored with the state it guards; use only through `withLock`.
@usableFromInline
struct Lock<State>: @unchecked Sendable {
  // @unchecked Sendable: the lock word in `storage` guards the state stored beside it;
  // the state is touched only while the lock is held.
  @usableFromInline let storage: LockStorage<State>

  @usableFromInline init(storage: LockStorage<State>) {
    self.storage = storage
  }

  @inlinable static func make(_ initial: State) -> Lock<State> {
    Lock(storage: LockStorage.make(initial))
  }

  /// Runs `body` with exclusive access to the state.
  ///
  /// `body` must not call user code, with two documented exceptions (`modify` and
  /// `==`). Locking twice on one thread stops with a message instead of deadlocking.
  @inlinable @inline(__always)
  func withLock<Result, Failure: Error>(
    _ body: (inout State) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    try storage.withLock(body)
  }
}

/// The word of a lock: 0 when free, else the holder's thread ID, with `waitersBit` set
/// while threads are parked for it (free, it may hold `waitersBit` alone).
@usableFromInline
struct LockCell: ~Copyable {
  @usableFromInline let word = Atomic<UInt>(0)

  /// Set in the word while threads are parked for the lock. Thread IDs have their two
  /// low bits clear.
  @usableFromInline static let waitersBit: UInt = 1

  @usableFromInline init() {}

  /// Locks.
  ///
  /// - Parameter guarding: The type of the state the lock guards, named in the message
  ///   of a cycle of waits.
  @inlinable @inline(__always)
  func lock(as me: UInt, guarding: Any.Type) {
    if !word.compareExchange(expected: 0, desired: me, ordering: .acquiring).exchanged {
      lockContended(as: me, guarding: guarding)
    }
  }

  /// Locks a lock found held: spins briefly while no thread is parked for it, yielding
  /// the processor, then parks until an unlock wakes it, and tries again. Before parking,
  /// registers the wait in `LockCycles`, which stops the program with a message if the
  /// wait would never end.
  @usableFromInline @inline(never)
  func lockContended(as me: UInt, guarding: Any.Type) {
    var spins = 0
    var isRegistered = false
    defer { if isRegistered { LockCycles.shared.stopWaiting(me) } }
    while true {
      let current = word.load(ordering: .relaxed)
      let holder = current & ~Self.waitersBit
      if holder == me { lockedTwice() }
      if holder == 0 {
        // Free: take it, leaving the bit for the threads still parked.
        if word.compareExchange(expected: current, desired: current | me, ordering: .acquiring).exchanged { return }
        continue
      }
      // Spinning only while nobody is parked keeps a newcomer from spinning ahead of
      // threads that wait already; yielding lets the holder run when the machine has
      // fewer cores than threads that want it (Performance.md, "Many writers").
      if current & Self.waitersBit == 0, spins < Self.spinLimit {
        spins += 1
        if spins > Self.busySpins { sched_yield() }
        continue
      }
      if current & Self.waitersBit == 0,
        !word.compareExchange(expected: current, desired: current | Self.waitersBit, ordering: .relaxed).exchanged
      {
        continue
      }
      if !isRegistered {
        isRegistered = true
        withUnsafePointer(to: self) { cell in
          LockCycles.shared.startWaiting(me, for: cell, guarding: lockDescription(of: guarding))
        }
      }
      ParkingLot.park(on: self) {
        let now = word.load(ordering: .relaxed)
        return now & Self.waitersBit != 0 && now & ~Self.waitersBit != 0
      }
    }
  }

  /// Attempts in `lockContended` before parking while nobody is parked: the first
  /// `busySpins` only read the word, the others yield the processor first.
  @usableFromInline static var spinLimit: Int { 40 }
  @usableFromInline static var busySpins: Int { 10 }

  /// Unlocks, waking one of the threads parked for the lock, if any.
  @inlinable @inline(__always)
  func unlock() {
    if word.exchange(0, ordering: .releasing) & Self.waitersBit != 0 { ParkingLot.unparkOne(on: self) }
  }
}

/// Where threads sleep while a lock they want is held: a fixed table of places shared by
/// every lock, keyed by the lock's address. A place is a pthread mutex and the queue of
/// the threads parked there, first in first out, each sleeping on a condition variable
/// of its own, so that an unlock wakes one thread, not all.
@usableFromInline
enum ParkingLot {
  private static let places = ParkingPlaces(count: 64)

  /// Sleeps, if `shouldSleep` holds (asked with the place's mutex held), until an unpark
  /// of the same lock wakes this thread.
  @usableFromInline
  static func park(on cell: borrowing LockCell, while shouldSleep: () -> Bool) {
    let address = withUnsafePointer(to: cell) { UInt(bitPattern: $0) }
    let place = places.index(of: address)
    let mutex = places.mutexes + place
    pthread_mutex_lock(mutex)
    guard shouldSleep() else {
      pthread_mutex_unlock(mutex)
      return
    }
    // The waiter lives on this thread's stack: an unparker touches it only with the
    // place's mutex held, which this thread needs back before it returns.
    withUnsafeTemporaryAllocation(of: pthread_cond_t.self, capacity: 1) { conditionBuffer in
      let condition = conditionBuffer.baseAddress.unsafelyUnwrapped
      pthread_cond_init(condition, nil)
      withUnsafeTemporaryAllocation(of: ParkedThread.self, capacity: 1) { waiterBuffer in
        let waiter = waiterBuffer.baseAddress.unsafelyUnwrapped
        waiter.initialize(to: ParkedThread(address: address, condition: condition))
        places.enqueue(waiter, at: place)
        while !waiter.pointee.isWoken { pthread_cond_wait(condition, mutex) }
        pthread_mutex_unlock(mutex)
        waiter.deinitialize(count: 1)
      }
      pthread_cond_destroy(condition)
    }
  }

  /// Wakes the thread parked longest for `cell`, if any; if others remain parked for it,
  /// sets the lock's `waitersBit` again (the unlock cleared it), so that the next unlock
  /// wakes the next one.
  @usableFromInline @inline(never)
  static func unparkOne(on cell: borrowing LockCell) {
    let address = withUnsafePointer(to: cell) { UInt(bitPattern: $0) }
    let place = places.index(of: address)
    let mutex = places.mutexes + place
    pthread_mutex_lock(mutex)
    if let (waiter, othersRemain) = places.dequeue(address, at: place) {
      // The lock is alive: the thread just dequeued is inside its `lock()` until this
      // thread releases the place's mutex.
      if othersRemain { _ = cell.word.bitwiseOr(LockCell.waitersBit, ordering: .relaxed) }
      waiter.pointee.isWoken = true
      pthread_cond_signal(waiter.pointee.condition)
    }
    pthread_mutex_unlock(mutex)
  }
}

/// A thread parked for a lock, in the queue of its place.
private struct ParkedThread {
  /// The address of the lock's word.
  let address: UInt
  /// Where the thread sleeps.
  let condition: UnsafeMutablePointer<pthread_cond_t>
  var next: UnsafeMutablePointer<ParkedThread>?
  /// Set by the unpark that dequeued it.
  var isWoken = false

  init(address: UInt, condition: UnsafeMutablePointer<pthread_cond_t>) {
    self.address = address
    self.condition = condition
  }
}

/// The places of the parking lot: for each, a pthread mutex and the queue it guards.
private final class ParkingPlaces: @unchecked Sendable {
  // @unchecked Sendable: each place's mutex guards that place's queue.
  let mutexes: UnsafeMutablePointer<pthread_mutex_t>
  private let heads: UnsafeMutablePointer<UnsafeMutablePointer<ParkedThread>?>
  private let tails: UnsafeMutablePointer<UnsafeMutablePointer<ParkedThread>?>
  private let count: Int

  init(count: Int) {
    self.count = count
    mutexes = .allocate(capacity: count)
    heads = .allocate(capacity: count)
    tails = .allocate(capacity: count)
    heads.initialize(repeating: nil, count: count)
    tails.initialize(repeating: nil, count: count)
    for index in 0..<count { pthread_mutex_init(mutexes + index, nil) }
  }

  /// The place of the lock whose word is at `address`.
  func index(of address: UInt) -> Int {
    Int((address >> 4) % UInt(count))
  }

  /// Appends `waiter` to the queue of `place`.
  ///
  /// - Precondition: The place's mutex is held.
  func enqueue(_ waiter: UnsafeMutablePointer<ParkedThread>, at place: Int) {
    if let tail = tails[place] { tail.pointee.next = waiter } else { heads[place] = waiter }
    tails[place] = waiter
  }

  /// Removes the first thread of `place`'s queue parked for `address`.
  ///
  /// - Returns: That thread, and whether others parked for `address` remain; nil if
  ///   none was parked for it.
  /// - Precondition: The place's mutex is held.
  func dequeue(_ address: UInt, at place: Int) -> (UnsafeMutablePointer<ParkedThread>, othersRemain: Bool)? {
    var previous: UnsafeMutablePointer<ParkedThread>?
    var current = heads[place]
    while let waiter = current, waiter.pointee.address != address {
      previous = waiter
      current = waiter.pointee.next
    }
    guard let waiter = current else { return nil }
    let next = waiter.pointee.next
    if let previous { previous.pointee.next = next } else { heads[place] = next }
    if tails[place] == waiter { tails[place] = previous }
    var othersRemain = false
    var rest = next
    while let other = rest {
      if other.pointee.address == address {
        othersRemain = true
        break
      }
      rest = other.pointee.next
    }
    return (waiter, othersRemain)
  }
}

/// One heap object holding the state (as the header) and its lock (as the element), so
/// that reaching the state costs no exclusivity check.
///
/// A source's hub is a subclass (with no stored properties of its own), so that a
/// source's whole engine is one object.
@usableFromInline
class LockStorage<State>: ManagedBuffer<State, LockCell> {
  @inlinable static func make(_ initial: State) -> LockStorage<State> {
    make(LockStorage<State>.self, initial)
  }

  /// Allocates an instance of `type` (this class or a subclass) holding `initial`, with
  /// room for `tailWords` more words after the lock, which the caller initializes.
  @inlinable static func make<Storage: LockStorage<State>>(
    _ type: Storage.Type, _ initial: State, tailWords: Int = 0
  ) -> Storage {
    let buffer = type.create(minimumCapacity: 1 + tailWords) { _ in initial }
    let storage = unsafeDowncast(buffer, to: Storage.self)
    storage.withUnsafeMutablePointerToElements { $0.initialize(to: LockCell()) }
    return storage
  }

  deinit {
    withUnsafeMutablePointerToElements { _ = $0.deinitialize(count: 1) }
  }

  /// Whether the calling thread holds this lock: for the few checks that may run inside
  /// the user code a lock's holder calls (a `modify` closure, an `==`), and must then
  /// answer without it instead of locking twice.
  @usableFromInline final var isHeldByCurrentThread: Bool {
    let word = withUnsafeMutablePointerToElements { $0.pointee.word.load(ordering: .relaxed) }
    return word & ~LockCell.waitersBit == currentThreadID()
  }

  /// Locks and returns the token that unlocks.
  ///
  /// - Important: Stops with a message if the calling thread holds this lock already.
  @inlinable @inline(__always)
  final func lock() -> LockToken<State> {
    let cell = withUnsafeMutablePointerToElements { $0 }
    cell.pointee.lock(as: currentThreadID(), guarding: State.self)
    return LockToken(state: withUnsafeMutablePointerToHeader { $0 }, cell: cell)
  }

  @inlinable @inline(__always)
  final func withLock<Result, Failure: Error>(
    _ body: (inout State) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    let token = lock()
    do throws(Failure) {
      let result = try body(&token.state.pointee)
      token.unlock()
      return result
    } catch {
      token.unlock()
      throw error
    }
  }
}

/// Proof that the calling thread holds a lock, and access to the state it guards.
///
/// A function that takes it `consuming` takes over the caller's lock and unlocks it.
/// Dropping it unlocks.
@frozen @usableFromInline
struct LockToken<State>: ~Copyable {
  /// The guarded state; valid until the token is consumed.
  @usableFromInline let state: UnsafeMutablePointer<State>
  @usableFromInline let cell: UnsafeMutablePointer<LockCell>

  @inlinable @inline(__always)
  init(state: UnsafeMutablePointer<State>, cell: UnsafeMutablePointer<LockCell>) {
    self.state = state
    self.cell = cell
  }

  /// Unlocks.
  @inlinable @inline(__always)
  consuming func unlock() {
    cell.pointee.unlock()
    discard self
  }

  @inlinable deinit {
    cell.pointee.unlock()
  }

  /// Waits for a broadcast of `condition`, releasing the lock meanwhile. Re-check the
  /// state after every wake-up.
  @usableFromInline
  func wait(_ condition: Condition) {
    let seen = condition.generation
    condition.place.lock()
    cell.pointee.unlock()
    while condition.generation == seen { condition.place.wait() }
    condition.place.unlock()
    cell.pointee.lock(as: currentThreadID(), guarding: State.self)
  }
}

@usableFromInline @inline(never)
func lockedTwice() -> Never {
  fatalError(
    """
    Evented: a source was used from inside its own locked section, which would \
    deadlock. A property's `modify` closure and the `==` used to skip duplicate \
    values run under the property's lock: they must not read, write, observe or \
    modify the same property.
    """)
}

/// Where threads holding one `LockStorage` wait for a change of its state (a hub's
/// waiting room, see DeliveryQueue), allocated when a thread first waits.
@usableFromInline
final class Condition: @unchecked Sendable {
  // @unchecked Sendable: the tickets are guarded by the lock of the `LockStorage` this
  // condition belongs to; `generation` by that lock and `place` together (written
  // holding both, read holding either).
  // The fields skip the dynamic exclusivity checks of class properties (about 55 ns an
  // access here): the locks above keep their accesses apart (Performance.md, "Many
  // writers").
  /// Threads waiting for room in the backlog are let in in ticket order.
  @exclusivity(unchecked) @usableFromInline var nextTicket: UInt = 0
  /// The number of waiters that have left, in whatever order.
  @exclusivity(unchecked) @usableFromInline var leftTickets: UInt = 0
  /// Threads waiting for room that went to sleep since the last broadcast.
  @exclusivity(unchecked) @usableFromInline var asleep = 0
  /// Bumped by every broadcast.
  @exclusivity(unchecked) @usableFromInline var generation: UInt = 0
  /// Where waiters sleep.
  @usableFromInline let place = RawMutex()

  @usableFromInline init() {}

  /// Wakes every waiter so it re-checks its condition.
  ///
  /// - Precondition: Called with the lock of the `LockStorage` held.
  @usableFromInline
  func broadcast() {
    asleep = 0
    place.lock()
    generation &+= 1
    place.broadcast()
    place.unlock()
  }
}

/// An identifier of the calling thread, never zero, with its two low bits clear.
///
/// Read afresh on every call, by construction. The C library declares `pthread_self`
/// `const`, so the optimizer may compute it once and reuse the result; in an `async`
/// function that reuse can cross a suspension, after which the task may run on another
/// thread, and a lock taken after an `await` would carry the ID of the thread the task
/// left (release builds stopped with "locked twice" under actor handlers that await).
/// So the ID comes from a function of this module that is never inlined, and which
/// reaches `pthread_self` through a declaration of our own that says nothing of its
/// effects: to the optimizer, in this module and in any that inlines this one, it is an
/// opaque call that may read and write memory, never merged with another call.
@inlinable @inline(__always)
func currentThreadID() -> UInt {
  #if FaultInjection
    if Planted.threadIDAcrossAwait, let stale = StaleThread.id { return stale }
  #endif
  return freshThreadID()
}

/// See `currentThreadID()`.
@usableFromInline @inline(never)
func freshThreadID() -> UInt {
  UInt(bitPattern: opaquePthreadSelf())
}

/// `pthread_self`, declared without the C library's `const` attribute (see
/// `currentThreadID()`). A thread's `pthread_t` is one pointer-sized word on every
/// platform Evented supports, returned in the first return register, and the function
/// takes no arguments: the Swift and C calling conventions agree on such a call.
@_silgen_name("pthread_self")
private func opaquePthreadSelf() -> Int

/// A pthread mutex and condition variable: where threads sleep (`ParkingLot`,
/// `Condition`, `WaitRoom`). Not tied to any state.
@usableFromInline
final class RawMutex: @unchecked Sendable {
  // @unchecked Sendable: a pthread mutex and condition; the users say what they guard.
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private let condition: UnsafeMutablePointer<pthread_cond_t>

  init() {
    mutex = .allocate(capacity: 1)
    condition = .allocate(capacity: 1)
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    condition.deallocate()
    mutex.deallocate()
  }

  @usableFromInline func lock() {
    pthread_mutex_lock(mutex)
  }

  @usableFromInline func unlock() {
    pthread_mutex_unlock(mutex)
  }

  func withLock<Result>(_ body: () -> Result) -> Result {
    lock()
    defer { unlock() }
    return body()
  }

  /// Waits for a broadcast. Called with the mutex locked.
  @usableFromInline func wait() {
    pthread_cond_wait(condition, mutex)
  }

  /// Wakes every waiter. Called with the mutex locked.
  @usableFromInline func broadcast() {
    pthread_cond_broadcast(condition)
  }
}
