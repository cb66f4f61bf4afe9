// One property written by 1, 2, 4 or 8 threads at once (W11-1 … W11-8): whether the
// cost of a write stays flat when more threads contend for one source than the machine
// has cores.

import Dispatch
import Evented
import Foundation
@preconcurrency import OpenCombine
import Synchronization

/// Writes per sample of a W11 row, whatever the number of writers: enough for the
/// backlog to fill and the delivering role to change hands many times.
let writersSampleCount = 400_000

/// Runs `body(0)` … `body(count - 1)` on `count` new threads released together; measures
/// from the release until all return (wall clock, and the whole process's CPU time).
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> Sample {
  let ready = DispatchSemaphore(value: 0)
  let go = DispatchSemaphore(value: 0)
  let done = DispatchSemaphore(value: 0)
  for index in 0..<count {
    let thread = Thread {
      ready.signal()
      go.wait()
      body(index)
      done.signal()
    }
    thread.start()
  }
  for _ in 0..<count { ready.wait() }
  return measureProcess {
    for _ in 0..<count { go.signal() }
    for _ in 0..<count { done.wait() }
  }
}

/// A `Property<Int>` (or a peer's equivalent) with one synchronous subscriber, written
/// by `writers` threads at once, `n / writers` new values each (`n` is
/// ``writersSampleCount``). One operation is one write.
func writersBench(_ peer: Peer, writers: Int) -> Result<Bench, Unavailable> {
  let sink = Sink()
  /// Every sample writes values no earlier sample wrote, so no write is an equal one.
  let nextBase = Atomic<Int>(1)
  func bench(keepAlive: [Any], write: @escaping @Sendable (Int) -> Void) -> Bench {
    Bench(
      measure: { n in
        let share = max(1, n / writers)
        let base = nextBase.add(writers * share, ordering: .relaxed).oldValue
        let sample = onThreads(writers) { thread in
          let first = base + thread * share
          for value in first..<(first + share) { write(value) }
        }
        let total = UInt64(writers * share)
        return Sample(wall: sample.wall * UInt64(n) / total, cpu: sample.cpu * UInt64(n) / total)
      }, fixedCount: writersSampleCount, keepAlive: keepAlive)
  }
  switch peer {
  case .floor:
    let property = FloorProperty(0)
    property.subscribe { sink.touch($0) }
    return .success(bench(keepAlive: [property]) { property.value = $0 })
  case .evented:
    let property = Property(0)
    let subscription = property.observe { sink.touch($0) }
    return .success(bench(keepAlive: [property, subscription]) { property.value = $0 })
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(0)
    let cancellable = subject.sink { sink.touch($0) }
    return .success(bench(keepAlive: [subject, cancellable]) { subject.value = $0 })
  case .eventedActor:
    return .failure(Unavailable("n/a (lock types' row)"))
  case .notificationCenter:
    return .failure(Unavailable("n/a (no stored value)"))
  case .observation:
    return .failure(Unavailable("n/a (@Observable is not thread-safe)"))
  case .asyncStream:
    return .failure(Unavailable("n/a (async only)"))
  }
}

/// Starts and joins one thread, so that the C library takes its multithreaded paths
/// from the first sample on (a process that never had a second thread skips the atomic
/// operations of some of its locks).
func becomeMultithreaded() {
  #if canImport(Glibc)
    var thread = pthread_t()
    guard pthread_create(&thread, nil, { _ in nil }, nil) == 0 else { return }
    pthread_join(thread, nil)
  #endif
}
