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
@usableFromInline
struct Garbage<Message> {
  @usableFromInline var snapshot: ContiguousArray<Entry<Message>>?
  /// Removed by a scan or a sweep: already ended, or ownerless; ended without a wait.
  /// The first two are kept apart, so that a scan (two slots) allocates nothing.
  @usableFromInline var sweptFirst: Entry<Message>?
  @usableFromInline var sweptSecond: Entry<Message>?
  /// Owners loaded by the incremental scan, released after unlocking.
  @usableFromInline var scannedOwners: (AnyObject?, AnyObject?)
  /// What the rarer steps took out.
  @usableFromInline var more: MoreGarbage<Message>?

  @inlinable init() {}

  /// ``more``, made on first use.
  @inlinable mutating func rare() -> MoreGarbage<Message> {
    if let more { return more }
    let made = MoreGarbage<Message>()
    more = made
    return made
  }

  /// Keeps a removed subscription to end after unlocking.
  @inlinable mutating func sweep(_ entry: consuming Entry<Message>) {
    if sweptFirst == nil {
      sweptFirst = entry
    } else if sweptSecond == nil {
      sweptSecond = entry
    } else {
      rare().swept.append(entry)
    }
  }

  /// Ends the removed subscriptions, waiting for any of them that runs on another
  /// thread, and the swept ones without waiting; then sweeps the observers of the
  /// following nodes that a sweep found without a live observer (FollowerEntry.swift).
  /// Must be called without any lock held.
  ///
  /// - Returns: Whether it swept a node's observers (which may have freed the node and
  ///   ended its subscriptions).
  @inlinable @discardableResult func dispose() -> Bool {
    sweptFirst?.endSwept()
    sweptSecond?.endSwept()
    var sweptNodes = SweepRequest.serve(scannedOwners.0)
    if SweepRequest.serve(scannedOwners.1) { sweptNodes = true }
    guard let more else { return sweptNodes }
    // First end the subscriptions that are not running, so that none of them starts
    // while this waits for one that is; then end (or wait for) every one.
    for entry in more.removed where entry.runner == 0 { entry.end() }
    for entry in more.removed { entry.end() }
    for entry in more.swept { entry.endSwept() }
    for owner in more.owners where SweepRequest.serve(owner) { sweptNodes = true }
    return sweptNodes
  }
}

/// What the rarer locked steps take out of the state, to release after unlocking.
@usableFromInline
final class MoreGarbage<Message> {
  /// Removed by `removeAllObservers` (this call's and those of calls still ending
  /// theirs): ended with a wait, as `cancel()` does.
  @usableFromInline var removed: ContiguousArray<Entry<Message>> = []
  /// The list of a finished `removeAllObservers` call, dropped after unlocking.
  @usableFromInline var finishedRemoval: ContiguousArray<Entry<Message>>?
  /// Removed by a sweep beyond the first two.
  @usableFromInline var swept: [Entry<Message>] = []
  /// Owners loaded by a sweep.
  @usableFromInline var owners: [AnyObject] = []

  @usableFromInline init() {}
}
