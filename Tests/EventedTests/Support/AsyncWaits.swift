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
