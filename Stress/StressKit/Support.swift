// Small tools the scenarios share: a pthread lock that Thread Sanitizer understands,
// threads, a seeded random generator, per-thread state, and a monotonic clock.
//
// `Synchronization.Mutex` is avoided on purpose: its contended path makes Thread
// Sanitizer report false races on Linux, and this executable must run clean under it.

import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A value guarded by a pthread mutex; use only through `withLock`.
///
/// Never call into Evented while holding it: a handler on another thread may need it.
final class Guarded<State>: @unchecked Sendable {
  // @unchecked Sendable: `mutex` guards `state`, which is touched only in `withLock`.
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private var state: State

  init(_ state: State) {
    self.state = state
    mutex = .allocate(capacity: 1)
    pthread_mutex_init(mutex, nil)
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  /// Runs `body` with exclusive access to the state.
  func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&state)
  }
}

/// A SplitMix64 generator: fast, seedable, good enough to pick operations.
struct Random {
  private var state: UInt64

  init(seed: UInt64) {
    state = seed
  }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A number in `0..<bound`; `bound` must be positive.
  mutating func below(_ bound: Int) -> Int {
    Int(next() % UInt64(bound))
  }

  /// True with the given chance, in percent.
  mutating func chance(_ percent: Int) -> Bool {
    below(100) < percent
  }
}

/// Monotonic time in nanoseconds.
func now() -> UInt64 {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

/// Sleeps the calling thread for `microseconds`.
func pause(microseconds: Int) {
  usleep(UInt32(microseconds))
}

/// The number of online processors.
public func processorCount() -> Int {
  max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}

/// Busy-waits for about `iterations` short steps, returning early when `stop` returns true.
///
/// - Returns: true if `stop` returned true.
@inline(never)
func spin(_ iterations: Int, until stop: () -> Bool) -> Bool {
  var i = 0
  while i < iterations {
    if stop() { return true }
    i += 1
  }
  return false
}

/// What a thread is doing, for the watchdog's report.
enum Site: UInt8 {
  case idle, send, write, modify, read, subscribe, cancel, dropOwner, observerCount
  case handler, barrier, check, removeAll, join, done

  var label: String {
    switch self {
    case .idle: "running its loop"
    case .send: "in send()"
    case .write: "in value = …"
    case .modify: "in modify()"
    case .read: "reading value"
    case .subscribe: "in observe()"
    case .cancel: "in cancel()"
    case .dropOwner: "releasing an owner or a subscription"
    case .observerCount: "reading observerCount"
    case .handler: "in a handler"
    case .barrier: "parked at a checkpoint"
    case .check: "checking invariants"
    case .removeAll: "in removeAllObservers()"
    case .join: "waiting for the workers to stop"
    case .done: "finished"
    }
  }
}

/// Per-thread state: operation counts, the current site, a random generator, a
/// producer identity for stamping events, and the sources being delivered on this
/// thread (to detect nested delivery).
///
/// Every thread that runs stress code or a handler has one, made on first use and kept
/// for the life of the process so that its counts stay readable.
final class ThreadState: @unchecked Sendable {
  // @unchecked Sendable: the atomics may be read by any thread; every other field is
  // touched only by the thread the state belongs to.
  let id: Int
  /// Operations counted so far, published in batches.
  let published = Atomic<Int>(0)
  /// The `Site` raw value.
  let site = Atomic<UInt8>(0)
  /// The scenario run this thread last worked for.
  let run = Atomic<Int>(0)
  /// A name for reports, such as "worker 3"; set once by the thread that owns it.
  let name = Atomic<Int>(-1)

  var unpublished = 0
  /// The sequence number of the last event this thread stamped as a producer.
  var seq = 0
  var random: Random
  /// One bit per source whose synchronous delivery pass runs on this thread now.
  var delivering: UInt64 = 0
  /// For scenarios: the last commit this thread wrote to each property.
  var lastCommit: [Int] = []

  private init(id: Int) {
    self.id = id
    random = Random(seed: UInt64(id) &* 0x2545_F491_4F6C_DD1D ^ baseSeed.load(ordering: .relaxed))
  }

  /// The calling thread's state.
  static var current: ThreadState {
    if let raw = pthread_getspecific(threadStateKey) {
      return Unmanaged<ThreadState>.fromOpaque(raw).takeUnretainedValue()
    }
    let state = ThreadState(id: nextThreadID.wrappingAdd(1, ordering: .relaxed).newValue)
    allThreadStates.withLock { $0.append(state) }
    pthread_setspecific(threadStateKey, Unmanaged.passUnretained(state).toOpaque())
    return state
  }

  /// Counts `n` operations; publishes them every so often.
  @inline(__always)
  func count(_ n: Int = 1) {
    unpublished &+= n
    if unpublished >= 64 { flush() }
  }

  /// Publishes every counted operation.
  func flush() {
    if unpublished != 0 {
      published.wrappingAdd(unpublished, ordering: .relaxed)
      unpublished = 0
    }
  }

  @inline(__always)
  func at(_ site: Site) {
    self.site.store(site.rawValue, ordering: .relaxed)
  }

  /// The next producer sequence number for an event stamped by this thread.
  @inline(__always)
  func nextSeq() -> Int {
    seq += 1
    return seq
  }
}

/// Every thread state ever made, for counting and for the watchdog.
let allThreadStates = Guarded<[ThreadState]>([])
let baseSeed = Atomic<UInt64>(0)
private let nextThreadID = Atomic<Int>(0)
private let threadStateKey: pthread_key_t = {
  var key = pthread_key_t()
  pthread_key_create(&key, nil)
  return key
}()

/// The sum of every published operation count.
func publishedOperations() -> Int {
  allThreadStates.withLock { states in states.reduce(0) { $0 + $1.published.load(ordering: .relaxed) } }
}

private final class ThreadBody {
  let body: @Sendable () -> Void
  init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// A started pthread; `join()` waits for it.
struct StartedThread: Sendable {
  private let thread: pthread_t

  init(_ body: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    #if canImport(Darwin)
      var thread: pthread_t?
      let status = pthread_create(
        &thread, nil,
        { raw in
          Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().body()
          return nil
        }, box)
      precondition(status == 0, "pthread_create failed: \(status)")
      self.thread = thread!
    #else
      var thread = pthread_t()
      let status = pthread_create(
        &thread, nil,
        { raw in
          Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().body()
          return nil
        }, box)
      precondition(status == 0, "pthread_create failed: \(status)")
      self.thread = thread
    #endif
  }

  func join() {
    pthread_join(thread, nil)
  }
}

/// Writes all of `text` to the file descriptor, unbuffered.
func writeAll(_ descriptor: Int32, _ text: String) {
  var text = text
  text.withUTF8 { bytes in
    guard var next = bytes.baseAddress else { return }
    var left = bytes.count
    while left > 0 {
      let written = write(descriptor, next, left)
      if written <= 0 { return }
      next += written
      left -= written
    }
  }
}

/// The process's resident memory in bytes, from `/proc/self/statm`; 0 where there is none.
func residentBytes() -> Int {
  #if os(Linux)
    let file = open("/proc/self/statm", O_RDONLY)
    guard file >= 0 else { return 0 }
    defer { close(file) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let count = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
    guard count > 0 else { return 0 }
    let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
    guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
  #else
    return 0
  #endif
}

/// Runs for about `microseconds`, like a handler with real work to do.
func spin(microseconds: UInt64) {
  let end = now() + microseconds * 1_000
  while now() < end {}
}
