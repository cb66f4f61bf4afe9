import Synchronization

/// Waits on the caller's isolation until `isDone` holds or `timeout` passes.
///
/// For conditions that async code reaches: a task's handler has run, a sequence has
/// finished. `isDone` is checked once at the start and again after every signal of
/// ``Changes`` (which the support types raise on every write), never on a schedule; the
/// timeout only bounds the wait. `isDone` must read only what something signals, or
/// what an awaited step has already decided.
///
/// - Returns: false if `timeout` passed first.
func settles(
  isolation: isolated (any Actor)? = #isolation,
  timeout: Duration = .seconds(60),
  _ isDone: () async -> Bool
) async -> Bool {
  await withDeadline(after: timeout) { wakeUps in
    await Changes.watch(with: wakeUps) {
      repeat {
        if await Changes.check(isDone) { return true }
      } while await wakeUps.next()
      return await Changes.check(isDone)
    }
  }
}

/// Runs `body` with wake-ups that expire `timeout` from now.
///
/// The one wait with a timeout in the tests: a single timer bounds every wait in `body`
/// and decides nothing; whatever `body` waits for decides.
func withDeadline<Result>(
  isolation: isolated (any Actor)? = #isolation,
  after timeout: Duration,
  _ body: (WakeUps) async -> Result
) async -> Result {
  let wakeUps = WakeUps()
  let timer = Task.detached {
    do { try await Task.sleep(for: timeout) } catch { return }
    wakeUps.expire()
  }
  defer { timer.cancel() }
  return await body(wakeUps)
}

/// The wake-ups of one task's wait, until its deadline (see ``withDeadline(isolation:after:_:)``).
final class WakeUps: Sendable {
  /// Set by a wake that the task has not taken yet: its next wait returns at once. A
  /// wake that finds it set has nothing to do, so a burst of signals costs one atomic
  /// exchange each.
  private let isPending = Atomic<Bool>(false)
  private let state = Monitor<(waiter: CheckedContinuation<WakeUp, Never>?, isExpired: Bool)>(
    (nil, false), signalsChanges: false)

  /// Wakes the task, or, if it is not waiting, ends its next wait at once.
  func wake() {
    if isPending.exchange(true, ordering: .acquiringAndReleasing) { return }
    let waiter = state.withLock { state -> CheckedContinuation<WakeUp, Never>? in
      guard let waiter = state.waiter.take() else { return nil }
      // Cleared by an exchange, so that the woken task also sees the changes of the
      // wakes that found the flag set meanwhile.
      _ = isPending.exchange(false, ordering: .acquiringAndReleasing)
      return waiter
    }
    waiter?.resume(returning: .woken)
  }

  /// The deadline passed: ends the current wait and every later one.
  fileprivate func expire() {
    let waiter = state.withLock { state in
      state.isExpired = true
      return state.waiter.take()
    }
    waiter?.resume(returning: .expired)
  }

  /// Waits for a wake-up. If one came since the last wait, yields once and returns,
  /// so that a wait whose condition keeps changing lets the other tasks run.
  ///
  /// - Returns: false once the deadline has passed.
  func next(isolation: isolated (any Actor)? = #isolation) async -> Bool {
    let outcome = await withCheckedContinuation(isolation: isolation) { waiter in
      let now = state.withLock { state -> WakeUp? in
        if state.isExpired { return .expired }
        if isPending.exchange(false, ordering: .acquiringAndReleasing) { return .pending }
        state.waiter = waiter
        return nil
      }
      if let now { waiter.resume(returning: now) }
    }
    if outcome == .pending { await Task.yield() }
    return outcome != .expired
  }

  /// How a wait ended.
  private enum WakeUp {
    /// Woken while waiting.
    case woken
    /// A wake had come since the last wait.
    case pending
    /// The deadline passed.
    case expired
  }
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

  var isOpen: Bool { state.read { $0.isOpen } }
}
