// Promise "Transactions" (Transaction.swift), serializable against plain writers, reads
// included: a source the open transaction read is held as one it wrote is. A write from
// another thread (plain, `modify`, a mutation in place, an array's mutator or batch)
// waits until the transaction has ended, so it lands wholly after it, and the
// transaction never commits on a state that another thread changed after it read it
// (no write skew against a plain writer).
//
// The transaction's first read of a source, under the source's lock, puts a
// `SourceRead` record in the source's core, unless a record of the transaction is
// there already (it read or wrote the source before). Writers find it where they find
// a written source's record (`HubState.mayHaveToWait`, `Hub.waitForTransaction`), and
// wait the same way, registered with the lock-cycle check. The record hides nothing: a
// read record never makes another thread read the state from before. A later write of
// the transaction replaces it with the write's record. The transaction's end removes
// its read records from their sources before it gives the token back.
//
// Cost: a read outside every transaction loads one global word (`transactionThread`)
// and branches on it. A read on the transaction's thread compares thread IDs; its first
// read of each source allocates the record (and the source's core, if it had none).

import Synchronization

/// The thread running the open transaction, or 0 while none is open: a read on any
/// other thread records nothing. Set and cleared by that thread, which alone relies on
/// it, while it holds the transaction token.
@usableFromInline let transactionThread = Atomic<UInt>(0)

/// A source that the open transaction read, and has not written: other threads' writers
/// wait for the transaction's end, as for a source it wrote.
@usableFromInline
final class SourceRead<Message: Sendable, Stored>: TransactionRecord {
  @usableFromInline let storage: HubStorage<Message, Stored>
  /// Removes the record from its source; a closure made by the inlinable initializer,
  /// capturing nothing, so that it runs code specialized for the source's types.
  @usableFromInline let ending: (SourceRead) -> Void

  @inlinable init(_ storage: HubStorage<Message, Stored>, _ mark: OpenTransaction, version: UInt64) {
    self.storage = storage
    ending = { read in
      read.storage.withLock { state in
        guard let core = state.core, core.pointee.transaction === read else { return }
        core.pointee.transaction = nil
      }
    }
    super.init(mark, key: ObjectIdentifier(storage), earlierVersion: version, isRead: true)
  }

  /// At the transaction's end: removes the record, unless a write of the transaction
  /// replaced it (that write's commit removed its own). The transaction keeps the
  /// record meanwhile, so nothing is released under the source's lock.
  @usableFromInline override func commit(_: UnsafeMutablePointer<DeliveringState>) { ending(self) }
}

extension Hub {
  /// Records a read of this source by the open transaction of the calling thread, the
  /// thread `me`, if it runs one: see the top of this file.
  ///
  /// - Precondition: Called inside withLock.
  @inlinable @inline(__always)
  func noteRead(_ state: inout HubState<Message, Stored>, by me: UInt) {
    let thread = transactionThread.load(ordering: .relaxed)
    if thread != 0, thread == me { noteFirstRead(&state) }
  }

  /// ``noteRead(_:by:)`` for the calling thread.
  ///
  /// - Precondition: Called inside withLock.
  @inlinable @inline(__always)
  func noteRead(_ state: inout HubState<Message, Stored>) {
    if transactionThread.load(ordering: .relaxed) != 0 { noteRead(&state, by: currentThreadID()) }
  }

  /// The transaction's read: leaves a record in the source unless one of the
  /// transaction's is there already.
  ///
  /// - Precondition: Called inside withLock, on the thread running the open transaction.
  @inlinable @inline(never)
  func noteFirstRead(_ state: inout HubState<Message, Stored>) {
    if state.core?.pointee.transaction != nil { return }
    guard let running = DeliveringThread.existing?.pointee.transaction else { return }
    let read = SourceRead(storage, running.mark, version: state.version)
    state.existingCore().pointee.transaction = read
    running.reads.append(read)
  }
}
