// Promise 6 (cancellation is final): a thread that ends a subscription whose handler
// is running on another thread waits here until that handler returns.
//
// It also keeps the wait-for graph of those threads: a thread about to wait for a
// handler running on thread R first follows R's own wait, and R's, and so on; if the
// chain leads back to itself, waiting would deadlock (two handlers cancelling each
// other from two threads), so it does not wait.

/// Where ending threads wait for a handler running on another thread to return.
final class WaitRoom: @unchecked Sendable {
  // @unchecked Sendable: `lock` guards `waitsFor` and the wait; the condition waited
  // for is a subscription's state word (atomic), re-checked under `lock`.
  static let shared = WaitRoom()

  private let lock = RawMutex()
  /// For each waiting thread, the subscription it waits for and that one's runner.
  /// Removing an edge never releases the last reference to a subscription (hence
  /// never runs a handler's deinit under `lock`): the waiting caller holds it.
  private var waitsFor: [UInt: (runner: UInt, core: SubscriptionCore)] = [:]

  private init() {}

  /// Blocks until `core`'s handler is not running on `runner` any more, unless that
  /// would deadlock.
  ///
  /// - Returns: false if it returned without waiting because `runner` is, directly or
  ///   through other threads, waiting for the calling thread.
  @discardableResult
  func wait(for core: SubscriptionCore, runningOn runner: UInt) -> Bool {
    let me = currentThreadID()
    // A handler that waits for a lock this thread holds would never return: stop with a
    // message instead (see LockCycles).
    LockCycles.shared.startWaiting(me, forHandlerOf: core, runningOn: runner)
    defer { LockCycles.shared.stopWaiting(me) }
    return lock.withLock {
      // The handler may have returned already; then there is nothing to wait for.
      guard core.runner == runner else { return true }
      var next = runner
      while let edge = waitsFor[next], edge.core.runner == edge.runner {
        if edge.runner == me { return false }
        next = edge.runner
      }
      waitsFor[me] = (runner, core)
      while core.runner == runner { lock.wait() }
      waitsFor[me] = nil
      return true
    }
  }

  /// Wakes every waiter so it re-checks its condition.
  func wakeAll() {
    lock.withLock { lock.broadcast() }
  }
}
