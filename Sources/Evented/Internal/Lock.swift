// Every lock in Evented lives in this file.
//
// `Lock<State>` is a `pthread_mutex_t` stored in the same heap object as the state it
// guards. A pthread mutex is used instead of `Synchronization.Mutex` because Thread
// Sanitizer on Linux understands pthread's happens-before edges natively, while
// `Mutex`'s contended path goes through futexes it cannot see and produces false
// reports. The mutex is of the error-checking kind: locking it again on the thread
// that holds it returns EDEADLK, which we turn into a clear message instead of a hang.
// Inside Evented the lock is never held across user code, so the only way to reach
// that message is from the two closures that must run under it: a property's
// `modify` body (or an in-place mutation through `value`) and an `Equatable` `==`
// used for duplicate detection.
//
// `WaitRoom` is a mutex and condition variable shared by every subscription. A thread
// that cancels a subscription whose handler is running on another thread waits here
// until that handler returns. It guards no state of its own: waiters re-check an
// atomic word under its mutex, and the thread that clears the word wakes them.

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
  // it; the state is touched only inside `withLock`.
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

  /// Locks and returns the address of the state, for a yielding accessor, which
  /// cannot yield from inside `withLock`'s closure. Balance with ``unlock()`` on every
  /// path, including an aborted yield.
  @inlinable @inline(__always)
  func lock() -> UnsafeMutablePointer<State> {
    storage.lock()
  }

  /// Unlocks after ``lock()``.
  @inlinable @inline(__always)
  func unlock() {
    storage.unlock()
  }
}

/// One heap object holding the mutex (as the element) and the state (as the header),
/// so that reaching the state costs no exclusivity check.
///
/// A source's hub is a subclass (with no stored properties of its own), so that a
/// source's whole engine is one object.
@usableFromInline
class LockStorage<State>: ManagedBuffer<State, pthread_mutex_t> {
  @inlinable static func make(_ initial: State) -> LockStorage<State> {
    make(LockStorage<State>.self, initial)
  }

  /// Allocates an instance of `type` (this class or a subclass) holding `initial`.
  @inlinable static func make<Storage: LockStorage<State>>(_ type: Storage.Type, _ initial: State) -> Storage {
    let buffer = type.create(minimumCapacity: 1) { _ in initial }
    let lock = unsafeDowncast(buffer, to: Storage.self)
    lock.withUnsafeMutablePointerToElements { mutex in
      var attributes = pthread_mutexattr_t()
      pthread_mutexattr_init(&attributes)
      pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
      pthread_mutex_init(mutex, &attributes)
      pthread_mutexattr_destroy(&attributes)
    }
    return lock
  }

  deinit {
    _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
  }

  @inlinable @inline(__always)
  final func withLock<Result, Failure: Error>(
    _ body: (inout State) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    let mutex = withUnsafeMutablePointerToElements { $0 }
    let status = pthread_mutex_lock(mutex)
    if status != 0 { lockFailed(status) }
    defer { pthread_mutex_unlock(mutex) }
    return try body(&withUnsafeMutablePointerToHeader { $0 }.pointee)
  }

  @inlinable @inline(__always)
  final func lock() -> UnsafeMutablePointer<State> {
    let status = pthread_mutex_lock(withUnsafeMutablePointerToElements { $0 })
    if status != 0 { lockFailed(status) }
    return withUnsafeMutablePointerToHeader { $0 }
  }

  @inlinable @inline(__always)
  final func unlock() {
    pthread_mutex_unlock(withUnsafeMutablePointerToElements { $0 })
  }
}

@usableFromInline @inline(never)
func lockFailed(_ status: Int32) -> Never {
  if status == EDEADLK {
    fatalError(
      """
      Evented: a source was used from inside its own locked section, which would \
      deadlock. A property's `modify` closure and the `==` used to skip duplicate \
      values run under the property's lock: they must not read, write, observe or \
      modify the same property.
      """)
  }
  fatalError("Evented: pthread_mutex_lock failed with error \(status)")
}

extension LockStorage {
  /// Waits on `condition`, releasing the lock meanwhile.
  ///
  /// - Precondition: Called between ``lock()`` and ``unlock()``. Re-check the state
  ///   through the pointer ``lock()`` returned after every wake-up.
  @usableFromInline
  final func wait(_ condition: Condition) {
    withUnsafeMutablePointerToElements { mutex in
      _ = pthread_cond_wait(condition.pointer, mutex)
    }
  }
}

/// A pthread condition variable, used with one `Lock`; a hub's waiting room (see
/// HubState), allocated when a thread first waits.
@usableFromInline
final class Condition: @unchecked Sendable {
  // @unchecked Sendable: the condition variable is used only with the mutex of the
  // `Lock` it belongs to, which guards what waiters check and the two tickets.
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

/// How many delivery passes (or queued handler calls) the calling thread is inside, for
/// every source together. A thread inside one never waits for room in a backlog, so
/// a handler can neither wait for its own source nor close a cycle of waits between
/// sources.
///
/// The depth is a counter allocated once per thread and found through a pthread key
/// (freed when the thread exits), so entering and leaving cost one key lookup and two
/// plain writes to memory only the calling thread touches.
@usableFromInline
enum DeliveringThread {
  private static let key: pthread_key_t = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { depth in free(depth) }
    precondition(status == 0, "Evented: pthread_key_create failed with error \(status)")
    return key
  }()

  /// The calling thread's depth counter, or nil if it never delivered.
  private static var existingDepth: UnsafeMutablePointer<Int>? {
    pthread_getspecific(key)?.assumingMemoryBound(to: Int.self)
  }

  /// Whether the calling thread is delivering for any source, or running a handler.
  @usableFromInline static var isDelivering: Bool {
    guard let depth = existingDepth else { return false }
    return depth.pointee > 0
  }

  /// Counts the calling thread as delivering until the matching ``exit(_:)``.
  ///
  /// - Returns: the counter to pass to `exit`.
  @usableFromInline static func enter() -> UnsafeMutablePointer<Int> {
    if let depth = existingDepth {
      depth.pointee += 1
      return depth
    }
    let depth = UnsafeMutablePointer<Int>(OpaquePointer(malloc(MemoryLayout<Int>.stride)!))
    depth.pointee = 1
    pthread_setspecific(key, depth)
    return depth
  }

  /// Ends what the matching ``enter()`` began.
  @inlinable @inline(__always)
  static func exit(_ depth: UnsafeMutablePointer<Int>) {
    depth.pointee -= 1
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

/// Where cancelling threads wait for a handler running on another thread to return.
///
/// It also keeps the wait-for graph of those threads: a thread about to wait for a
/// handler running on thread R first follows R's own wait, and R's, and so on; if the
/// chain leads back to itself, waiting would deadlock (two handlers cancelling each
/// other from two threads), so it does not wait.
final class WaitRoom: @unchecked Sendable {
  // @unchecked Sendable: `mutex` guards `waitsFor` and the wait on `condition`; the
  // condition being waited for is an atomic word owned by the caller, re-checked
  // under `mutex`.
  static let shared = WaitRoom()

  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private let condition: UnsafeMutablePointer<pthread_cond_t>
  /// For each waiting thread, the subscription it waits for and that one's runner.
  /// Removing an edge never releases the last reference to a subscription (hence
  /// never runs a handler's deinit under `mutex`): the waiting caller holds it.
  private var waitsFor: [UInt: (runner: UInt, core: SubscriptionCore)] = [:]

  private init() {
    mutex = .allocate(capacity: 1)
    condition = .allocate(capacity: 1)
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  /// Blocks until `core`'s handler is not running on `runner` any more, unless that
  /// would deadlock.
  ///
  /// - Returns: false if it returned without waiting because `runner` is, directly or
  ///   through other threads, waiting for the calling thread.
  @discardableResult
  func wait(for core: SubscriptionCore, runningOn runner: UInt) -> Bool {
    let me = currentThreadID()
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    // The handler may have returned already; then there is nothing to wait for.
    guard core.runner == runner else { return true }
    var next = runner
    while let edge = waitsFor[next], edge.core.runner == edge.runner {
      if edge.runner == me { return false }
      next = edge.runner
    }
    waitsFor[me] = (runner, core)
    while core.runner == runner { pthread_cond_wait(condition, mutex) }
    waitsFor[me] = nil
    return true
  }

  /// Wakes every waiter so it re-checks its condition.
  func wakeAll() {
    pthread_mutex_lock(mutex)
    pthread_cond_broadcast(condition)
    pthread_mutex_unlock(mutex)
  }
}
