// Promises 3 (serial delivery) and 6 (cancellation is final): the state word that
// delivery and cancellation share, one per subscription.
//
// The state word (`SubscriptionCore.word`):
//
//   0                   idle: the handler may be started
//   thread ID           running on that thread (IDs have their two low bits clear)
//   `asyncRunner`       an actor variant's async handler is running (no thread to
//                       wait for: ending it does not wait)
//   bit 0 (`ended`)     ended: the handler is never started again
//   bit 1 (`runnerReleases`)
//                       the subscription was ended from inside its own handler; the
//                       running thread releases the handler when it returns
//
// Transitions:
//
//   start     0 -> T              compare-exchange by the delivering thread T; fails if
//                                 ended, so an ended handler never starts
//   finish    T|bits -> bits      subtract T; if `ended` is set, wake waiters; if
//                                 `runnerReleases` is set, release the handler
//   end       x -> x|ended        by cancel, owner death or once-delivery; if running on
//                                 another thread, wait in WaitRoom until it finishes,
//                                 then release the handler; if running on this thread,
//                                 or on a thread that itself waits for this one (which
//                                 would deadlock), set `runnerReleases` and return
//
// The word orders every access to `handler`: it is read only between a successful
// start and the matching finish, and cleared only after the end has seen no runner.
//
// The handler itself is in a subclass (Entry.swift).

import Synchronization

/// The type-erased part of one subscription.
@usableFromInline
class SubscriptionCore: @unchecked Sendable {
  // @unchecked Sendable: owns no lock. The atomic `word` orders every access to a
  // subclass's handler as a lock would (a start acquires it, the matching finish
  // releases it; see the top of this file). A thread that waits for a running handler
  // waits under the lock of `WaitRoom.shared`, which guards only that wait.
  // `isOwnedByHandle`, `keepsNoMessage` and `outlivesRemoveAll` are written once,
  // before the subscription is published to its source (under the hub's lock, or on
  // the actor), which orders every later read (hence `@exclusivity(unchecked)`);
  // `isOnce` and `target` are immutable.

  @usableFromInline static let ended: UInt = 1
  @usableFromInline static let runnerReleases: UInt = 2

  @usableFromInline let word = Atomic<UInt>(0)
  /// Ends the subscription just before its first invocation.
  @usableFromInline let isOnce: Bool
  /// Whether the handle returned by `observe` owns the subscription: it lives until it
  /// ends, and the handle's deinit ends it. Written once before it is published.
  @usableFromInline @exclusivity(unchecked) final var isOwnedByHandle = false
  /// Whether the handler is a user's, run on the delivering thread, so that nothing of
  /// the library keeps a message once the handler returns: an array lends its buffer to
  /// a commit made for such subscriptions only (ArrayStore.swift). Written once before
  /// it is published.
  @usableFromInline @exclusivity(unchecked) final var keepsNoMessage = false
  /// Whether `removeAllObservers()` leaves the subscription in place: one that no user
  /// made, by which a source notifies Observation's tracking scopes
  /// (ObservationSite.swift) or a derived value built on it (a link: `RootEntry`,
  /// `FollowerEntry`), which keeps following it. Written once before it is published.
  @usableFromInline @exclusivity(unchecked) final var outlivesRemoveAll = false
  /// Where the handler runs; nil runs it inline on the delivering thread.
  @usableFromInline let target: DeliveryTarget?

  @usableFromInline init(isOnce: Bool, target: DeliveryTarget?) {
    self.isOnce = isOnce
    self.target = target
  }

  @inlinable final var isEnded: Bool { word.load(ordering: .acquiring) & Self.ended != 0 }

  /// Whether the subscription has ended and its handler is not running: it never runs
  /// again, so its source may forget it. An ended handler that still runs (a once-only
  /// handler, one that cancelled itself, or one a `cancel()` on another thread waits
  /// for) stays listed until it returns, so that `removeAllObservers()` finds it and
  /// waits for it.
  @inlinable final var isDone: Bool {
    let word = word.load(ordering: .acquiring)
    guard word & Self.ended != 0 else { return false }
    if word & ~(Self.ended | Self.runnerReleases) == 0 { return true }
    #if FaultInjection
      return Planted.forgetRunningEndedSubscriptions
    #else
      return false
    #endif
  }

  /// Whether the source is alive. A lock-based source ends every subscription when it
  /// is deinitialized, so for those `isEnded` says it all (and the source needs no weak
  /// reference, which would give it a side table that makes every retain slower); an
  /// actor variant's subscription overrides this.
  @usableFromInline var isSourceAlive: Bool { true }

  /// Whether the owner is alive (always, for a subscription its handle owns).
  @inlinable final var hasOwner: Bool { liveOwner != nil }

  /// The object to pass to the handler: the owner, loaded strongly (a subclass that
  /// has one overrides this), or this object for a subscription its handle owns; nil
  /// once the owner is gone.
  @usableFromInline var liveOwner: AnyObject? { self }

  /// `liveOwner`, exactly, for sweeps and counts (a delivery may use a cheaper answer
  /// that is sometimes late: see `RootEntry`).
  @usableFromInline var sweptOwner: AnyObject? { liveOwner }

  /// The owner, for a check of whether the source has live subscribers made while
  /// another source's sweep asks about it (`Hub.hasLiveSubscribers`): as ``sweptOwner``,
  /// except that a derived source built on this one counts as live while it exists, so
  /// that the check does not walk a chain of derived sources (each of which the sweeps
  /// of its own sources check).
  @usableFromInline var checkedOwner: AnyObject? { sweptOwner }

  /// The thread running the handler now, or 0.
  @inlinable final var runner: UInt { word.load(ordering: .acquiring) & ~(Self.ended | Self.runnerReleases) }

  /// Ends the subscription. When this returns, the handler will not start again and
  /// is not running on another thread.
  ///
  /// - Returns: true if this call ended it; false if it had ended already.
  @usableFromInline @discardableResult
  final func end() -> Bool {
    let me = currentThreadID()
    let old = word.bitwiseOr(Self.ended, ordering: .acquiringAndReleasing).oldValue
    let runner = old & ~(Self.ended | Self.runnerReleases)
    let first = old & Self.ended == 0
    if runner == me {
      if first { word.bitwiseOr(Self.runnerReleases, ordering: .relaxed) }
      return first
    }
    if runner == Self.asyncRunner {
      // An actor variant's async handler: it may finish after this returns, and holds
      // its handler in its own task.
      return first
    }
    if runner != 0 {
      #if FaultInjection
        // The planted bug returns while the handler runs (and keeps it, to stay memory-safe).
        if Planted.cancelDoesNotWait { return first }
      #endif
      if !WaitRoom.shared.wait(for: self, runningOn: runner) {
        // The runner waits for this thread: it releases the handler when it returns.
        guard first else { return false }
        let now = word.bitwiseOr(Self.runnerReleases, ordering: .acquiringAndReleasing).oldValue
        if now & ~(Self.ended | Self.runnerReleases) != 0 { return true }
        // It returned meanwhile without seeing the request: release here.
      }
    }
    if first { releaseHandler() }
    return first
  }

  /// The runner value of an async handler, which has no thread of its own. Its two
  /// low bits are clear and no thread has this ID.
  static let asyncRunner: UInt = ~UInt(3)

  /// Marks an async handler as started, unless the subscription has ended.
  ///
  /// - Returns: false if it has ended: the handler must not start.
  final func startAsync() -> Bool {
    word.compareExchange(expected: 0, desired: Self.asyncRunner, ordering: .acquiring).exchanged
  }

  /// Marks an async handler started by ``startAsync()`` as returned.
  final func finishAsync() {
    word.wrappingSubtract(Self.asyncRunner, ordering: .releasing)
  }

  /// Ends a subscription found ended or ownerless by a sweep, without waiting.
  ///
  /// If another call ended it first, that call owns the release. If a handler runs
  /// (its owner died a moment ago, or it is a once-only handler), the runner releases
  /// the handler when it returns; nobody waits for it, so a sweep can never block on a
  /// handler that no one cancelled.
  @usableFromInline
  final func endSwept() {
    let old = word.bitwiseOr(Self.ended, ordering: .acquiringAndReleasing).oldValue
    guard old & Self.ended == 0 else { return }
    if old & ~(Self.ended | Self.runnerReleases) != 0 {
      let now = word.bitwiseOr(Self.runnerReleases, ordering: .acquiringAndReleasing).oldValue
      // Still running: the runner sees the request when it returns.
      if now & ~(Self.ended | Self.runnerReleases) != 0 { return }
    }
    releaseHandler()
  }

  /// Ends the subscription. It stays listed in its source, ended, until the source
  /// next meets it (a delivery pass, the incremental scan of a subscribe, a sweep),
  /// which removes it; its handler and captures are released now. Cancelling thus
  /// takes no lock of the source.
  func cancel() {
    end()
  }

  /// Drops the handler and its captures. Called exactly once, after the end.
  @usableFromInline func releaseHandler() {}
}
