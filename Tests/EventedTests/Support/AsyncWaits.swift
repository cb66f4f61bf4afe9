/// Polls `isDone` on the caller's isolation until it holds or `timeout` passes.
///
/// For conditions that async code reaches with no signal to wait on (a task's handler
/// has run, a sequence has finished). The short pause between polls only yields the
/// cores; the result is decided by `isDone`, and the deadline only bounds the wait.
func settles(
  isolation: isolated (any Actor)? = #isolation,
  timeout: Duration = .seconds(60),
  _ isDone: () async -> Bool
) async -> Bool {
  let deadline = ContinuousClock.now + timeout
  while ContinuousClock.now < deadline {
    if await isDone() { return true }
    try? await Task.sleep(for: .milliseconds(1))
  }
  return await isDone()
}

/// A gate that tasks await without blocking a thread: `open()` resumes every waiter.
final class AsyncGate: Sendable {
  private let state = Monitor<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

  func wait() async {
    await withCheckedContinuation { continuation in
      let resumeNow = state.withLock { state in
        if state.isOpen { return true }
        state.waiters.append(continuation)
        return false
      }
      if resumeNow { continuation.resume() }
    }
  }

  func open() {
    let waiters = state.withLock { state in
      state.isOpen = true
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  var isOpen: Bool { state.withLock { $0.isOpen } }
}
