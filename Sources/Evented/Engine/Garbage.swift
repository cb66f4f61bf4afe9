// Promise 2 (no user code under a lock): what a locked step takes out of the state, to
// release after unlocking. Removed subscriptions, replaced snapshots and owners loaded
// to test liveness may hold the last reference to user objects, whose deinit can run
// any code; a transition moves them into a `Garbage` that the caller drops (or ends,
// waiting as `cancel()` does) once the lock is released.

/// What a transition took out of the state, to release after unlocking.
@usableFromInline
struct Garbage<Message> {
  @usableFromInline var snapshot: ContiguousArray<Entry<Message>>?
  /// Removed by `removeAllObservers` (this call's and those of calls still ending
  /// theirs): ended with a wait, as `cancel()` does.
  @usableFromInline var removed: ContiguousArray<Entry<Message>> = []
  /// The list of a finished `removeAllObservers` call, dropped after unlocking.
  @usableFromInline var finishedRemoval: ContiguousArray<Entry<Message>>?
  /// Removed by a scan or a sweep: already ended, or ownerless; ended without a wait.
  /// The first two are kept apart, so that a scan (two slots) allocates no array.
  @usableFromInline var sweptFirst: Entry<Message>?
  @usableFromInline var sweptSecond: Entry<Message>?
  @usableFromInline var swept: [Entry<Message>] = []
  @usableFromInline var owners: [AnyObject] = []
  /// Owners loaded by the incremental scan, released after unlocking.
  @usableFromInline var scannedOwners: (AnyObject?, AnyObject?)

  @inlinable init() {}

  /// Keeps a removed subscription to end after unlocking.
  @inlinable mutating func sweep(_ entry: consuming Entry<Message>) {
    if sweptFirst == nil {
      sweptFirst = entry
    } else if sweptSecond == nil {
      sweptSecond = entry
    } else {
      swept.append(entry)
    }
  }

  /// Ends the removed subscriptions, waiting for any of them that runs on another
  /// thread, and the swept ones without waiting. Must be called without any lock held.
  @inlinable func dispose() {
    // First end the subscriptions that are not running, so that none of them starts
    // while this waits for one that is; then end (or wait for) every one.
    for entry in removed where entry.runner == 0 { entry.end() }
    for entry in removed { entry.end() }
    sweptFirst?.endSwept()
    sweptSecond?.endSwept()
    for entry in swept { entry.endSwept() }
  }
}
