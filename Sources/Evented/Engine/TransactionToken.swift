// Promise "Transactions" (Transaction.swift), serializable: one transaction runs at a
// time, and a writer from another thread waits for the open one to end before touching
// a source it holds (one it wrote, or read: TransactionReads.swift). Every such wait is
// registered in LockCycles.swift first, so that a wait that would never end (the
// transaction waits for a lock the waiting thread holds) stops the program with a
// message naming the sources instead.

import Synchronization

/// The thread holding the process's transaction token, 0 while none does
/// (``TransactionToken``). A global, like the token's other atomic, so that taking and
/// giving the token back reach it with no lazy initialization.
@usableFromInline let transactionTokenOwner = Atomic<UInt>(0)

/// How many threads wait, or are about to wait, on the token's mutex.
@usableFromInline let transactionTokenWaiters = Atomic<Int>(0)

/// The process's transaction token: one transaction runs at a time.
///
/// Taken and given back with one atomic each while nobody waits:
/// `transactionTokenOwner` holds the thread of the open transaction (0 while none is
/// open), and a thread takes the token by changing it from 0 to its own. A thread that
/// waits (to begin a transaction, or for a transaction's end to write what it holds)
/// counts itself in `transactionTokenWaiters` before it looks at what it waits for
/// under `mutex`; the thread that gives the token back clears `isHeld` and the owner
/// before it reads the count, all sequentially consistent, so either it sees the
/// waiter and wakes it under `mutex`, or the waiter sees the token given back and does
/// not wait.
@usableFromInline
final class TransactionToken: @unchecked Sendable {
  // @unchecked Sendable: owns the lock `mutex`, which guards no stored state (the
  // token's owner and its waiters are the atomics above); threads wait on its condition
  // for the token and for a transaction's end, and are woken under it.
  static let shared = TransactionToken()

  private let mutex = RawMutex()

  private init() {}

  /// Takes the token for a transaction of the calling thread `me`, waiting while
  /// another thread's transaction holds it.
  static func take(_ me: UInt) {
    if !tryTake(me) { waitToTake(me) }
  }

  /// Takes the token for `me` if no thread holds it.
  static func tryTake(_ me: UInt) -> Bool {
    transactionTokenOwner.compareExchange(expected: 0, desired: me, ordering: .sequentiallyConsistent).exchanged
  }

  /// Takes the token for `me` once the thread holding it gives it back.
  static func waitToTake(_ me: UInt) {
    transactionTokenWaiters.add(1, ordering: .sequentiallyConsistent)
    LockCycles.shared.startWaiting(me, forTokenWanting: "to begin a transaction")
    let mutex = shared.mutex
    mutex.lock()
    while !tryTake(me) { mutex.wait() }
    mutex.unlock()
    LockCycles.shared.stopWaiting(me)
    transactionTokenWaiters.subtract(1, ordering: .sequentiallyConsistent)
  }

  /// Gives the token of `open` back and wakes the threads waiting for its end.
  static func give(_ open: OpenTransaction) {
    open.isHeld.store(false, ordering: .sequentiallyConsistent)
    transactionTokenOwner.store(0, ordering: .sequentiallyConsistent)
    if transactionTokenWaiters.load(ordering: .sequentiallyConsistent) != 0 { shared.wakeWaiters() }
  }

  /// Wakes every thread waiting on the mutex.
  func wakeWaiters() {
    mutex.lock()
    mutex.broadcast()
    mutex.unlock()
  }

  /// Waits until `open` has given the token back; `wanting` says what for, for the
  /// message of a cycle of waits.
  func wait(for open: OpenTransaction, me: UInt, wanting: @autoclosure () -> String) {
    transactionTokenWaiters.add(1, ordering: .sequentiallyConsistent)
    LockCycles.shared.startWaiting(me, forTransaction: open, wanting: wanting())
    mutex.lock()
    while open.isHeld.load(ordering: .sequentiallyConsistent) { mutex.wait() }
    mutex.unlock()
    LockCycles.shared.stopWaiting(me)
    transactionTokenWaiters.subtract(1, ordering: .sequentiallyConsistent)
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
