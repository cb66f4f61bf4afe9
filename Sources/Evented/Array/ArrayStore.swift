// What an `ArrayProperty` keeps under its hub's lock, and the one path by which every
// mutation and batch changes it.
//
// Mutating in place. A mutation works on the stored buffer itself when nobody outside
// the lock can have seen it, so that appending is amortized O(1) and a bulk mutator
// costs what Array's does. The buffer leaves the lock whenever `value` is read, a
// changeset carrying the array is committed, a subscription replays it, or an
// assignment stores an array its caller still holds; each of these marks the store
// shared. The next mutation of a shared store copies the elements into a new buffer,
// which is again private to the lock. Swift's own uniqueness check is not enough: a
// buffer whose last outside holder has just released it is unique, but the reads that
// holder made are ordered before the writer's mutation only through reference counts,
// which live in the runtime that Thread Sanitizer does not instrument, so it would
// report a race that is not one. A new buffer, written only under the lock until it
// is shared, keeps every access ordered by the lock.
//
// Versions. Every commit counts up `version`, so that an assignment diffed outside the
// lock can tell, when it locks again, whether the array it diffed is still the stored
// one.

import Synchronization

/// Whether a store's buffer has left the lock since it was made.
///
/// A class so that a replay, which reads the store without `inout` access, can mark it.
@usableFromInline
final class ArrayExposure {
  /// Guarded by the lock of the hub whose store holds this object.
  @usableFromInline @exclusivity(unchecked) var isShared = false

  @usableFromInline init() {}
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
    exposure.isShared = true
  }

  /// The current array, for use outside the lock: marks the buffer shared.
  ///
  /// - Precondition: Called inside the hub's lock.
  @inlinable
  func share() -> [Element] {
    exposure.isShared = true
    return elements
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
    let isTransactional = transactionsBegun.load(ordering: .relaxed) && store.pointee.noteArrayCommit(to: hub)
    var batch = Batch(taking: &store.pointee.stored, isUserBatch: isUserBatch, hasRecipients: recipients != nil)
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
    if leftover.changed, let recipients {
      let changeset = ArrayChangeset(
        changes: leftover.changes, array: store.pointee.stored.share(), isTransactional: isTransactional)
      hub.commit(token, to: recipients) { _ in changeset }
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
  init(taking store: inout ArrayStore<Element>, isUserBatch: Bool, hasRecipients: Bool) {
    self.isUserBatch = isUserBatch
    records = isUserBatch || hasRecipients || !_isPOD(Element.self)
    mustCopy = store.exposure.isShared
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
    store.exposure.isShared = mustCopy || isUserBatch
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
    store.exposure.isShared = true
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

extension HubState {
  /// Records a commit about to be made to an array, for transactions
  /// (Transaction.swift): the first write of a transaction keeps the array as it was,
  /// shared, so that the write copies it instead of changing it in place.
  ///
  /// - Returns: Whether the commit is made inside a transaction.
  @discardableResult @inlinable mutating func noteArrayCommit<Element: Sendable>(to hub: Hub<Message, Stored>) -> Bool
  where Stored == ArrayStore<Element> {
    noteCommit(to: hub, at: stored.version) { $0.stored.share() }
  }
}
