// Promise 5's "without deadlock" where user code runs under a lock: a property's
// `modify` closure and the `==` of duplicate detection run under the property's lock.
// If that code uses a second source while another thread, under the second source's
// lock, uses the first, each waits for the other forever. Before a thread parks for a
// lock, it registers what it waits for here and follows the chain: the holder of that
// lock, what that holder waits for, its holder, and so on. If the chain comes back to
// a lock the thread holds itself, the wait would never end, and the thread stops with
// a message naming both sources instead of hanging.
//
// No false alarm: only threads parked (or about to park) for a lock are registered, and
// a registered thread cannot release what it holds until it gets the lock it waits
// for; the chain is read under `mutex`, and the last thread to join a cycle finds it.

/// The locks threads are parked for, for finding a cycle of waits before it hangs.
final class LockCycles: @unchecked Sendable {
  // @unchecked Sendable: `mutex` guards `waits`.
  static let shared = LockCycles()

  private let mutex = RawMutex()
  /// For each thread parked for a lock: the lock, and what it guards.
  private var waits: [UInt: (cell: UnsafePointer<LockCell>, guarding: String)] = [:]

  private init() {}

  /// Registers that `me` waits for `cell`; stops with a message if that closes a
  /// cycle of waits.
  ///
  /// - Precondition: Called by the thread `me`, which must call ``stopWaiting(_:)``
  ///   before it returns from locking.
  func startWaiting(_ me: UInt, for cell: UnsafePointer<LockCell>, guarding: String) {
    let held: String? = mutex.withLock {
      waits[me] = (cell, guarding)
      var holder = cell.pointee.word.load(ordering: .acquiring) & ~LockCell.waitersBit
      for _ in 0..<waits.count {
        guard holder != 0, let edge = waits[holder] else { return nil }
        holder = edge.cell.pointee.word.load(ordering: .acquiring) & ~LockCell.waitersBit
        if holder == me { return edge.guarding }
      }
      return nil
    }
    if let held { lockCycle(holding: held, waitingFor: guarding) }
  }

  /// Unregisters the wait of `me`.
  func stopWaiting(_ me: UInt) {
    mutex.withLock { _ = waits.removeValue(forKey: me) }
  }
}

/// What a lock guards, for the message of a cycle of waits.
protocol LockGuardedState {
  static var lockDescription: String { get }
}

/// The description of what a lock guarding `state` guards.
func lockDescription(of state: Any.Type) -> String {
  (state as? any LockGuardedState.Type)?.lockDescription ?? "\(state)"
}

extension HubState: LockGuardedState {
  static var lockDescription: String {
    Stored.self == Void.self ? "an event source of \(Message.self)" : "a property of \(Stored.self)"
  }
}

@inline(never)
func lockCycle(holding held: String, waitingFor wanted: String) -> Never {
  fatalError(
    """
    Evented: two sources' locked sections wait for each other, which would deadlock: \
    this thread holds the lock of \(held) and waits for the lock of \(wanted), which \
    another thread holds while waiting for the first. A property's `modify` closure and \
    the `==` used to skip duplicates run under the property's lock: read other sources \
    before `modify` and pass their values in, rather than reading them inside it.
    """)
}
