// Detecting a handler that runs concurrently with itself.

import Synchronization

/// Counts a handler's overlapping invocations.
final class OverlapDetector: Sendable {
  private let running = Atomic<Int>(0)
  private let overlaps = Atomic<Int>(0)
  private let calls = Atomic<Int>(0)

  init() {}

  /// Marks one invocation of the handler, running `work` in the middle of it.
  func invocation(_ work: () -> Void = {}) {
    enter()
    work()
    leave()
  }

  /// Marks the start of an invocation, for a handler whose work is `async`.
  func enter() {
    if running.add(1, ordering: .acquiringAndReleasing).newValue != 1 {
      overlaps.add(1, ordering: .relaxed)
    }
  }

  /// Marks the end of an invocation that `enter()` started.
  func leave() {
    running.subtract(1, ordering: .acquiringAndReleasing)
    calls.add(1, ordering: .acquiringAndReleasing)
  }

  var overlapCount: Int { overlaps.load(ordering: .relaxed) }
  var callCount: Int { calls.load(ordering: .acquiring) }
}

/// Some work that gives another thread the time to enter the handler if it could.
@inline(never)
func spin(_ rounds: Int = 200) {
  var x = 0
  for i in 0..<rounds { x = x &+ i &* 31 }
  _ = x
}

/// Runs for about `microseconds`, like a handler with real work to do.
func work(microseconds: Int) {
  let clock = ContinuousClock()
  let end = clock.now.advanced(by: .microseconds(microseconds))
  while clock.now < end {}
}
