// Real threads for the concurrent tests. `DispatchQueue.concurrentPerform` may run
// every chunk on one thread, so the tests start their own.

import Foundation

/// The number of threads the concurrent tests use: at least four, whatever the machine.
let contentionThreads = 4

/// Work running on a thread of its own.
final class Spawned: Sendable {
  private let done = Gate()

  /// Starts `body` on a new thread.
  init(_ body: @escaping @Sendable () -> Void) {
    let done = self.done
    let thread = Thread {
      body()
      done.open()
    }
    thread.stackSize = 1 << 20
    thread.start()
  }

  /// Whether the work has returned.
  var isFinished: Bool { done.isOpened }

  /// Waits for the work to return.
  ///
  /// - Returns: false if it had not returned after `timeout` (it deadlocked).
  @discardableResult
  func join(timeout: Duration = generousTimeout) -> Bool {
    done.wait(timeout: timeout)
  }
}

/// Runs `body` on another thread and waits for it.
///
/// - Returns: false if it did not return within `timeout`, as when it waits for a lock
///   that the calling thread holds.
func completesOnAnotherThread(timeout: Duration = generousTimeout, _ body: @escaping @Sendable () -> Void) -> Bool {
  Spawned(body).join(timeout: timeout)
}

/// Gives the processor to another runnable thread. For the threads of a concurrent test
/// that spin while one thread does the work under test: with the whole suite running at
/// once on two cores, spinning threads that never yield can starve that thread past
/// the test's timeout.
func yieldProcessor() {
  sched_yield()
}

/// Runs `body(index)` on `count` new threads that start together, and waits for all.
///
/// - Returns: false if they did not all return within `timeout`.
@discardableResult
func onThreads(
  _ count: Int = contentionThreads, timeout: Duration = generousTimeout, _ body: @escaping @Sendable (Int) -> Void
) -> Bool {
  let start = Gate()
  let threads = (0..<count).map { index in
    Spawned {
      start.wait()
      body(index)
    }
  }
  start.open()
  return threads.allSatisfy { $0.join(timeout: timeout) }
}

/// A small, fast, deterministic random number generator, one per thread.
struct SplitMix: RandomNumberGenerator {
  var state: UInt64

  init(seed: Int) { state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1 }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
