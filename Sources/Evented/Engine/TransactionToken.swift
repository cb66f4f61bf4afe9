// Promise "Transactions" (Transaction.swift), serializable: one transaction runs at a
// time, and a writer from another thread waits for the open one to end before touching
// a source it holds (one it wrote, or read: TransactionReads.swift). Every such wait is
// registered in LockCycles.swift first, so that a wait that would never end (the
// transaction waits for a lock the waiting thread holds) stops the program with a
// message naming the sources instead.

/// The process's transaction token: one transaction runs at a time.
final class TransactionToken: @unchecked Sendable {
  // @unchecked Sendable: `mutex` guards `holder`; the waits for a transaction's end are
  // made on it too.
  static let shared = TransactionToken()

  private let mutex = RawMutex()
  private var holder: OpenTransaction?

  private init() {}

  /// Takes the token for a transaction of the calling thread `me`, waiting while
  /// another thread's transaction holds it; `spare`, an ended transaction of `me` that
  /// nothing else holds, is used again if given.
  func take(_ me: UInt, reusing spare: OpenTransaction?) -> OpenTransaction {
    let open: OpenTransaction
    if let spare {
      spare.isOpen.store(true, ordering: .relaxed)
      spare.isHeld.store(true, ordering: .relaxed)
      open = spare
    } else {
      open = OpenTransaction(owner: me)
    }
    mutex.lock()
    while let other = holder {
      mutex.unlock()
      wait(for: other, me: me, wanting: "to begin a transaction")
      mutex.lock()
    }
    holder = open
    mutex.unlock()
    return open
  }

  /// Gives the token of `open` back and wakes the threads waiting for its end.
  func give(_ open: OpenTransaction) {
    mutex.lock()
    open.isHeld.store(false, ordering: .releasing)
    holder = nil
    mutex.broadcast()
    mutex.unlock()
  }

  /// Waits until `open` has given the token back; `wanting` says what for, for the
  /// message of a cycle of waits.
  func wait(for open: OpenTransaction, me: UInt, wanting: @autoclosure () -> String) {
    LockCycles.shared.startWaiting(me, forTransaction: open, wanting: wanting())
    mutex.lock()
    while open.isHeld.load(ordering: .acquiring) { mutex.wait() }
    mutex.unlock()
    LockCycles.shared.stopWaiting(me)
  }
}

extension Hub {
  /// Waits, unlocked, until no transaction of another thread holds this source (wrote
  /// or read it); called by a writer that found a record in the core. Returns the lock.
  @inlinable
  func waitForTransaction(_ token: consuming Token) -> Token {
    let me = currentThreadID()
    while let record = token.state.pointee.core?.pointee.transaction, record.isHeld(against: me) {
      let mark = record.mark
      let isRead = record.isRead
      token.unlock()
      waitForEnd(of: mark, me: me, writing: HubState<Message, Stored>.self, read: isRead)
      token = storage.lock()
    }
    return token
  }
}

/// Waits until `mark` has ended, for the thread `me`, which wants to write a source
/// whose state has the type `writing`, and which the transaction wrote (or only `read`).
@usableFromInline @inline(never)
func waitForEnd(of mark: OpenTransaction, me: UInt, writing: Any.Type, read: Bool) {
  TransactionToken.shared.wait(
    for: mark, me: me, wanting: "to write \(lockDescription(of: writing)), which it \(read ? "read" : "wrote")")
}
