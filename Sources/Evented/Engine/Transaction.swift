// Transactions: writes to several sources from one thread, seen whole by every derived
// value.
//
// - While a thread is inside `transaction { }` it counts as delivering
//   (DeliveringThread.swift): its writes commit at once, never wait for room, and their
//   deliveries are postponed until the outermost transaction ends.
// - The first write of an open transaction to a property records, in the property's
//   core, the value and version it had before (`TransactionRecord`). While any
//   transaction that wrote the property is open, every other thread's snapshot
//   (Snapshot.swift) reads that earlier state; the writing thread reads its own writes.
//   Ending the transaction closes its `OpenTransaction` with one atomic store, which
//   makes all its writes visible to snapshots at once.
// - Then the transaction refreshes every derived value that follows a property it
//   wrote, from the now whole state; the deliveries of its commits that reach those
//   values afterwards (or reached them before, on another thread) find no later state
//   and deliver nothing. A commit made inside a transaction is never computed as the
//   state it made alone (the one-root shortcuts of Root.swift): its message says it
//   was made inside one (`Update.isTransactional`, `ArrayChangeset.isTransactional`),
//   decided under the lock as it is committed, however late it is delivered.
// - A write made by a thread outside the transaction to a property the transaction
//   wrote ends the hiding for that property at once, so that the writing thread reads
//   its own write through every derived value.
// - A derived value with one root loads the root's version without the lock
//   (`DerivedProperty.singleVersion`) unless the version carries
//   `HubState.mayHideBit`, set under the lock from a transaction's first write to the
//   source until the end of the last open transaction that wrote it; then it reads
//   the version under the lock, where the record decides.
// - A derived value made, or observed for the first time, inside a transaction that
//   wrote one of its roots takes the state every other thread sees (a snapshot as
//   `Snapshot.Reader.outsider`), never this thread's view, which holds part of the
//   transaction.

import Synchronization

/// Whether any transaction has begun in this process: until then, the write path does
/// not look for the calling thread's transaction.
@usableFromInline let transactionsBegun = Atomic<Bool>(false)

/// One outermost transaction: open until its closure returns or throws.
@usableFromInline
final class OpenTransaction: Sendable {
  /// The thread running the transaction.
  @usableFromInline let owner: UInt
  @usableFromInline let isOpen = Atomic<Bool>(true)

  @usableFromInline init(owner: UInt) {
    self.owner = owner
  }
}

/// What a property's core keeps about the transactions that wrote it. Guarded by the
/// property's lock.
@usableFromInline
final class TransactionRecord {
  /// The transactions that wrote the property since the record was made.
  @usableFromInline @exclusivity(unchecked) var marks: [OpenTransaction]
  /// The version and value before the first of them wrote; the value is dropped once
  /// they have all ended.
  @usableFromInline let earlierVersion: UInt64
  @usableFromInline @exclusivity(unchecked) var earlierValue: (any Sendable)?
  /// Set by a write from outside the transactions: the earlier state is no longer
  /// shown to anyone.
  @usableFromInline @exclusivity(unchecked) var isRevealed = false

  @usableFromInline init(_ mark: OpenTransaction, earlierVersion: UInt64, earlierValue: any Sendable) {
    marks = [mark]
    self.earlierVersion = earlierVersion
    self.earlierValue = earlierValue
  }

  /// Whether a transaction of `marks` is still open.
  @usableFromInline var isOpen: Bool {
    marks.contains { $0.isOpen.load(ordering: .acquiring) }
  }

  /// Whether the thread `me` must read the earlier state: a transaction that wrote is
  /// open, and it is not one of `me`'s.
  @usableFromInline func hides(from me: UInt) -> Bool {
    #if FaultInjection
      if Planted.transactionSeenInPart { return false }
    #endif
    if isRevealed { return false }
    var open = false
    for mark in marks where mark.isOpen.load(ordering: .acquiring) {
      if mark.owner == me { return false }
      open = true
    }
    return open
  }
}

/// A source written by the running transaction, to settle when it ends.
@usableFromInline
protocol TransactionSource: AnyObject {
  /// Drops the earlier value kept for the transaction and returns the derived values
  /// that follow the source, to refresh.
  func endTransaction() -> [any ObservedNode]
}

/// The running transaction's own bookkeeping, kept by its thread.
@usableFromInline
final class RunningTransaction {
  @usableFromInline let mark: OpenTransaction
  /// The sources it wrote, each once, by the identity of their hub's storage.
  @usableFromInline @exclusivity(unchecked) var written = IdentityList<any TransactionSource>()

  @usableFromInline init(_ mark: OpenTransaction) {
    self.mark = mark
  }
}

/// Runs `body` as one step: its writes to any number of properties, arrays and event
/// sources commit at once on this thread, and no observer of a derived value, on any
/// thread, ever receives a state that contains only part of them.
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
/// - Throws: What `body` throws. This is not a rollback: what `body` wrote before
///   throwing stays written, ends the transaction and is delivered.
///
/// ## Concurrency
///
/// - **Thread safety:** May be called from any thread, also from a handler.
/// - **Ordering:** Each source's observers still receive each of its commits in commit
///   order, after the outermost transaction ends (unless another thread was already
///   delivering for that source: then that thread may deliver them sooner). Derived
///   values see the transaction whole: an observer of `x.combineLatest(y)` whose `x` and
///   `y` are both written receives one update with both. The writing thread reads its
///   own writes at once, also through derived values. Other threads reading a derived
///   `value` see all of it or none of it; reading a property's own `value` may see
///   some writes and not others (no read isolation).
/// - **Reentrancy:** Writes inside `body` never wait for room in a backlog, and
///   nothing is delivered during `body` on this thread.
/// - **Lifetime:** Keeps nothing after it returns.
@inlinable
public func transaction<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
  let thread = DeliveringThread.enter()
  guard thread.pointee.transaction == nil else {
    defer { DeliveringThread.exit(thread) }
    return try body()
  }
  if !transactionsBegun.load(ordering: .relaxed) { transactionsBegun.store(true, ordering: .relaxed) }
  let running = RunningTransaction(OpenTransaction(owner: currentThreadID()))
  thread.pointee.transaction = running
  defer { endTransaction(running, thread) }
  return try body()
}

/// Ends the outermost transaction: makes its writes visible to snapshots at once,
/// refreshes the derived values that follow what it wrote, then delivers its commits.
@usableFromInline func endTransaction(_ running: RunningTransaction, _ thread: UnsafeMutablePointer<DeliveringState>) {
  thread.pointee.transaction = nil
  running.mark.isOpen.store(false, ordering: .releasing)
  var nodes = IdentityList<any ObservedNode>()
  for source in running.written.elements {
    for node in source.endTransaction() { nodes.insert(ObjectIdentifier(node)) { node } }
  }
  for node in nodes.elements { node.refreshLatest() }
  DeliveringThread.exit(thread)
}

extension HubState where Stored: Sendable {
  /// Records a commit about to be made from `stored`: by the calling thread's
  /// transaction, if it runs one; otherwise ends any hiding of this source.
  ///
  /// - Returns: Whether the commit is made inside a transaction, which its message
  ///   says, so that derived values never take it as a state of its own.
  @inlinable mutating func noteCommit(to hub: Hub<Message, Stored>) -> Bool {
    noteCommit(to: hub, at: version) { $0.stored }
  }

  /// The version and value that the thread `me` reads: the state before the open
  /// transactions that wrote this source, unless one of them is `me`'s.
  @inlinable mutating func visible(to me: UInt) -> (version: UInt64, value: any Sendable) {
    visible(to: me) { ($0.version, $0.stored) }
  }
}

extension HubState {
  /// ``noteCommit(to:)`` for a source whose version is `current` and whose value,
  /// before the commit, `earlier` shares (an array's store counts its own versions).
  @discardableResult @inlinable mutating func noteCommit(
    to hub: Hub<Message, Stored>, at current: UInt64, earlier: (inout Self) -> any Sendable
  ) -> Bool {
    guard let transaction = DeliveringThread.existing?.pointee.transaction else {
      // A write from outside: the writer must read it through derived values. The record
      // stays, so that its earlier value is released by the transaction's end, outside
      // the lock, never here.
      if let core, let record = core.pointee.transaction, record.isOpen { record.isRevealed = true }
      return false
    }
    let core = existingCore()
    if let record = core.pointee.transaction, record.isOpen {
      if !record.marks.contains(where: { $0 === transaction.mark }) { record.marks.append(transaction.mark) }
    } else {
      core.pointee.transaction = TransactionRecord(
        transaction.mark, earlierVersion: current, earlierValue: earlier(&self))
    }
    let key = ObjectIdentifier(hub.storage)
    transaction.written.insert(key) { WrittenHub(hub) }
    return true
  }

  /// ``visible(to:)`` for a source whose version and value `current` reads.
  @inlinable mutating func visible(
    to me: UInt, current: (inout Self) -> (version: UInt64, value: any Sendable)
  ) -> (version: UInt64, value: any Sendable) {
    if let record = core?.pointee.transaction, record.hides(from: me), let earlier = record.earlierValue {
      return (record.earlierVersion, earlier)
    }
    return current(&self)
  }

  /// The version that the thread `me` reads (see ``visible(to:)``), `current` unless
  /// it is hidden.
  @inlinable func visibleVersion(to me: UInt, current: UInt64) -> UInt64 {
    if let record = core?.pointee.transaction, record.hides(from: me), record.earlierValue != nil {
      return record.earlierVersion
    }
    return current
  }
}

/// A property's or an array's hub written by the running transaction.
@usableFromInline
final class WrittenHub<Message: Sendable, Stored>: TransactionSource {
  @usableFromInline let hub: Hub<Message, Stored>
  /// ``endTransaction()``, as a closure that captures nothing, made by the inlinable
  /// initializer: so it runs code specialized for the hub's types.
  @usableFromInline let ending: (Hub<Message, Stored>) -> [any ObservedNode]

  @inlinable init(_ hub: Hub<Message, Stored>) {
    self.hub = hub
    ending = { hub in Self.end(hub) }
  }

  @usableFromInline func endTransaction() -> [any ObservedNode] {
    ending(hub)
  }

  /// ``endTransaction()`` for `hub`.
  @inlinable static func end(_ hub: Hub<Message, Stored>) -> [any ObservedNode] {
    let token = hub.storage.lock()
    guard let core = token.state.pointee.core else {
      token.unlock()
      return []
    }
    var earlier: (any Sendable)?
    if let record = core.pointee.transaction, !record.isOpen { swap(&earlier, &record.earlierValue) }
    HubState.publishHiding(token.state)
    var nodes: [any ObservedNode] = []
    for case let entry? in core.pointee.subscribers.slots {
      if let root = entry as? RootEntry<Message>, !root.isEnded, let node = root.node { nodes.append(node) }
    }
    token.unlock()
    _ = earlier  // released after unlocking
    return nodes
  }
}

/// Elements each kept once by an identity, in the order they were first inserted: a
/// list searched from the end while it is short (a transaction usually writes a few
/// sources), with a hash index once it is longer.
@usableFromInline
struct IdentityList<Element> {
  @usableFromInline var keys: [ObjectIdentifier] = []
  @usableFromInline var elements: [Element] = []
  /// Every key, once there are more than `linearLimit`.
  @usableFromInline var index: Set<ObjectIdentifier>?

  @inlinable static var linearLimit: Int { 16 }

  @inlinable init() {}

  /// Whether `key` is in the list.
  @inlinable func contains(_ key: ObjectIdentifier) -> Bool {
    index?.contains(key) ?? keys.contains(key)
  }

  /// Appends the element `make` makes for `key`, unless `key` is in the list.
  @inlinable mutating func insert(_ key: ObjectIdentifier, _ make: () -> Element) {
    if index == nil {
      if keys.last == key || keys.contains(key) { return }
      if keys.count == Self.linearLimit { index = Set(keys) }
    }
    if index?.insert(key).inserted == false { return }
    keys.append(key)
    elements.append(make())
  }
}
