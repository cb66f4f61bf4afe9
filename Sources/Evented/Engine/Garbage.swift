// Promise 2 (no user code under a lock): what a locked step takes out of the state, to
// release after unlocking. Removed subscriptions, replaced snapshots and owners loaded
// to test liveness may hold the last reference to user objects, whose deinit can run
// any code; a transition moves them into a `Garbage` that the caller drops (or ends,
// waiting as `cancel()` does) once the lock is released.

/// What a transition took out of the state, to release after unlocking.
///
/// The fields are what a subscribe or a delivery pass takes out; what the rarer steps
/// take (`removeAllObservers`, sweeps) is in `more`, made when first needed, so that the
/// common steps make, move and drop a small value.
///
/// Each field holds its reference unmanaged, so that the value is trivial to destroy:
/// ``dispose()`` consumes it and releases what it holds, and its `deinit` releases it
/// all for a value dropped without `dispose()`. (Optional class references of the
/// engine's types, as fields, were destroyed at the end of every subscribe through
/// their types' value witnesses, looked up at run time: about 40 instructions each.)
/// Not copyable, so that no reference is released twice.
@frozen @usableFromInline
struct Garbage: ~Copyable {
  /// The storage of a replaced snapshot of the subscriptions (``SubscriberList/snapshot``,
  /// see ``keep(snapshot:)``).
  @usableFromInline var snapshot: Unmanaged<AnyObject>?
  /// Removed by a scan or a sweep: already ended, or ownerless; ended without a wait.
  /// The first two are kept apart, so that a scan (two slots) allocates nothing.
  @usableFromInline var sweptFirst: Unmanaged<SubscriptionCore>?
  @usableFromInline var sweptSecond: Unmanaged<SubscriptionCore>?
  /// Owners loaded by the incremental scan, released after unlocking.
  @usableFromInline var scannedFirst: Unmanaged<AnyObject>?
  @usableFromInline var scannedSecond: Unmanaged<AnyObject>?
  /// What the rarer steps took out.
  @usableFromInline var more: Unmanaged<MoreGarbage>?

  @inlinable init() {}

  /// ``more``, made on first use.
  @inlinable mutating func rare() -> MoreGarbage {
    if let more { return more.takeUnretainedValue() }
    let made = MoreGarbage()
    more = .passRetained(made)
    return made
  }

  /// Keeps a replaced snapshot to release after unlocking. Only its storage object is
  /// kept, which releases the subscriptions it lists when it goes: `ContiguousArray` is
  /// a frozen struct whose one stored property is a reference to its storage.
  @inlinable mutating func keep<Message>(snapshot old: consuming ContiguousArray<Entry<Message>>) {
    let storage = unsafeBitCast(old, to: AnyObject.self)
    if snapshot == nil {
      snapshot = .passRetained(storage)
    } else {
      rare().snapshots.append(storage)
    }
  }

  /// Keeps a removed subscription to end after unlocking.
  @inlinable mutating func sweep<Message>(_ entry: consuming Entry<Message>) {
    if let overflow = Self.place(entry as SubscriptionCore, in: &sweptFirst, or: &sweptSecond) {
      rare().swept.append(overflow)
    }
  }

  /// Keeps an owner loaded by a scan, to release after unlocking.
  @inlinable mutating func keep(owner: AnyObject) {
    if let overflow = Self.place(owner, in: &scannedFirst, or: &scannedSecond) { rare().owners.append(overflow) }
  }

  /// Puts `object` in whichever of `first` and `second` is empty, retained; returns it
  /// if neither is.
  @inlinable static func place<Object: AnyObject>(
    _ object: Object, in first: inout Unmanaged<Object>?, or second: inout Unmanaged<Object>?
  ) -> Object? {
    if first == nil {
      first = .passRetained(object)
    } else if second == nil {
      second = .passRetained(object)
    } else {
      return object
    }
    return nil
  }

  /// Ends the removed subscriptions, waiting for any of them that runs on another
  /// thread, and the swept ones without waiting; then sweeps the observers of the
  /// following nodes that a sweep found without a live observer (FollowerEntry.swift);
  /// then releases everything. Must be called without any lock held.
  ///
  /// - Returns: Whether it swept a node's observers (which may have freed the node and
  ///   ended its subscriptions).
  @inlinable @discardableResult consuming func dispose() -> Bool {
    let (snapshot, first, second) = (snapshot, sweptFirst, sweptSecond)
    let (scannedFirst, scannedSecond, more) = (scannedFirst, scannedSecond, more)
    discard self
    first?.takeRetainedValue().endSwept()
    second?.takeRetainedValue().endSwept()
    var sweptNodes = SweepRequest.serve(scannedFirst?.takeRetainedValue())
    if SweepRequest.serve(scannedSecond?.takeRetainedValue()) { sweptNodes = true }
    snapshot?.release()
    guard let more = more?.takeRetainedValue() else { return sweptNodes }
    // First end the subscriptions that are not running, so that none of them starts
    // while this waits for one that is; then end (or wait for) every one.
    for entry in more.removed where entry.runner == 0 { entry.end() }
    for entry in more.removed { entry.end() }
    for entry in more.swept { entry.endSwept() }
    for owner in more.owners where SweepRequest.serve(owner) { sweptNodes = true }
    return sweptNodes
  }

  /// Releases what a value dropped without ``dispose()`` holds (a removal's finished
  /// list), ending nothing.
  @inlinable deinit {
    snapshot?.release()
    sweptFirst?.release()
    sweptSecond?.release()
    scannedFirst?.release()
    scannedSecond?.release()
    more?.release()
  }
}

/// What the rarer locked steps take out of the state, to release after unlocking.
@usableFromInline
final class MoreGarbage {
  /// Removed by `removeAllObservers` (this call's and those of calls still ending
  /// theirs): ended with a wait, as `cancel()` does.
  @usableFromInline var removed: ContiguousArray<SubscriptionCore> = []
  /// The list of a finished `removeAllObservers` call, dropped after unlocking.
  @usableFromInline var finishedRemoval: [SubscriptionCore] = []
  /// Removed by a sweep beyond the first two.
  @usableFromInline var swept: [SubscriptionCore] = []
  /// Owners loaded by a sweep.
  @usableFromInline var owners: [AnyObject] = []
  /// Storage of replaced snapshots beyond the first.
  @usableFromInline var snapshots: [AnyObject] = []

  @usableFromInline init() {}
}
