// Synchronization for the tests themselves, built on pthreads so that Thread Sanitizer
// sees every happens-before edge (a `Synchronization.Mutex` under contention, or a
// `DispatchSemaphore` signalled before it is waited on, hides the edge from it on Linux).
//
// Every wait here is bounded: it returns false on timeout, and the test fails instead of
// hanging. Nothing here sleeps to decide a result.

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// The timeout of every wait in the tests: generous, because only a broken promise
/// should ever reach it.
let generousTimeout: Duration = .seconds(10)

/// State guarded by a pthread mutex, with a condition variable broadcast after every
/// change so that waiters can re-check it. Every change also signals ``Changes``, so
/// that `settles` re-checks its condition.
final class Monitor<State>: @unchecked Sendable {
  // @unchecked Sendable: `state` is touched only with `mutex` held.
  private var state: State
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
  private let signalsChanges: Bool
  private let scope = Changes.currentScope

  /// - Parameter signalsChanges: false only for the state of the waits themselves
  ///   (``Changes``, ``WakeUps``), whose changes nobody waits on.
  init(_ initial: State, signalsChanges: Bool = true) {
    state = initial
    self.signalsChanges = signalsChanges
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    condition.deallocate()
    mutex.deallocate()
  }

  /// Runs `body` with the state; wakes every waiter afterwards.
  @discardableResult
  func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    pthread_mutex_lock(mutex)
    defer {
      pthread_cond_broadcast(condition)
      pthread_mutex_unlock(mutex)
      if signalsChanges { Changes.signal(scope) }
    }
    return try body(&state)
  }

  /// Reads the state without waking anyone: for reads, and for the conditions of
  /// waits, which must not wake themselves.
  func read<Result>(_ body: (State) throws -> Result) rethrows -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(state)
  }

  /// A copy of the state.
  var current: State { read { $0 } }

  /// Waits until `isDone` holds for the state.
  ///
  /// - Returns: false if `timeout` passed first.
  func wait(timeout: Duration = generousTimeout, until isDone: (State) -> Bool) -> Bool {
    let deadline = Self.deadline(after: timeout)
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    var spec = deadline
    while !isDone(state) {
      if pthread_cond_timedwait(condition, mutex, &spec) == ETIMEDOUT { return isDone(state) }
    }
    return true
  }

  private static func deadline(after timeout: Duration) -> timespec {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    let (seconds, attoseconds) = timeout.components
    var nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
    var wholeSeconds = Int(now.tv_sec) + Int(seconds)
    wholeSeconds += nanoseconds / 1_000_000_000
    nanoseconds %= 1_000_000_000
    return timespec(tv_sec: wholeSeconds, tv_nsec: nanoseconds)
  }
}

/// A one-way signal: closed until opened, open forever after.
final class Gate: Sendable {
  private let isOpen = Monitor(false)

  init() {}

  func open() { isOpen.withLock { $0 = true } }

  var isOpened: Bool { isOpen.current }

  /// Waits until the gate is open.
  ///
  /// - Returns: false if `timeout` passed first.
  @discardableResult
  func wait(timeout: Duration = generousTimeout) -> Bool {
    isOpen.wait(timeout: timeout) { $0 }
  }
}

/// A list that many threads append to, in the order the appends happen.
final class Recorder<Element: Sendable>: Sendable {
  private let elements = Monitor<[Element]>([])

  init() {}

  func append(_ element: Element) { elements.withLock { $0.append(element) } }

  var values: [Element] { elements.current }

  var count: Int { elements.read { $0.count } }

  /// Waits until at least `count` elements were appended.
  @discardableResult
  func wait(forCount count: Int, timeout: Duration = generousTimeout) -> Bool {
    elements.wait(timeout: timeout) { $0.count >= count }
  }

  /// Waits until the elements satisfy `isDone`.
  @discardableResult
  func wait(timeout: Duration = generousTimeout, until isDone: ([Element]) -> Bool) -> Bool {
    elements.wait(timeout: timeout, until: isDone)
  }
}

/// A counter that threads bump and tests wait on.
final class Counter: Sendable {
  private let count = Monitor(0)

  init() {}

  func increment() { count.withLock { $0 += 1 } }
  func decrement() { count.withLock { $0 -= 1 } }
  func add(_ amount: Int) { count.withLock { $0 += amount } }

  var value: Int { count.current }

  /// Waits until the counter reaches `target`.
  @discardableResult
  func wait(for target: Int, timeout: Duration = generousTimeout) -> Bool {
    count.wait(timeout: timeout) { $0 == target }
  }

  /// Waits until the counter satisfies `isDone`.
  @discardableResult
  func wait(timeout: Duration = generousTimeout, until isDone: (Int) -> Bool) -> Bool {
    count.wait(timeout: timeout, until: isDone)
  }
}

/// Polls `isDone`, yielding the processor in between, until it holds.
///
/// For conditions that nobody signals, such as a state word inside the library. Use
/// only conditions that read atomics or take a lock.
///
/// - Returns: false if `timeout` passed first.
func eventually(timeout: Duration = generousTimeout, _ isDone: () -> Bool) -> Bool {
  let clock = ContinuousClock()
  let deadline = clock.now.advanced(by: timeout)
  while !isDone() {
    if clock.now >= deadline { return isDone() }
    sched_yield()
  }
  return true
}
