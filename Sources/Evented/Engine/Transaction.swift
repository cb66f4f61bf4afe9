// Transactions: atomic, one commit per source, serializable, rolled back on a throw.
//
// The shape, chosen for being the simplest that is sound (Transactions.md, "How it
// works, and why this shape"):
//
// - One transaction at a time. The outermost `transaction { }` holds the process's
//   transaction token (`TransactionToken`) for its closure; a nested one on the same
//   thread is part of it. Transactions therefore run one after another: serializable
//   among themselves, reads included (no write skew), and never in a cycle of waits
//   with each other.
// - A transaction owns what it writes, not by the source's lock (user code never runs
//   under a lock) but by a record in the source's core (`TransactionRecord`). The
//   first write keeps the source's value and version from before; the writes are made
//   in place, under the source's lock, and counted as one change (the version moves
//   once per transaction). Every other thread reads the state from before the
//   transaction (a property's or an array's `value`, every snapshot of a derived
//   value: `HubState.visible(to:)`); the transaction's thread reads its own writes.
//   A version word carries `HubState.mayHideBit` meanwhile, so that a derived value
//   that loads it without the lock reads it under the lock, where the record decides.
// - A write from another thread to a source the open transaction wrote or read (plain,
//   `modify`, a batch) waits, before touching it, until the transaction has ended
//   (`Hub.waitForTransaction`, TransactionToken.swift): transactions and plain writes
//   are serializable, reads included. The transaction's first read of a source leaves
//   a record there that hides nothing (TransactionReads.swift). Event sources hold no
//   state: events sent inside a transaction are kept and sent when it commits; other
//   threads' events go through.
// - Nothing is committed to a subscriber while the transaction runs. When the
//   outermost one returns, its thread settles every source (an unchanged or equal
//   final value commits nothing), then makes every write visible at once with one
//   atomic store (`OpenTransaction.isOpen`): a consistent snapshot that pinned a
//   source before the store finds its version moved when it re-checks, and takes the
//   snapshot again. Then it commits each source once (a property: one change from the
//   value before the transaction; an array: one changeset of every change in order;
//   an event source: each event sent), in the order of their first writes (those a
//   nested transaction rolled back do not count: `rewriteUndone`), releases
//   the token, and delivers, as the end of a delivery frame does (DeliveringThread.swift).
//   A property's Observation scopes are notified then too, after that frame
//   (`ObservationSlot.committedAfterFrame`), never at a write inside the transaction. A
//   subscription made inside the transaction replays the state from before it
//   (`HubState.earlierOfOwnTransaction`), which the commit follows: no change twice.
// - If the closure throws, the sources get their values and versions from before back
//   while every other thread still reads those, and nothing is committed: no thread
//   ever saw the discarded writes. A nested transaction that throws restores what it
//   changed (`Savepoint`) and drops the events it sent; the enclosing one goes on.
// - A thread that waits for the transaction (to write, or to begin one) while holding
//   a source's lock that the transaction's thread waits for would never wake: the wait
//   is registered in LockCycles.swift, which stops the program with a message instead.

import Synchronization

/// Whether any transaction has begun in this process: until then, the write path does
/// not look for the calling thread's transaction.
@usableFromInline let transactionsBegun = Atomic<Bool>(false)

/// One outermost transaction.
@usableFromInline
final class OpenTransaction: Sendable {
  /// The thread running the transaction.
  @usableFromInline let owner: UInt
  /// Whether other threads read the state from before the transaction: cleared once,
  /// when it commits or rolls back, which makes all of it visible at once.
  @usableFromInline let isOpen = Atomic<Bool>(true)
  /// Whether it holds the transaction token: cleared after its commits are made, which
  /// lets the writers waiting for it go on.
  @usableFromInline let isHeld = Atomic<Bool>(true)

  @usableFromInline init(owner: UInt) {
    self.owner = owner
  }
}

/// A step of the running transaction, carried out when it commits: a source it wrote,
/// or an event it sent. A property's step is also the delivery of its commit, postponed
/// to the end of the transaction's frame (TransactionWrites.swift): no second object
/// per source.
@usableFromInline
class TransactionStep: PostponedDelivery {
  /// Whether ``settle()`` has work to do: an array's record always has; a property's
  /// once it was written again or rolled back (a first write alone changed it, and
  /// nothing was restored); an event never has. Touched only by the transaction's
  /// thread.
  @usableFromInline @exclusivity(unchecked) final var mustSettle = false

  @usableFromInline override init() {}

  /// Before the writes become visible: settles what to commit. Does nothing for an
  /// event.
  @usableFromInline func settle() {}

  /// After the writes became visible: commits the step (or, after a rollback, only
  /// ends the source's record), on the transaction's thread, whose state is `thread`.
  @usableFromInline func commit(_ thread: UnsafeMutablePointer<DeliveringState>) {}

  /// Restores the state from before the transaction, which other threads still read.
  @usableFromInline func rollBack() {}
}

/// A source written by the open transaction: kept in the source's core while the
/// transaction runs, where it decides what other threads read. Its fields are guarded by
/// the source's lock, except the ones set once at the first write. A source the
/// transaction only read holds a record too (`isRead`, TransactionReads.swift), which
/// hides nothing but makes other threads' writers wait as well.
@usableFromInline
class TransactionRecord: TransactionStep {
  @usableFromInline let mark: OpenTransaction
  /// The identity of the source's hub storage.
  @usableFromInline let key: ObjectIdentifier
  /// The version before the transaction.
  @usableFromInline let earlierVersion: UInt64
  /// Nothing to commit: a nested rollback or the end restored the state from before.
  @usableFromInline @exclusivity(unchecked) final var isUndone = false
  /// Where the record stands in the transaction's steps.
  @usableFromInline @exclusivity(unchecked) final var index = 0

  /// Whether the transaction only read the source (a `SourceRead`): it hides nothing.
  @usableFromInline let isRead: Bool

  @inlinable init(_ mark: OpenTransaction, key: ObjectIdentifier, earlierVersion: UInt64, isRead: Bool = false) {
    self.mark = mark
    self.key = key
    self.earlierVersion = earlierVersion
    self.isRead = isRead
  }

  /// The value before the transaction, for a snapshot (Snapshot.swift).
  @usableFromInline var earlier: any Sendable { fatalError("Evented: a record without a value") }

  /// The stored value before the transaction, for a replay (Hub+Subscribers.swift).
  @usableFromInline var earlierStored: Any { earlier }

  /// Whether the thread `me` reads the state from before the transaction: it is open,
  /// and it is not `me`'s.
  @inlinable func hides(from me: UInt) -> Bool {
    #if FaultInjection
      if Planted.transactionSeenInPart { return false }
    #endif
    return !isRead && mark.owner != me && mark.isOpen.load(ordering: .acquiring)
  }

  /// Whether a thread other than `me` must wait for the transaction before writing.
  @inlinable func isHeld(against me: UInt) -> Bool {
    mark.owner != me && mark.isHeld.load(ordering: .acquiring)
  }
}

/// The sources a running transaction wrote (``RunningTransaction/written``).
@usableFromInline
struct WrittenSources {
  /// The transaction, which the caller holds.
  @usableFromInline unowned(unsafe) let running: RunningTransaction

  @inlinable init(running: RunningTransaction) {
    self.running = running
  }

  /// Whether the source whose hub storage has the identity `key` was written.
  @inlinable func contains(_ key: ObjectIdentifier) -> Bool { running.hasWritten(key) }
}

/// A nested transaction's start: what to restore if it throws.
@usableFromInline
struct Savepoint {
  /// The number of steps when it began (less any source moved past it since:
  /// ``RunningTransaction/rewriteUndone(_:)``).
  @usableFromInline var steps: Int
  /// Puts back the sources written before it began, as they were then.
  @usableFromInline var undo: [() -> Void] = []
  /// The sources saved in `undo`.
  @usableFromInline var saved: Set<ObjectIdentifier> = []

  @usableFromInline init(steps: Int) {
    self.steps = steps
  }
}

/// The running transaction's own bookkeeping, kept by its thread.
@usableFromInline
final class RunningTransaction {
  /// The transaction; its thread's last one, ended, while this waits as its spare.
  @usableFromInline @exclusivity(unchecked) var mark: OpenTransaction
  /// The sources written and the events sent, in order.
  @usableFromInline @exclusivity(unchecked) var steps: [TransactionStep] = []
  /// The identities of the hub storages of the sources written in `steps[..<indexed]`:
  /// indexed when first asked (``written``), as few transactions are.
  @usableFromInline @exclusivity(unchecked) var writtenIndex = IdentityList()
  @usableFromInline @exclusivity(unchecked) var indexed = 0
  /// The records of the sources read before any write there (TransactionReads.swift),
  /// removed from their sources when the transaction ends.
  @usableFromInline @exclusivity(unchecked) var reads: [TransactionStep] = []
  /// One per open nested transaction.
  @usableFromInline @exclusivity(unchecked) var savepoints: [Savepoint] = []

  @usableFromInline init(_ mark: OpenTransaction) {
    self.mark = mark
  }

  /// `found`, the record read from a source's core under the source's lock, if it is
  /// this transaction's record of a write there. A record in a core is always the open
  /// transaction's (each is removed before the token is given back), so the source's
  /// own record answers, with no search among the steps.
  @inlinable func ownWrite(_ found: TransactionRecord?) -> TransactionRecord? {
    guard let found, !found.isRead, found.mark === mark else { return nil }
    return found
  }

  /// Adds the first write of the source of `record`.
  @inlinable func add(_ record: TransactionRecord) {
    record.index = steps.count
    steps.append(record)
  }

  /// The sources written, by the identity of their hub's storage.
  @inlinable var written: WrittenSources { WrittenSources(running: self) }

  /// Whether the source whose hub storage has the identity `key` was written.
  @inlinable func hasWritten(_ key: ObjectIdentifier) -> Bool {
    while indexed < steps.count {
      if let record = steps[indexed] as? TransactionRecord { writtenIndex.insert(record.key) }
      indexed += 1
    }
    return writtenIndex.contains(key)
  }

  /// Adds an event to send when the transaction commits.
  @inlinable func add(_ event: TransactionStep) {
    steps.append(event)
  }

  /// Notes a later write to the source of `record`; called under its lock, before the
  /// write.
  ///
  /// - Returns: Whether the innermost nested transaction must save the source's state
  ///   (``save(_:)``): this is its first write there, and the source was written before.
  @inlinable @inline(__always) func rewrite(_ record: TransactionRecord) -> Bool {
    if record.isUndone { return rewriteUndone(record) }
    record.mustSettle = true
    guard !savepoints.isEmpty else { return false }
    let last = savepoints.count - 1
    return record.index < savepoints[last].steps && savepoints[last].saved.insert(record.key).inserted
  }

  /// ``rewrite(_:)`` of a source all of whose writes so far nested transactions rolled
  /// back: this is its first write that counts. The source moves to the end of the
  /// steps, so that it commits in the order of this write, and belongs to the innermost
  /// open nested transaction, whose rollback leaves it with nothing to commit again.
  @usableFromInline func rewriteUndone(_ record: TransactionRecord) -> Bool {
    record.isUndone = false
    record.mustSettle = true
    let old = record.index
    steps.remove(at: old)
    for index in old..<steps.count { (steps[index] as? TransactionRecord)?.index = index }
    record.index = steps.count
    steps.append(record)
    for level in savepoints.indices where savepoints[level].steps > old { savepoints[level].steps -= 1 }
    writtenIndex.removeAll()
    indexed = 0
    return false
  }

  /// Keeps `undo`, which puts a source back as it is now, for the innermost nested
  /// transaction's rollback.
  @inlinable func save(_ undo: @escaping () -> Void) {
    savepoints[savepoints.count - 1].undo.append(undo)
  }

  /// Undoes what the innermost nested transaction did.
  @usableFromInline func rollBackNested() {
    let savepoint = savepoints.removeLast()
    for undo in savepoint.undo.reversed() { undo() }
    var kept = Array(steps[..<savepoint.steps])
    for step in steps[savepoint.steps...].reversed() {
      guard let record = step as? TransactionRecord else { continue }  // an event: dropped
      record.rollBack()
      record.isUndone = true
      record.mustSettle = true
    }
    for step in steps[savepoint.steps...] {
      guard let record = step as? TransactionRecord else { continue }
      record.index = kept.count
      kept.append(record)
    }
    steps = kept
    writtenIndex.removeAll()
    indexed = 0
  }
}

/// Runs `body` as one transaction: its writes to any number of properties, arrays and
/// event sources become visible to every other thread at once when it returns, each
/// source committing once; if it throws, none of them is ever seen.
///
/// ```swift
/// transaction {
///   order.status = .paid
///   order.total = 0
/// }
/// // An observer of `order.status.combineLatest(order.total)` receives one update.
/// ```
///
/// - Parameter body: The writes. It may read, write, send, subscribe and cancel.
///   Transactions nest: an inner one is part of the outermost.
/// - Returns: What `body` returns.
/// - Throws: What `body` throws, after rolling back: every source keeps the state it
///   had before, and nothing is delivered. A nested transaction that throws rolls back
///   only its own writes; the enclosing one goes on if it catches the error.
///
/// ## Concurrency
///
/// - **Thread safety:** May be called from any thread, also from a handler. One
///   transaction runs at a time in the process: a transaction on another thread waits
///   for the open one to end. A write from another thread to a property or an array
///   the open transaction wrote or read waits until it ends.
/// - **Ordering:** Transactions and plain writes behave as if run one after another,
///   reads included: a plain write to a source the transaction wrote or read lands
///   wholly before or after it. Nothing of the transaction is visible to other threads
///   before it returns: not a source's `value`, not a derived value, not an observer.
///   Its own thread reads its writes at once, also through derived values. Each source
///   written commits once, with its final value (a property: one change whose old value
///   is from before the transaction; an array: one changeset; an event source: every
///   event sent, in order), in the order of their first writes that a nested
///   transaction did not roll back; an observer of `x.combineLatest(y)` receives one
///   update.
/// - **Reentrancy:** Writes inside `body` never wait for room in a backlog, and nothing
///   is delivered during `body`; observers receive the commits after the outermost
///   transaction ends, and Observation scopes fire then, once (never for a transaction
///   that throws). An observer subscribed inside `body` first receives the state from
///   before the transaction, then its commit.
/// - **Lifetime:** Keeps nothing after it returns.
///
/// - Important: `body` must not wait for another thread that writes to a source it
///   read or wrote (or begins a transaction). A thread that waits for the transaction
///   inside a property's `modify` closure, while the transaction waits for that
///   property, stops the program with a message naming the sources instead of hanging.
@inlinable
public func transaction<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
  let thread = DeliveringThread.enter()
  if let running = thread.pointee.transaction {
    running.savepoints.append(Savepoint(steps: running.steps.count))
    do throws(Failure) {
      let result = try body()
      running.savepoints.removeLast()
      DeliveringThread.exit(thread)
      return result
    } catch {
      running.rollBackNested()
      DeliveringThread.exit(thread)
      throw error
    }
  }
  let running = beginTransaction(thread)
  do throws(Failure) {
    let result = try body()
    endTransaction(running, thread, committing: true)
    return result
  } catch {
    endTransaction(running, thread, committing: false)
    throw error
  }
}

/// Takes the transaction token for the calling thread and starts its bookkeeping (the
/// thread's spare one, with what it allocated, if it kept one).
@usableFromInline func beginTransaction(_ thread: UnsafeMutablePointer<DeliveringState>) -> RunningTransaction {
  if !transactionsBegun.load(ordering: .relaxed) { transactionsBegun.store(true, ordering: .relaxed) }
  let me = thread.pointee.threadID
  guard let running = thread.pointee.spareTransaction.take() else {
    let running = RunningTransaction(OpenTransaction(owner: me))
    TransactionToken.take(me)
    thread.pointee.transaction = running
    transactionThread.store(me, ordering: .relaxed)
    return running
  }
  if isKnownUniquelyReferenced(&running.mark) {
    // Nothing else holds the thread's last transaction: it serves again.
    running.mark.isOpen.store(true, ordering: .relaxed)
    running.mark.isHeld.store(true, ordering: .relaxed)
  } else {
    running.mark = OpenTransaction(owner: me)
  }
  TransactionToken.take(me)
  thread.pointee.transaction = running
  transactionThread.store(me, ordering: .relaxed)
  return running
}

/// Ends the outermost transaction: commits it (or rolls it back), makes it visible at
/// once, commits each step, gives the token back, then delivers.
@usableFromInline func endTransaction(
  _ running: RunningTransaction, _ thread: UnsafeMutablePointer<DeliveringState>, committing: Bool
) {
  // Kept here until it becomes the thread's spare, at the end: moved, not copied.
  let ended = thread.pointee.transaction.take()
  transactionThread.store(0, ordering: .relaxed)
  if committing {
    running.eachStep { if $0.mustSettle { $0.settle() } }
  } else {
    for step in running.steps.reversed() {
      guard let record = step as? TransactionRecord else { continue }
      #if FaultInjection
        if Planted.rolledBackWriteLeftVisible { continue }
      #endif
      record.rollBack()
      record.isUndone = true
      record.settle()
    }
  }
  running.mark.isOpen.store(false, ordering: .releasing)
  if committing {
    running.eachStep { $0.commit(thread) }
  } else {
    for step in running.steps where step is TransactionRecord { step.commit(thread) }
  }
  if !running.reads.isEmpty { running.eachRead { $0.commit(thread) } }
  TransactionToken.give(running.mark)
  // One at a time: `removeAll(keepingCapacity:)` destroys the elements through their
  // type's generic value witnesses.
  while running.steps.popLast() != nil {}
  if !running.reads.isEmpty { while running.reads.popLast() != nil {} }
  if running.indexed != 0 {
    running.writtenIndex.removeAll()
    running.indexed = 0
  }
  if !running.savepoints.isEmpty { running.savepoints.removeAll() }
  thread.pointee.spareTransaction = consume ended
  DeliveringThread.exit(thread)
}

extension RunningTransaction {
  /// Calls `body` with each step, in order, without retaining it: `steps` keeps it,
  /// and nothing adds or removes steps meanwhile (the transaction is no longer the
  /// thread's).
  @inlinable func eachStep(_ body: (TransactionStep) -> Void) {
    for index in steps.indices { Unmanaged.passUnretained(steps[index])._withUnsafeGuaranteedRef(body) }
  }

  /// ``eachStep(_:)`` for the records of the sources read.
  @inlinable func eachRead(_ body: (TransactionStep) -> Void) {
    for index in reads.indices { Unmanaged.passUnretained(reads[index])._withUnsafeGuaranteedRef(body) }
  }
}

extension HubState {
  /// The version and value that the thread `me` reads: the state before the open
  /// transaction that wrote this source, unless it is `me`'s.
  @inlinable mutating func visible(
    to me: UInt, current: (inout Self) -> (version: UInt64, value: any Sendable)
  ) -> (version: UInt64, value: any Sendable) {
    if let record = core?.pointee.transaction, record.hides(from: me) {
      return (record.earlierVersion, record.earlier)
    }
    return current(&self)
  }

  /// The version that the thread `me` reads (see ``visible(to:current:)``).
  @inlinable func visibleVersion(to me: UInt, current: UInt64) -> UInt64 {
    if let record = core?.pointee.transaction, record.hides(from: me) { return record.earlierVersion }
    return current
  }

  /// The stored value before the calling thread's open transaction, if it wrote this
  /// source: what a replay gives a subscription made inside the transaction, whose
  /// commit then delivers the change once. Called under the lock, by a thread that
  /// waited for every other thread's transaction (``Hub/lockForCommit()``).
  @inlinable func earlierOfOwnTransaction() -> Stored? {
    guard let record = core?.pointee.transaction, !record.isRead, record.mark.isOpen.load(ordering: .acquiring) else {
      return nil
    }
    return record.earlierStored as? Stored
  }

  /// The record of an open transaction that hides this source from the calling thread.
  @inlinable var hidingRecord: TransactionRecord? {
    guard let record = core?.pointee.transaction, record.hides(from: currentThreadID()) else { return nil }
    return record
  }

  /// Stores `bits` as ``versionBits``, locked.
  @inlinable static func storeVersion(_ state: UnsafeMutablePointer<HubState>, _ bits: UInt64) {
    versionWord(of: state).pointee.store(bits, ordering: .releasing)
  }
}

extension HubState where Stored: Sendable {
  /// The version and value that the thread `me` reads (see ``visible(to:current:)``).
  @inlinable mutating func visible(to me: UInt) -> (version: UInt64, value: any Sendable) {
    visible(to: me) { ($0.version, $0.stored) }
  }
}
