// The ownership rule and promise 6's "not called again": the subscriptions of one
// source, in the order they subscribed. Guarded by the hub's lock.
//
// - `slots` lists the subscriptions. Cancelling takes no lock: an ended subscription
//   stays listed until the source meets it. Every subscribe first drops ended
//   subscriptions from the end of the list (so that a subscription made and cancelled
//   is replaced where it was), then checks the next two slots (`scanCursor`) and
//   vacates an ended or ownerless one, leaving a nil tombstone. No path drops an ended
//   subscription whose handler still runs (`isDone`): `removeAllObservers()` must find
//   it to wait for it. Tombstones are compacted once they outnumber the live
//   subscriptions, and all of them are swept together when the slots have doubled
//   since the last sweep (amortized O(1) per subscribe), after a delivery pass that met
//   an ended or ownerless subscription, and when `observerCount` is read. `slots` is
//   never shared outside the lock, so it may be mutated in place.
// - `snapshot` is an immutable array of the subscriptions, built on demand by a commit
//   and dropped whenever `slots` changes. It is never mutated, only replaced, so a
//   delivering thread can iterate it without the lock.
// - `removals` holds the subscriptions taken out by each `removeAllObservers()` call
//   that is still ending them (keyed by a ticket). A concurrent call ends and waits
//   for those too, so that no call returns while a subscription it did not see is
//   still to be ended or still running on another thread.
//
// Nothing that may hold user objects is released here: removed subscriptions, replaced
// snapshots and loaded owners go into a `Garbage` that the caller drops after unlocking.

/// The subscriptions of one source; a plain value guarded by the hub's lock.
@usableFromInline
struct SubscriberList<Message> {
  /// The subscriptions in subscription order; nil marks a vacated slot (a tombstone).
  @usableFromInline var slots: ContiguousArray<Entry<Message>?> = []
  /// The number of non-nil slots.
  @usableFromInline var live = 0
  /// The non-nil slots as an immutable array, once a commit asked for it; nil after any
  /// change of `slots`.
  @usableFromInline var snapshot: ContiguousArray<Entry<Message>>?
  /// The live count found by the last sweep.
  @usableFromInline var liveAtSweep = 0
  /// Where the incremental scan for dead owners continues.
  @usableFromInline var scanCursor = 0
  /// The subscriptions of each `removeAllObservers()` call still ending them.
  @usableFromInline var removals: [UInt: ContiguousArray<Entry<Message>>] = [:]
  /// The ticket of the next `removeAllObservers()` call.
  @usableFromInline var nextRemoval: UInt = 0

  @inlinable init() {}

  /// The subscriptions as of now, as an immutable array.
  @inlinable mutating func currentSnapshot() -> ContiguousArray<Entry<Message>> {
    if let snapshot { return snapshot }
    var fresh = ContiguousArray<Entry<Message>>()
    fresh.reserveCapacity(live)
    for case let entry? in slots { fresh.append(entry) }
    snapshot = fresh
    return fresh
  }

  /// Appends a subscription; sweeps first once the slots have grown to twice the
  /// live count of the last sweep (plus 32), so each sweep is paid for by as many adds.
  @inlinable mutating func add(
    _ entry: Entry<Message>, into garbage: inout Garbage, keepingDeadOwners keepsDeadOwners: Bool = false
  ) {
    trimTail(into: &garbage)
    if slots.count >= 2 * liveAtSweep + 32 { sweep(into: &garbage, keepingDeadOwners: keepsDeadOwners) }
    slots.append(entry)
    live += 1
    dropSnapshot(into: &garbage)
    scanNext(into: &garbage, keepingDeadOwners: keepsDeadOwners)
    _checkInvariants()
  }

  /// Removes up to two ended subscriptions (whose handler is not running; see
  /// `isDone`) or tombstones from the end of the slots.
  /// A subscription made and cancelled before the next subscribe (a reused cell, a
  /// screen opened and closed) is thus replaced where it was, in constant time: churn
  /// at the end of the list neither grows the slots nor waits for a sweep. The order
  /// of the others is untouched.
  @inlinable mutating func trimTail(into garbage: inout Garbage) {
    for _ in 0..<2 {
      let count = slots.count
      if count == 0 { return }
      // Looked at in place, and moved out only when removed: no retain.
      switch slots[count - 1]?.isDone {
      case nil:
        slots.removeLast()
      case false?:
        return
      case true?:
        garbage.sweep(slots.removeLast().unsafelyUnwrapped)
        live -= 1
        dropSnapshot(into: &garbage)
      }
    }
  }

  /// Checks the next two slots for a subscription that ended or whose owner is gone,
  /// and removes it: every subscribe moves the scan on, so the subscriptions of dead
  /// owners are found within half as many subscribes as there are slots, even
  /// without a send.
  @inlinable mutating func scanNext(
    into garbage: inout Garbage, keepingDeadOwners keepsDeadOwners: Bool = false
  ) {
    for _ in 0..<2 {
      if scanCursor >= slots.count { scanCursor = 0 }
      let index = scanCursor
      scanCursor += 1
      // Looked at in place: a handle's live subscription, the common case, is not
      // retained.
      switch slots[index].map({ ($0.isEnded, $0.isOwnedByHandle) }) {
      case nil:
        continue
      case (true, _)?:
        // One still running stays listed until it returns (see `isDone`).
        if slots[index].unsafelyUnwrapped.isDone { vacate(index, into: &garbage) }
        continue
      case (false, true)?:
        continue
      case (false, false)?:
        break
      }
      if let owner = slots[index].unsafelyUnwrapped.sweptOwner {
        garbage.keep(owner: owner)
        continue
      }
      if keepsDeadOwners { continue }
      vacate(index, into: &garbage)
    }
    sweepIfMostlyTombstones(into: &garbage, keepingDeadOwners: keepsDeadOwners)
  }

  /// Leaves a tombstone at `index` and moves its subscription into `garbage`.
  @inlinable mutating func vacate(_ index: Int, into garbage: inout Garbage) {
    guard let entry = slots[index] else { return }
    slots[index] = nil
    live -= 1
    garbage.sweep(entry)
    dropSnapshot(into: &garbage)
  }

  /// Sweeps once tombstones outnumber the live subscriptions (or 32).
  @inlinable mutating func sweepIfMostlyTombstones(into garbage: inout Garbage, keepingDeadOwners: Bool) {
    if slots.count - live > Swift.max(live, 32) { sweep(into: &garbage, keepingDeadOwners: keepingDeadOwners) }
  }

  /// Moves the cached snapshot, if any, into `garbage`.
  @inlinable mutating func dropSnapshot(into garbage: inout Garbage) {
    if let old = snapshot.take() { garbage.keep(snapshot: old) }
  }

  /// Removes every subscription but those that outlive it (`outlivesRemoveAll`).
  /// `garbage.rare().removed` receives them together with those that concurrent calls
  /// took and are still ending.
  ///
  /// - Returns: the ticket to pass to ``finishRemoval(_:into:)`` once they are ended.
  @usableFromInline mutating func removeAll(into garbage: inout Garbage, keepingTracking: Bool = true) -> UInt {
    var taken = ContiguousArray<Entry<Message>>()
    var kept = ContiguousArray<Entry<Message>?>()
    taken.reserveCapacity(live)
    for case let entry? in slots {
      if keepingTracking && entry.outlivesRemoveAll && !entry.isEnded {
        kept.append(entry)
      } else {
        taken.append(entry)
      }
    }
    let more = garbage.rare()
    for other in removals.values { more.removed.append(contentsOf: other.lazy.map { $0 }) }
    more.removed.append(contentsOf: taken.lazy.map { $0 })
    let ticket = nextRemoval
    nextRemoval &+= 1
    removals[ticket] = taken
    live = kept.count
    slots = kept
    scanCursor = 0
    dropSnapshot(into: &garbage)
    _checkInvariants()
    return ticket
  }

  /// Forgets the subscriptions of a finished `removeAll`.
  @usableFromInline mutating func finishRemoval(_ ticket: UInt, into garbage: inout Garbage) {
    // Moved out of the dictionary without a copy, then emptied into the garbage's list
    // (as references of the base class), so that nothing is released under the lock.
    guard var finished = removals.removeValue(forKey: ticket) else { return }
    let list = garbage.rare()
    while let entry = finished.popLast() { list.finishedRemoval.append(entry) }
  }

  /// Drops tombstones and subscriptions that ended or whose owner is gone.
  ///
  /// - Complexity: O(n) in the number of slots.
  ///
  /// - Returns: How many of the kept subscriptions have ended (their handler still
  ///   runs; see `isDone`): `live` less these is the number of live subscriptions.
  @inlinable @discardableResult
  mutating func sweep(into garbage: inout Garbage, keepingDeadOwners keepsDeadOwners: Bool = false) -> Int {
    var endedAndRunning = 0
    compact(into: &garbage) { entry, garbage in
      if entry.isEnded {
        if entry.isDone { return false }
        endedAndRunning += 1
        return true
      }
      if entry.isOwnedByHandle { return true }
      if let owner = entry.sweptOwner {
        garbage.rare().owners.append(owner)
        return true
      }
      return keepsDeadOwners
    }
    return endedAndRunning
  }

  /// Drops tombstones and the subscriptions that ended, without looking at owners:
  /// after a delivery pass, which ends the subscriptions whose owner it found gone.
  ///
  /// - Complexity: O(n) in the number of slots.
  @inlinable mutating func removeEnded(into garbage: inout Garbage) {
    compact(into: &garbage) { entry, _ in !entry.isDone }
  }

  /// Keeps the subscriptions for which `keep` is true, in order, and moves the others
  /// into `garbage`. Compacts in place: kept subscriptions move down by swapping, so
  /// nothing is retained or released for them and no new array is made.
  @inlinable mutating func compact(
    into garbage: inout Garbage, keeping keep: (Entry<Message>, inout Garbage) -> Bool
  ) {
    var kept = 0
    for index in slots.indices {
      guard let entry = slots[index] else { continue }
      if keep(entry, &garbage) {
        if kept != index { slots.swapAt(kept, index) }
        kept += 1
      } else {
        slots[index] = nil
        garbage.sweep(entry)
      }
    }
    if kept != slots.count || kept != live { dropSnapshot(into: &garbage) }
    slots.removeLast(slots.count - kept)
    live = kept
    liveAtSweep = live
    if scanCursor > kept { scanCursor = 0 }
  }

  /// Stops on an impossible state; in debug builds only, after each transition.
  @inlinable func _checkInvariants() {
    #if DEBUG
      if live < 0 || live > slots.count {
        preconditionFailure("Evented: \(live) live subscriptions in \(slots.count) slots")
      }
      if slots.count <= 256 {  // O(n): checked on short lists only, so that debug builds stay linear
        var counted = 0
        for case .some in slots { counted += 1 }
        if counted != live { preconditionFailure("Evented: \(live) live subscriptions counted, \(counted) listed") }
      }
      if let snapshot, snapshot.count != live {
        preconditionFailure("Evented: a snapshot of \(snapshot.count) for \(live) live subscriptions")
      }
      if scanCursor < 0 { preconditionFailure("Evented: the scan is before the start of the list") }
    #endif
  }
}
