// What an `ArrayProperty` keeps under its hub's lock, and the one path by which every
// mutation and batch changes it.
//
// Mutating in place. A mutation works on the stored buffer itself unless someone else
// holds it, so that appending is amortized O(1) and a bulk mutator costs what Array's
// does. Swift's copy-on-write makes that correct on its own: a mutation of a buffer that
// another array still references copies it first. What it does not make is an order
// that Thread Sanitizer sees: a holder's reads are ordered before the writer's in-place
// mutation only through reference counts, which live in the runtime that Thread
// Sanitizer does not instrument, so it would report a race that is not one. So the
// store tracks where its buffer went (`Exposure`):
//
// - `owned`: the buffer never left the lock since it was made.
// - `lent`: it left the lock only in changesets committed to handlers that keep no
//   message (`SubscriptionCore.keepsNoMessage`), run on the delivering thread. Such a
//   thread reads the buffer before its next step under the hub's lock, or before it
//   stops delivering (`DeliveryQueue.tryStop`, a releasing exchange), and keeps its
//   reference to the changeset until then (`Hub.drain`). A mutation first loads the
//   queue's flags acquiring (`prepareInPlace`): every reader that let go of the buffer
//   is then ordered before it, and copy-on-write copies a buffer still held. So a
//   synchronous observer that keeps nothing costs no copy.
// - `shared`: it left the lock any other way: `value` was read, a changeset went to a
//   queue, a sequence or a derived value, a subscription replayed it, a user's batch
//   could keep it, or an assignment stored an array its caller still holds. The next
//   mutation copies the elements into a new buffer of the lock's own, so that every
//   access stays ordered by the lock.

// Versions. Every commit counts up `version`, so that an assignment diffed outside the
// lock can tell, when it locks again, whether the array it diffed is still the stored
// one.

import Synchronization

/// Where a store's buffer went since it was made (see the top of this file).
@usableFromInline
enum Exposure: UInt8 {
  case owned, lent, shared
}

/// Where a store's buffer went since it was made.
///
/// A class so that a replay, which reads the store without `inout` access, can mark it.
@usableFromInline
final class ArrayExposure {
  /// Guarded by the lock of the hub whose store holds this object.
  @usableFromInline @exclusivity(unchecked) var state = Exposure.owned

  @usableFromInline init() {}

  /// Whether the next mutation must copy the elements into a buffer of the lock's own.
  @inlinable var isShared: Bool { state == .shared }
}

/// The stored value of an `ArrayProperty`'s hub.
@usableFromInline
struct ArrayStore<Element> {
  /// The current array.
  @usableFromInline var elements: [Element]
  /// Counts commits.
  @usableFromInline var version: UInt64 = 0
  /// Whether `elements` may be held outside the lock.
  @usableFromInline let exposure = ArrayExposure()

  @usableFromInline init(_ elements: [Element]) {
    self.elements = elements
    exposure.state = .shared
  }

  /// The current array, for use outside the lock: marks the buffer shared.
  ///
  /// - Precondition: Called inside the hub's lock.
  @inlinable
  func share() -> [Element] {
    exposure.state = .shared
    return elements
  }

  /// The current array, for a changeset committed to `recipients`: lent if no
  /// recipient keeps it, else shared.
  ///
  /// - Precondition: Called inside the hub's lock.
  @inlinable
  func share<Message>(with recipients: Recipients<Message>) -> [Element] {
    if exposure.state != .shared && recipients.keepNoMessage {
      exposure.state = .lent
      return elements
    }
    return share()
  }
}

extension HubState {
  /// Whether the stored buffer may be changed in place, without a copy of the lock's
  /// own; orders the readers of a lent buffer before the change (see the top of
  /// ArrayStore.swift).
  ///
  /// - Precondition: Called inside the hub's lock.
  @inlinable mutating func prepareInPlace<Element>() -> Bool where Stored == ArrayStore<Element> {
    switch stored.exposure.state {
    case .owned: return true
    case .shared: return false
    case .lent:
      _ = core?.pointee.queue.flags.load(ordering: .acquiring)
      return true
    }
  }
}

/// A copy of `elements` in a buffer of its own, with room for `extra` more.
@inlinable
func privateCopy<Element>(of elements: [Element], extra: Int = 0) -> [Element] {
  var copy: [Element] = []
  copy.reserveCapacity(elements.count + extra)
  copy.append(contentsOf: elements)
  return copy
}

extension ArrayProperty {
  /// What a commit takes out of the lock, to release after unlocking: the batch's
  /// recorded changes (which hold every removed element) and the buffer it replaced;
  /// and whether anything changed.
  @usableFromInline
  struct Leftover {
    @usableFromInline var changes: [ArrayChange<Element>]
    @usableFromInline var replaced: [Element]?
    @usableFromInline var changed: Bool

    @inlinable init(changes: [ArrayChange<Element>], replaced: [Element]?, changed: Bool) {
      self.changes = changes
      self.replaced = replaced
      self.changed = changed
    }
  }

  /// Runs `body` on the stored array through a batch, under the lock, and commits what
  /// it recorded as one changeset; if `body` throws, undoes it and commits nothing.
  ///
  /// `check` runs first, on the stored count; if it returns false, nothing runs, the
  /// lock is released and the count is returned for the caller's message.
  @inlinable
  func mutate<Outcome, Failure: Error>(
    isUserBatch: Bool,
    check: (Int) -> Bool = { _ in true },
    _ body: (inout Batch) throws(Failure) -> Outcome
  ) throws(Failure) -> (Outcome?, badCount: Int?) {
    let token = hub.lockForCommit()
    let store = token.state
    guard check(store.pointee.stored.elements.count) else {
      let count = store.pointee.stored.elements.count
      token.unlock()
      return (nil, count)
    }
    // Nobody can subscribe or cancel while the lock is held: the recipients found now
    // are those of the commit.
    let recipients = store.pointee.recipientsOfCommit()
    // Inside a transaction, the changes are kept for its one changeset (TransactionWrites.swift).
    let write = HubState.arrayWrite(store, hub)
    let inPlace = store.pointee.prepareInPlace()
    var batch = Batch(
      taking: &store.pointee.stored, inPlace: inPlace, isUserBatch: isUserBatch,
      hasRecipients: recipients != nil || write != nil)
    let outcome: Outcome
    do throws(Failure) {
      outcome = try body(&batch)
    } catch {
      let leftover = batch.undo(into: &store.pointee.stored)
      token.unlock()
      withExtendedLifetime(leftover) {}
      throw error
    }
    let leftover = batch.finish(into: &store.pointee.stored)
    if let write {
      if leftover.changed { write.changes.append(contentsOf: leftover.changes) }
      token.unlock()
    } else if leftover.changed, let recipients {
      let changeset = ArrayChangeset(changes: leftover.changes, array: store.pointee.stored.share(with: recipients))
      hub.commit(token, to: consume recipients) { _ in changeset }
    } else {
      token.unlock()
    }
    withExtendedLifetime(leftover) {}
    return (outcome, nil)
  }
}

extension ArrayProperty.Batch {
  /// Takes the stored elements over for the time of the batch.
  ///
  /// - Precondition: Called inside the hub's lock; ``finish(into:)`` or
  ///   ``undo(into:)`` gives the elements back before it is released.
  @inlinable
  init(taking store: inout ArrayStore<Element>, inPlace: Bool, isUserBatch: Bool, hasRecipients: Bool) {
    self.isUserBatch = isUserBatch
    records = isUserBatch || hasRecipients || !_isPOD(Element.self)
    mustCopy = !inPlace
    swap(&current, &store.elements)
  }

  /// Gives the elements back to `store`, as changed; returns what to release after
  /// unlocking.
  ///
  /// A user's batch leaves the store shared: its closure may have kept the array or a
  /// slice of it.
  @inlinable
  mutating func finish(into store: inout ArrayStore<Element>) -> ArrayProperty<Element>.Leftover {
    swap(&current, &store.elements)
    if changed { store.version &+= 1 }
    if mustCopy || isUserBatch {
      store.exposure.state = .shared
    } else if store.exposure.state == .shared {
      // The batch copied the elements.
      store.exposure.state = .owned
    }
    return ArrayProperty<Element>.Leftover(changes: changes, replaced: replaced, changed: changed)
  }

  /// Gives the elements back to `store` as they were before the batch; returns what
  /// to release after unlocking.
  ///
  /// - Complexity: Undoes the changes one at a time, in reverse, unless the batch
  ///   worked on a copy.
  @inlinable
  mutating func undo(into store: inout ArrayStore<Element>) -> ArrayProperty<Element>.Leftover {
    if let original = replaced {
      // The batch worked on a copy: the shared buffer is unchanged.
      replaced = current
      current = original
    } else {
      for change in changes.reversed() {
        switch change {
        case .insert(let index, _): current.remove(at: index)
        case .remove(let index, let element): current.insert(element, at: index)
        case .replace(let index, let old, _): current[index] = old
        case .move(let from, let to, let element):
          current.remove(at: to)
          current.insert(element, at: from)
        }
      }
    }
    swap(&current, &store.elements)
    store.exposure.state = .shared
    return ArrayProperty<Element>.Leftover(changes: changes, replaced: replaced, changed: false)
  }

  /// Notes a change, and records it if changes are recorded.
  @inlinable @inline(__always)
  mutating func record(_ change: ArrayChange<Element>) {
    changed = true
    if records { changes.append(change) }
  }

  /// Makes `current` a buffer of the lock's own before it is changed, with room for
  /// `extra` more elements.
  @inlinable @inline(__always)
  mutating func makeWritable(extra: Int = 0) {
    if _slowPath(mustCopy) { copyBuffer(extra: extra) }
  }

  @inlinable @inline(never)
  mutating func copyBuffer(extra: Int) {
    let copy = privateCopy(of: current, extra: extra)
    replaced = current
    current = copy
    mustCopy = false
  }
}
