// Promise 1 (thread safety) and promise 2's one exception: every lock in Evented
// lives in this file, and so does every platform `#if`.
//
// `LockStorage<State>` is one heap object holding the state (as the header) and a
// `LockCell` (as the element): one atomic word, 0 when the lock is free, else the ID of
// the thread that holds it, with `waitersBit` set while threads are parked for it.
//
// - Locking is one compare-and-exchange (0 to the caller's ID, acquiring); unlocking
//   one exchange (to 0, releasing). A thread that finds the lock held spins briefly,
//   then sets `waitersBit` and parks in the `ParkingLot`: a fixed table of pthread
//   mutexes and condition variables, shared by every lock, keyed by the lock's address.
//   An unlock that finds `waitersBit` wakes the parked threads of that key, which try
//   again. So a lock costs 8 bytes, and an idle source no mutex of its own.
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
/// while threads are parked for it.
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

  /// Locks a lock found held: spins briefly, then parks until an unlock wakes it. Before
  /// parking, registers the wait in `LockCycles`, which stops the program with a
  /// message if the wait would never end.
  @usableFromInline @inline(never)
  func lockContended(as me: UInt, guarding: Any.Type) {
    var spins = 0
    var isRegistered = false
    defer { if isRegistered { LockCycles.shared.stopWaiting(me) } }
    while true {
      let current = word.load(ordering: .relaxed)
      if current & ~Self.waitersBit == me { lockedTwice() }
      if current == 0 {
        if word.compareExchange(expected: 0, desired: me, ordering: .acquiring).exchanged { return }
        continue
      }
      if spins < 100 {
        spins += 1
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
      ParkingLot.park(on: self) { word.load(ordering: .relaxed) & Self.waitersBit != 0 }
    }
  }

  /// Unlocks, waking the threads parked for the lock, if any.
  @inlinable @inline(__always)
  func unlock() {
    if word.exchange(0, ordering: .releasing) & Self.waitersBit != 0 { ParkingLot.unparkAll(on: self) }
  }
}

/// Where threads sleep while a lock they want is held: a fixed table of pthread
/// mutexes and condition variables shared by every lock, keyed by the lock's address.
@usableFromInline
enum ParkingLot {
  private static let places: [RawMutex] = (0..<64).map { _ in RawMutex() }

  private static func place(of cell: borrowing LockCell) -> RawMutex {
    let address = withUnsafePointer(to: cell) { UInt(bitPattern: $0) }
    return places[Int((address >> 4) % UInt(places.count))]
  }

  /// Sleeps while `shouldSleep` holds, until an unpark of the same place. Spurious
  /// wake-ups happen: the caller checks again.
  @usableFromInline
  static func park(on cell: borrowing LockCell, while shouldSleep: () -> Bool) {
    let place = place(of: cell)
    place.lock()
    if shouldSleep() { place.wait() }
    place.unlock()
  }

  /// Wakes every thread parked at the place of `cell`.
  @usableFromInline
  static func unparkAll(on cell: borrowing LockCell) {
    let place = place(of: cell)
    place.lock()
    place.broadcast()
    place.unlock()
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
  /// Threads waiting for room in the backlog are let in in ticket order.
  @usableFromInline var nextTicket: UInt = 0
  /// The number of waiters that have left, in whatever order.
  @usableFromInline var leftTickets: UInt = 0
  /// Threads waiting for room that went to sleep since the last broadcast.
  @usableFromInline var asleep = 0
  /// Bumped by every broadcast.
  @usableFromInline var generation: UInt = 0
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
  freshThreadID()
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
