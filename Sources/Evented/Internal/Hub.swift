// The engine behind every lock-based source: one lock around `HubState`, and the
// drain loop that makes exactly one thread at a time deliver for a source.
//
// A commit (send, write, subscribe with replay) happens under the lock. If no thread
// is delivering for the source, the committing thread becomes the deliverer: it
// delivers its own commit outside the lock, then takes queued commits one by one
// until the queue is empty. Commits made meanwhile, by other threads or by handlers
// on this one, are queued with the snapshot of their commit time. This gives every
// subscription its deliveries one at a time, in commit order, without nesting.

/// One source's subscriptions, its stored value and its delivery queue.
@usableFromInline
final class Hub<Message: Sendable, Stored>: Detaching, @unchecked Sendable {
  // @unchecked Sendable: every mutable field is in `state`, guarded by its lock.
  @usableFromInline let state: Lock<HubState<Message, Stored>>

  init(_ stored: Stored) {
    state = Lock.make(HubState(stored: stored))
  }

  /// Commits `message` to the current subscriptions and delivers it.
  @inlinable @inline(__always)
  func send(_ message: Message) {
    guard let first = state.withLock({ $0.commit(message) }) else { return }
    drain(first)
  }

  /// Runs `body` on the stored value under the lock; delivers the message it returns.
  ///
  /// `body` is user code run under the lock (a `modify` closure or `==`); it must not
  /// touch this source. What it returns is released after unlocking.
  @inlinable
  func commit<Result, Failure: Error>(
    _ body: (inout Stored) throws(Failure) -> (Result, Message?)
  ) throws(Failure) -> Result {
    let (result, message, first) = try state.withLock { state throws(Failure) in
      let (result, message) = try body(&state.stored)
      guard let message else { return (result, Message?.none, Pending<Message>?.none) }
      return (result, message, state.commit(message))
    }
    _ = message
    if let first { drain(first) }
    return result
  }

  /// Locks the state for an in-place mutation of the stored value by a yielding
  /// accessor. Balance with ``commitInPlace(_:)`` after the yield, or ``abandonInPlace()``
  /// when the caller's access is aborted.
  @inlinable @inline(__always)
  func beginInPlace() -> UnsafeMutablePointer<HubState<Message, Stored>> {
    state.lock()
  }

  /// Ends an in-place mutation begun by ``beginInPlace()``: commits `message`, if any,
  /// unlocks, and delivers. `message` is released after unlocking.
  @inlinable
  func commitInPlace(_ locked: UnsafeMutablePointer<HubState<Message, Stored>>, _ message: Message?) {
    var first: Pending<Message>?
    if let message { first = locked.pointee.commit(message) }
    state.unlock()
    _ = message
    if let first { drain(first) }
  }

  /// Ends an in-place mutation whose access was aborted: unlocks without committing.
  @inlinable @inline(__always)
  func abandonInPlace() {
    state.unlock()
  }

  /// Reads the stored value under the lock.
  @inlinable @inline(__always)
  func read<Result>(_ body: (borrowing Stored) -> Result) -> Result {
    state.withLock { body($0.stored) }
  }

  /// Adds `entry`; if `replay` is given, first delivers its message to `entry` alone,
  /// taken from the stored value at the same instant.
  func subscribe(_ entry: Entry<Message>, replay: ((borrowing Stored) -> Message)? = nil) {
    entry.source = self
    var garbage = Garbage<Message>()
    let first = state.withLock { state -> Pending<Message>? in
      state.add(entry, garbage: &garbage)
      guard let replay else { return nil }
      return state.start(.one(replay(state.stored), entry))
    }
    garbage.dispose()
    if let first { drain(first) }
  }

  @usableFromInline func detach(_ core: SubscriptionCore) {
    var garbage = Garbage<Message>()
    state.withLock { $0.remove(core, garbage: &garbage) }
    garbage.dispose()
  }

  /// Ends and removes every subscription; also ends, and waits for, those that a
  /// concurrent call removed and has not finished ending.
  func removeAll() {
    var garbage = Garbage<Message>()
    let ticket = state.withLock { $0.removeAll(into: &garbage) }
    garbage.dispose()
    var finished = Garbage<Message>()
    state.withLock { $0.finishRemoval(ticket, into: &finished) }
    _ = finished
  }

  /// The number of subscriptions whose owner is alive, after sweeping the others out.
  ///
  /// - Complexity: O(n) in the number of subscriptions.
  var liveCount: Int {
    var garbage = Garbage<Message>()
    let count = state.withLock { state in
      state.sweep(into: &garbage)
      return state.live
    }
    garbage.dispose()
    return count
  }

  /// Delivers `first`, then every delivery queued meanwhile, then stops delivering.
  @inlinable
  func drain(_ first: Pending<Message>) {
    let me = currentThreadID()
    var delivery = first
    while true {
      var ownersDied = false
      switch delivery {
      case .all(let message, let entries):
        for entry in entries where !entry.deliver(message, me: me) { ownersDied = true }
      case .one(let message, let entry):
        if !entry.deliver(message, me: me) { ownersDied = true }
      }
      var garbage = Garbage<Message>()
      let next = state.withLock { state in
        if ownersDied { state.sweep(into: &garbage) }
        return state.next()
      }
      garbage.dispose()
      guard let next else { return }
      delivery = next
    }
  }
}
