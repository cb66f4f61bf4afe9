// Promise 1 (thread safety) and promise 2's one exception: every lock in Evented
// lives in this file, and so does every platform `#if`.
//
// `LockStorage<State>` is one heap object holding the state (as the header) and a
// `LockCell` (as the element): a plain `pthread_mutex_t` and the ID of the thread that
// holds it. A pthread mutex is used instead of `Synchronization.Mutex` because Thread
// Sanitizer on Linux understands pthread's happens-before edges natively, while
// `Mutex`'s contended path goes through futexes it cannot see and produces false
// reports.
//
// Reentrancy check: Evented never holds a lock across user code except two closures
// that must run under it (a property's `modify` body, or an in-place mutation through
// `value`, and the `==` of duplicate detection). If one of those uses the same source,
// locking again would deadlock. Before locking, a thread compares the owner word with
// its own ID: only the thread that holds the lock can read its own ID there (it clears
// the word before unlocking, and a thread always sees its own last write), so the check
// has no false alarm and costs a relaxed load and two relaxed stores per round trip,
// against about 80 instructions more for an error-checking mutex.
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
  // @unchecked Sendable: the pthread mutex in `storage` guards the state stored beside
  // it; the state is touched only while the lock is held.
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

/// The mutex of a `LockStorage` and the ID of the thread holding it (0 when free).
@usableFromInline
struct LockCell: ~Copyable {
  @usableFromInline var mutex = pthread_mutex_t()
  @usableFromInline let owner = Atomic<UInt>(0)

  @usableFromInline init() {}
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

  /// Allocates an instance of `type` (this class or a subclass) holding `initial`.
  @inlinable static func make<Storage: LockStorage<State>>(_ type: Storage.Type, _ initial: State) -> Storage {
    let buffer = type.create(minimumCapacity: 1) { _ in initial }
    let storage = unsafeDowncast(buffer, to: Storage.self)
    storage.withUnsafeMutablePointerToElements { cell in
      cell.initialize(to: LockCell())
      _ = pthread_mutex_init(&cell.pointee.mutex, nil)
    }
    return storage
  }

  deinit {
    withUnsafeMutablePointerToElements { cell in
      _ = pthread_mutex_destroy(&cell.pointee.mutex)
      cell.deinitialize(count: 1)
    }
  }

  /// Locks and returns the token that unlocks.
  ///
  /// - Important: Stops with a message if the calling thread holds this lock already.
  @inlinable @inline(__always)
  final func lock() -> LockToken<State> {
    let cell = withUnsafeMutablePointerToElements { $0 }
    let me = currentThreadID()
    if cell.pointee.owner.load(ordering: .relaxed) == me { lockedTwice() }
    let status = pthread_mutex_lock(&cell.pointee.mutex)
    if status != 0 { lockFailed(status) }
    cell.pointee.owner.store(me, ordering: .relaxed)
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
    release()
    discard self
  }

  @inlinable @inline(__always)
  func release() {
    cell.pointee.owner.store(0, ordering: .relaxed)
    pthread_mutex_unlock(&cell.pointee.mutex)
  }

  @inlinable deinit {
    release()
  }

  /// Waits on `condition`, releasing the lock meanwhile. Re-check the state after
  /// every wake-up.
  @usableFromInline
  func wait(_ condition: Condition) {
    let me = cell.pointee.owner.load(ordering: .relaxed)
    cell.pointee.owner.store(0, ordering: .relaxed)
    _ = pthread_cond_wait(condition.pointer, &cell.pointee.mutex)
    cell.pointee.owner.store(me, ordering: .relaxed)
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

@usableFromInline @inline(never)
func lockFailed(_ status: Int32) -> Never {
  fatalError("Evented: pthread_mutex_lock failed with error \(status)")
}

/// A pthread condition variable, used with one `LockStorage`; a hub's waiting room (see
/// DeliveryQueue), allocated when a thread first waits.
@usableFromInline
final class Condition: @unchecked Sendable {
  // @unchecked Sendable: the condition variable is used only with the mutex of the
  // lock it belongs to, which guards what waiters check and the two tickets.
  @usableFromInline let pointer: UnsafeMutablePointer<pthread_cond_t>
  /// Threads waiting for room in the backlog are served in ticket order.
  @usableFromInline var nextTicket: UInt = 0
  @usableFromInline var servedTicket: UInt = 0

  @usableFromInline init() {
    pointer = .allocate(capacity: 1)
    pthread_cond_init(pointer, nil)
  }

  deinit {
    pthread_cond_destroy(pointer)
    pointer.deallocate()
  }

  /// Wakes every waiter so it re-checks its condition.
  @usableFromInline
  func broadcast() {
    pthread_cond_broadcast(pointer)
  }
}

/// An identifier of the calling thread, never zero, with its two low bits clear.
@inlinable @inline(__always)
func currentThreadID() -> UInt {
  #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
  #else
    return UInt(pthread_self())
  #endif
}

/// A per-thread word found through a pthread key, allocated on first use and freed when
/// the thread exits. Reading it costs one key lookup.
@usableFromInline
struct ThreadWord: Sendable {
  @usableFromInline let key: pthread_key_t

  init() {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { word in free(word) }
    if status != 0 { fatalError("Evented: pthread_key_create failed with error \(status)") }
    self.key = key
  }

  /// The calling thread's word, or nil if it never made one.
  @usableFromInline var existing: UnsafeMutablePointer<Int>? {
    pthread_getspecific(key)?.assumingMemoryBound(to: Int.self)
  }

  /// The calling thread's word, made (as 0) if needed.
  @usableFromInline var current: UnsafeMutablePointer<Int> {
    if let existing { return existing }
    let word = UnsafeMutablePointer<Int>(OpaquePointer(malloc(MemoryLayout<Int>.stride)!))
    word.pointee = 0
    pthread_setspecific(key, word)
    return word
  }
}

/// A mutex and condition variable of their own, for `WaitRoom`: not tied to any state.
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

  func withLock<Result>(_ body: () -> Result) -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return body()
  }

  /// Waits for a broadcast. Called inside `withLock`.
  func wait() {
    pthread_cond_wait(condition, mutex)
  }

  /// Wakes every waiter. Called inside `withLock`.
  func broadcast() {
    pthread_cond_broadcast(condition)
  }
}
