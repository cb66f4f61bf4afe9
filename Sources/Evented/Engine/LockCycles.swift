// Promise 5's "without deadlock" where user code runs under a lock: a property's
// `modify` closure and the `==` of duplicate detection run under the property's lock.
// If that code uses a second source while another thread, under the second source's
// lock, uses the first, each waits for the other forever. Before a thread parks for a
// lock, it registers what it waits for here and follows the chain: the holder of that
// lock, what that holder waits for, its holder, and so on. If the chain comes back to
// a lock the thread holds itself, the wait would never end, and the thread stops with
// a message naming both sources instead of hanging.
//
// A thread that waits in `WaitRoom` for a handler running on another thread (a cancel,
// or the drop of a subscription's last handle) registers too: if that handler waits
// for a lock the cancelling thread holds (a cancel inside `modify`), neither would end.
//
// No false alarm: only threads parked (or about to park) for a lock, or waiting for a
// handler that still runs, are registered; such a thread cannot release what it holds
// until its wait ends; a handler edge counts only while the handler still runs on that
// thread; the chain is read under `mutex`, and the last thread to join a cycle finds it.

/// The locks threads are parked for, for finding a cycle of waits before it hangs.
final class LockCycles: @unchecked Sendable {
  // @unchecked Sendable: `mutex` guards `waits`.
  static let shared = LockCycles()

  /// What a registered thread waits for.
  private enum Wait {
    /// A lock, and what it guards.
    case lock(UnsafePointer<LockCell>, guarding: String)
    /// The return of a handler running on `runner`. The waiting thread holds `core`,
    /// so removing the edge never releases it.
    case handler(SubscriptionCore, runner: UInt)
    /// The end of an open transaction, to write what it wrote (`wanting`) or to begin
    /// one (Transaction.swift).
    case transaction(OpenTransaction, wanting: String)
    /// The transaction token, to begin a transaction (`wanting`).
    case token(wanting: String)

    /// The thread that must move for this wait to end, or 0 if none.
    var holder: UInt {
      switch self {
      case .lock(let cell, _): cell.pointee.word.load(ordering: .acquiring) & ~LockCell.waitersBit
      case .handler(let core, let runner): core.runner == runner ? runner : 0
      case .transaction(let open, _): open.isHeld.load(ordering: .acquiring) ? open.owner : 0
      case .token: transactionTokenOwner.load(ordering: .sequentiallyConsistent)
      }
    }
  }

  private let mutex = RawMutex()
  /// For each registered thread, what it waits for.
  private var waits: [UInt: Wait] = [:]

  private init() {}

  /// Registers that `me` waits for `cell`; stops with a message if that closes a
  /// cycle of waits.
  ///
  /// - Precondition: Called by the thread `me`, which must call ``stopWaiting(_:)``
  ///   before it returns from locking.
  func startWaiting(_ me: UInt, for cell: UnsafePointer<LockCell>, guarding: String) {
    startWaiting(me, .lock(cell, guarding: guarding))
  }

  /// Registers that `me` waits for the handler of `core` running on `runner` to return;
  /// stops with a message if that closes a cycle of waits.
  ///
  /// - Precondition: Called by the thread `me`, which holds `core` and must call
  ///   ``stopWaiting(_:)`` once its wait ends.
  func startWaiting(_ me: UInt, forHandlerOf core: SubscriptionCore, runningOn runner: UInt) {
    startWaiting(me, .handler(core, runner: runner))
  }

  /// Registers that `me` waits for the end of `open` to do what `wanting` says; stops
  /// with a message if that closes a cycle of waits.
  ///
  /// - Precondition: Called by the thread `me`, which must call ``stopWaiting(_:)``
  ///   once its wait ends.
  func startWaiting(_ me: UInt, forTransaction open: OpenTransaction, wanting: String) {
    startWaiting(me, .transaction(open, wanting: wanting))
  }

  /// Registers that `me` waits for the transaction token, held by whichever thread
  /// holds it, to do what `wanting` says; stops with a message if that closes a cycle
  /// of waits.
  ///
  /// - Precondition: Called by the thread `me`, which must call ``stopWaiting(_:)``
  ///   once its wait ends.
  func startWaiting(_ me: UInt, forTokenWanting wanting: String) {
    startWaiting(me, .token(wanting: wanting))
  }

  private func startWaiting(_ me: UInt, _ wait: Wait) {
    let cycle: [Wait]? = mutex.withLock {
      waits[me] = wait
      var path = [wait]
      var holder = wait.holder
      for _ in 0..<waits.count {
        guard holder != 0, let edge = waits[holder] else { return nil }
        path.append(edge)
        holder = edge.holder
        if holder == me { return path }
      }
      return nil
    }
    guard let cycle else { return }
    var locks: [String] = []
    var waitsForAHandler = false
    var transactionWaits: [String] = []
    for step in cycle {
      switch step {
      case .lock(_, let guarding): locks.append(guarding)
      case .handler: waitsForAHandler = true
      case .transaction(_, let wanting), .token(let wanting): transactionWaits.append(wanting)
      }
    }
    if !transactionWaits.isEmpty {
      if locks.isEmpty && waitsForAHandler { transactionHandlerCycle(wanting: transactionWaits) }
      transactionCycle(locks: locks, wanting: transactionWaits)
    }
    // Handlers waiting for each other's cancels, with no lock in between, are
    // `WaitRoom`'s to resolve (it returns without waiting).
    if locks.isEmpty { return }
    if waitsForAHandler {
      handlerCycle(locks: locks)
    } else {
      lockCycle(holding: locks.last ?? "a source", waitingFor: locks.first ?? "a source")
    }
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
func handlerCycle(locks: [String]) -> Never {
  let held = locks.isEmpty ? "a source" : locks.joined(separator: " and ")
  fatalError(
    """
    Evented: a subscription was cancelled (or its last handle dropped) inside a locked \
    section, and its handler, running on another thread, waits for the lock of \(held) \
    that this section holds: waiting for the handler would deadlock. A property's \
    `modify` closure and the `==` used to skip duplicates run under the property's lock: \
    cancel subscriptions after `modify` returns.
    """)
}

@inline(never)
func transactionCycle(locks: [String], wanting: [String]) -> Never {
  let held = locks.isEmpty ? "a source" : locks.joined(separator: " and ")
  fatalError(
    """
    Evented: a transaction and a locked section wait for each other, which would \
    deadlock: a thread waits for the open transaction to end (\(wanting.joined(separator: "; "))) \
    while holding the lock of \(held), which the transaction's thread waits for. A \
    property's `modify` closure and the `==` used to skip duplicates run under the \
    property's lock: write to sources a transaction may write, and begin transactions, \
    after `modify` returns.
    """)
}

@inline(never)
func transactionHandlerCycle(wanting: [String]) -> Never {
  fatalError(
    """
    Evented: a transaction cancelled a subscription (or dropped its last handle) whose \
    handler, running on another thread, waits for the transaction to end \
    (\(wanting.joined(separator: "; "))): waiting for the handler would deadlock. Cancel \
    subscriptions whose handlers write what a transaction reads or writes after the \
    transaction returns.
    """)
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
