// Promise "Transactions" (Transaction.swift): what a transaction keeps of each source it
// wrote, and how it commits or rolls back each one. A property's record keeps its value
// from before; an array's keeps its elements from before and the changes made since, in
// order, for one changeset; an event is kept until the transaction commits.
//
// Each step carries out its work through a closure made by its inlinable initializer,
// which captures nothing: so the work runs code specialized for the source's types,
// with no generic metadata to look up.

import Synchronization

/// A property written by the open transaction.
@usableFromInline
final class PropertyWrite<Value: Sendable>: TransactionRecord {
  @usableFromInline let hub: Hub<Update<Value>, Value>
  /// The value before the transaction.
  @usableFromInline let earlierValue: Value
  /// The property's duplicate check, kept by its second write: a first write alone
  /// never leaves the value from before (``settleNow()``).
  @usableFromInline @exclusivity(unchecked) var isDuplicate: (@Sendable (Value, Value) -> Bool)?
  @usableFromInline let work: (PropertyWrite, StepWork) -> Void
  /// The commit, once made, while its delivery waits for the end of the transaction's
  /// frame (``deliverNow(_:)``): the final value, its recipients and the property's
  /// core. Touched only by the transaction's thread, which delivers for the property
  /// meanwhile. Kept in fields whose types the record's deinit destroys without looking
  /// up generic metadata (an `Inline` package here would cost that at every release).
  @usableFromInline @exclusivity(unchecked) var pendingNew: Value
  @usableFromInline @exclusivity(unchecked) var pendingEntries: ContiguousArray<Entry<Update<Value>>>?
  @usableFromInline @exclusivity(unchecked) var pendingCore: UnsafeMutablePointer<HubCore<Update<Value>>>?

  @inlinable init(_ hub: Hub<Update<Value>, Value>, _ mark: OpenTransaction, earlier: Value, earlierVersion: UInt64) {
    self.hub = hub
    earlierValue = earlier
    pendingNew = earlier
    work = { record, work in
      switch work {
      case .settle: record.settleNow()
      case .commit(let thread): record.commitNow(thread)
      case .rollBack: record.rollBackNow()
      case .deliver(let thread): record.deliverNow(thread)
      }
    }
    super.init(mark, key: ObjectIdentifier(hub.storage), earlierVersion: earlierVersion)
  }

  @usableFromInline override var earlier: any Sendable { earlierValue }

  @usableFromInline override func settle() { work(self, .settle) }
  @usableFromInline override func commit(_ thread: UnsafeMutablePointer<DeliveringState>) {
    work(self, .commit(thread))
  }
  @usableFromInline override func rollBack() { work(self, .rollBack) }
  @usableFromInline override func run(_ thread: UnsafeMutablePointer<DeliveringState>) { work(self, .deliver(thread)) }

  @inlinable func rollBackNow() {
    let old = hub.storage.withLock { Hub<Update<Value>, Value>.replace(&$0.stored, with: earlierValue) }
    withExtendedLifetime(old) {}
  }

  /// A final value equal to the one before commits nothing (when the property skips
  /// duplicates: the `==` runs under the lock, as for any write): then the version
  /// goes back to the one before, which is all any other thread saw. Called only if
  /// the property was written again or rolled back (``TransactionStep/mustSettle``):
  /// the first write stored a value that its `==` found different from the one before.
  @inlinable func settleNow() {
    let token = hub.storage.lock()
    if !isUndone, isDuplicate?(earlierValue, token.state.pointee.stored) == true { isUndone = true }
    if isUndone { HubState.storeVersion(token.state, earlierVersion | versionMayHideBit) }
    token.unlock()
  }

  /// One change, from the value before the transaction to the final one; then the
  /// property's Observation scopes are notified, once the thread's outermost delivery
  /// frame has ended (a write inside the transaction notified nobody). `thread` is the
  /// state of the calling thread, the transaction's.
  @inlinable func commitNow(_ thread: UnsafeMutablePointer<DeliveringState>) {
    let token = hub.storage.lock()
    let state = token.state
    let record = state.pointee.core?.pointee.transaction.take()
    HubState.storeVersion(state, state.pointee.version)
    if isUndone {
      token.unlock()
      return withExtendedLifetime(record) {}
    }
    if let recipients = state.pointee.recipientsOfCommit() {
      if Hub<Update<Value>, Value>.usesParcels {
        hub.commit(token, to: consume recipients) { [earlierValue] stored in
          Update(old: earlierValue, new: stored, isInitial: false, isFromTransaction: true)
        }
      } else {
        commitInline(token, to: consume recipients, thread: thread)
      }
    } else {
      token.unlock()
    }
    withExtendedLifetime(record) {}
    // A property's hub storage: only a property's writes are kept for a transaction.
    unsafeDowncast(hub.storage, to: PropertyHubStorage<Update<Value>, Value>.self).observation.pointee
      .committedAfterFrame()
  }

  /// ``Hub/commit(_:to:inPass:_:)`` of a small value: if this thread becomes the
  /// property's deliverer inside the transaction's frame, the record itself is the
  /// postponed delivery (``deliverNow(_:)``), where the hub would allocate one. Takes
  /// over the caller's lock.
  @inlinable func commitInline(
    _ token: consuming Hub<Update<Value>, Value>.Token, to recipients: consuming Recipients<Update<Value>>,
    thread: UnsafeMutablePointer<DeliveringState>
  ) {
    let state = token.state
    let package = Inline.make(for: consume recipients) {
      Update(old: earlierValue, new: state.pointee.stored, isInitial: false, isFromTransaction: true)
    }
    let start = state.pointee.queue.start(package) { !DeliveringThread.isDelivering }
    guard case .deliver = start, case .all(let entries) = package.recipients else {
      return hub.proceed(token, start, package)
    }
    guard thread.pointee.depth > 0 else { return hub.proceed(token, start, package) }
    let core = state.pointee.core.unsafelyUnwrapped
    token.unlock()
    // Stored after unlocking: the value replaced may be released here.
    pendingCore = core
    pendingNew = package.message.new
    pendingEntries = entries
    DeliveringThread.postpone(thread, self)
  }

  /// Delivers the commit, then the property's queue, at the end of the transaction's
  /// frame (as `PostponedDrain` does).
  @inlinable func deliverNow(_ thread: UnsafeMutablePointer<DeliveringState>) {
    guard let core = pendingCore.take(), let entries = pendingEntries.take() else { return }
    let first = Inline(
      message: Update(old: earlierValue, new: pendingNew, isInitial: false, isFromTransaction: true),
      recipients: .all(entries))
    hub.drain(first, core: core, thread: thread)
  }
}

/// An array written by the open transaction.
@usableFromInline
final class ArrayWrite<Element: Sendable>: TransactionRecord {
  @usableFromInline let hub: Hub<ArrayChangeset<Element>, ArrayStore<Element>>
  /// The elements before the transaction.
  @usableFromInline let earlierElements: [Element]
  /// The changes made since, in order. Guarded by the array's lock.
  @usableFromInline @exclusivity(unchecked) var changes: [ArrayChange<Element>] = []
  @usableFromInline let work: (ArrayWrite, StepWork) -> Void

  @inlinable init(
    _ hub: Hub<ArrayChangeset<Element>, ArrayStore<Element>>, _ mark: OpenTransaction, earlier: [Element],
    earlierVersion: UInt64
  ) {
    self.hub = hub
    earlierElements = earlier
    work = { record, work in
      switch work {
      case .settle: record.settleNow()
      case .commit: record.commitNow()
      case .rollBack: record.rollBackNow()
      case .deliver: break  // an array's commit is delivered through the hub
      }
    }
    super.init(mark, key: ObjectIdentifier(hub.storage), earlierVersion: earlierVersion)
    mustSettle = true
  }

  @usableFromInline override var earlier: any Sendable { earlierElements }
  @usableFromInline override var earlierStored: Any {
    var store = ArrayStore(earlierElements)
    store.version = earlierVersion
    return store
  }

  @usableFromInline override func settle() { work(self, .settle) }
  @usableFromInline override func commit(_ thread: UnsafeMutablePointer<DeliveringState>) {
    work(self, .commit(thread))
  }
  @usableFromInline override func rollBack() { work(self, .rollBack) }

  @inlinable func rollBackNow() {
    let old = hub.storage.withLock { state in
      state.stored.exposure.state = .shared
      var old = earlierElements
      swap(&old, &state.stored.elements)
      changes = []
      return old
    }
    withExtendedLifetime(old) {}
  }

  /// The version moves once per transaction; back to the one before if nothing changed.
  @inlinable func settleNow() {
    hub.storage.withLock { state in
      if changes.isEmpty { isUndone = true }
      state.stored.version = isUndone ? earlierVersion : earlierVersion &+ 1
    }
  }

  /// One changeset of every change, in order.
  @inlinable func commitNow() {
    let token = hub.storage.lock()
    let store = token.state
    let record = store.pointee.core?.pointee.transaction.take()
    guard !isUndone, let recipients = store.pointee.recipientsOfCommit() else {
      token.unlock()
      return withExtendedLifetime(record) {}
    }
    let changeset = ArrayChangeset(changes: changes, array: store.pointee.stored.share(with: recipients))
    hub.commit(token, to: consume recipients) { _ in changeset }
    withExtendedLifetime(record) {}
  }

  /// Saves the elements and the number of changes now, for the innermost nested
  /// transaction. Called under the array's lock.
  @inlinable func save(_ running: RunningTransaction, elements: [Element]) {
    let count = changes.count
    running.save { [self] in
      let old = hub.storage.withLock { state in
        state.stored.exposure.state = .shared
        var old = elements
        swap(&old, &state.stored.elements)
        changes.removeSubrange(count...)
        return old
      }
      withExtendedLifetime(old) {}
    }
  }
}

extension HubState {
  /// The record of the running transaction of the calling thread for the array of
  /// `state`, made by its first write there; nil outside a transaction. Called under
  /// the array's lock, before a write.
  @inlinable static func arrayWrite<Element: Sendable>(
    _ state: UnsafeMutablePointer<HubState>, _ hub: Hub<Message, Stored>
  ) -> ArrayWrite<Element>? where Stored == ArrayStore<Element>, Message == ArrayChangeset<Element> {
    guard transactionsBegun.load(ordering: .relaxed), let running = DeliveringThread.existing?.pointee.transaction
    else { return nil }
    if let record = running.ownWrite(state.pointee.core?.pointee.transaction) {
      let write = unsafeDowncast(record, to: ArrayWrite<Element>.self)
      if running.rewrite(record) { write.save(running, elements: state.pointee.stored.share()) }
      return write
    }
    let write = ArrayWrite(
      hub, running.mark, earlier: state.pointee.stored.share(), earlierVersion: state.pointee.stored.version)
    state.pointee.existingCore().pointee.transaction = write
    running.add(write)
    return write
  }

  /// The elements the calling thread reads, if an open transaction of another thread
  /// hides the stored ones.
  @inlinable func hiddenElements<Element: Sendable>() -> [Element]? where Stored == ArrayStore<Element> {
    guard let record = hidingRecord else { return nil }
    return unsafeDowncast(record, to: ArrayWrite<Element>.self).earlierElements
  }
}

/// An event sent inside the open transaction, sent when it commits.
@usableFromInline
final class EventSend<Event: Sendable>: TransactionStep {
  @usableFromInline let hub: Hub<Event, Void>
  @usableFromInline let event: Event
  @usableFromInline let sending: (EventSend) -> Void

  @inlinable init(_ hub: Hub<Event, Void>, _ event: Event) {
    self.hub = hub
    self.event = event
    sending = { step in step.hub.send(step.event) }
  }

  @usableFromInline override func commit(_: UnsafeMutablePointer<DeliveringState>) { sending(self) }
}

/// What a step is asked to do (``TransactionStep``).
@usableFromInline
enum StepWork {
  case settle, rollBack
  /// Commits, on the transaction's thread, whose state it carries.
  case commit(UnsafeMutablePointer<DeliveringState>)
  /// Delivers a commit postponed to the end of the thread's frame.
  case deliver(UnsafeMutablePointer<DeliveringState>)
}

extension Hub where Stored == Void {
  /// Sends `event`, or keeps it for the commit of the calling thread's transaction.
  @inlinable @inline(__always) func sendFromSource(_ event: Message) {
    if transactionsBegun.load(ordering: .relaxed) { return sendOrKeep(event) }
    send(event)
  }

  /// Keeps `event` for the commit of the calling thread's transaction, if any; else sends it.
  @inlinable @inline(never)
  func sendOrKeep(_ event: Message) {
    guard let running = DeliveringThread.existing?.pointee.transaction else { return send(event) }
    running.add(EventSend(self, event))
  }
}
