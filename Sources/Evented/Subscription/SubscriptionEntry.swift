// One subscription's handler and the state word that delivery and cancellation share.
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
// One object per subscription besides the user's closure and the returned handle:
// `OwnedEntry` stores a handler that takes the owner, `HandleEntry` one that does not
// (its subscription is owned by the handle, whose deinit ends it, so the entry needs
// no weak reference to it). Both store the closure as given.

import Synchronization

/// An actor variant's source, which its subscriptions refer to weakly: `isActive` is
/// false once it is gone.
@usableFromInline
protocol Detaching: AnyObject {}

/// The type-erased part of one subscription.
@usableFromInline
class SubscriptionCore: @unchecked Sendable {
  // @unchecked Sendable: `word` (atomic) orders access to the handler as described at
  // the top of this file; `isOwnedByHandle` is written once before the subscription is published (hence
  // `@exclusivity(unchecked)`: the lock or the publication orders every access).

  @usableFromInline static let ended: UInt = 1
  @usableFromInline static let runnerReleases: UInt = 2

  @usableFromInline let word = Atomic<UInt>(0)
  /// Ends the subscription just before its first invocation.
  @usableFromInline let isOnce: Bool
  /// Whether the handle returned by `observe` owns the subscription: it lives until it
  /// ends, and the handle's deinit ends it. Written once before it is published.
  @usableFromInline @exclusivity(unchecked) final var isOwnedByHandle = false
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
    return forgetsRunningEndedSubscriptions()
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
      // The planted bug returns while the handler runs (and keeps it, to stay memory-safe).
      if FaultInjection.isPlanted(.cancelDoesNotWait) { return first }
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

/// One subscription with a handler for `Message`; see `OwnedEntry` and `HandleEntry`.
@usableFromInline
class Entry<Message>: SubscriptionCore, @unchecked Sendable {
  // @unchecked Sendable: see SubscriptionCore; the subclasses' handlers are ordered by
  // `word`.

  /// Calls the handler; `owner` is `liveOwner`.
  @usableFromInline func invoke(_ owner: AnyObject, _ message: Message) {
    fatalError("Evented: an entry without a handler")
  }

  /// Runs the handler with `message` unless the subscription has ended.
  ///
  /// - Parameter me: `currentThreadID()` of the calling thread.
  /// - Returns: false if the subscription has ended and does not run elsewhere, or its
  ///   owner is gone (it should be removed from its source).
  @inlinable @inline(__always)
  final func run(_ message: Message, me: UInt) -> Bool {
    let start = word.compareExchange(expected: 0, desired: me, ordering: .acquiring)
    guard start.exchanged else {
      // Not gone while it still runs elsewhere: its source keeps it listed until it
      // returns (see `isDone`), so reporting it would only sweep for nothing.
      return start.original & Self.ended == 0 || start.original & ~(Self.ended | Self.runnerReleases) != 0
    }
    // A subscription its handle owns passes itself, without a weak load or a retain.
    if isOwnedByHandle { return invokeStarted(self, message, me: me) }
    guard let owner = liveOwner else {
      finish(me)
      ownerIsGone()
      return false
    }
    return invokeStarted(owner, message, me: me)
  }

  /// Ends a subscription whose owner a delivery found gone, releasing its handler
  /// here, outside every lock; the source then removes it with the ended ones, without
  /// loading every owner again.
  @usableFromInline @inline(never)
  final func ownerIsGone() {
    if !keepsDeadOwners() { endSwept() }
  }

  /// Runs the handler of a started subscription, then finishes.
  @inlinable @inline(__always)
  final func invokeStarted(_ owner: AnyObject, _ message: Message, me: UInt) -> Bool {
    if isOnce,
      !word.compareExchange(
        expected: me, desired: me | Self.ended | Self.runnerReleases, ordering: .acquiringAndReleasing
      ).exchanged
    {
      // Ended by another thread since the start: that thread releases the handler.
      finish(me)
      return true
    }
    invoke(owner, message)
    finish(me)
    return true
  }

  @inlinable @inline(__always)
  final func finish(_ me: UInt) {
    let old = word.wrappingSubtract(me, ordering: .acquiringAndReleasing).oldValue
    if old & (Self.ended | Self.runnerReleases) != 0 { finishEnded(old) }
  }

  @usableFromInline @inline(never)
  final func finishEnded(_ old: UInt) {
    if old & Self.runnerReleases != 0 { releaseHandler() }
    if old & Self.ended != 0 { WaitRoom.shared.wakeAll() }
  }

  /// Delivers `message` inline or submits it to the subscription's queue.
  ///
  /// - Returns: false if the subscription has ended and does not run elsewhere, or its
  ///   owner is gone.
  @inlinable @inline(__always)
  final func deliver(_ message: Message, me: UInt) -> Bool where Message: Sendable {
    guard let target else { return run(message, me: me) }
    if isEnded { return !isDone }
    if !hasOwner { return false }
    target.submit {
      let depth = DeliveringThread.enter()
      _ = self.run(message, me: currentThreadID())
      DeliveringThread.exit(depth)
    }
    return true
  }
}

/// A subscription whose handler receives its owner, held weakly.
@usableFromInline
final class OwnedEntry<Owner: AnyObject, Message>: Entry<Message>, @unchecked Sendable {
  // @unchecked Sendable: `handler` is ordered by `word` (see SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Owner, Message) -> Void

  /// Set to nil when released (not to a no-op closure: in unspecialized code an empty
  /// closure of a generic type allocates a context for its type metadata).
  @usableFromInline @exclusivity(unchecked) var handler: Handler?
  /// Written once before the subscription is published.
  @usableFromInline @exclusivity(unchecked) weak var owner: Owner?

  @inlinable init(owner: Owner, isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(isOnce: isOnce, target: target)
    self.owner = owner
  }

  @usableFromInline override var liveOwner: AnyObject? { owner }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Message) {
    if let handler { handler(unsafeDowncast(owner, to: Owner.self), message) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}

/// A subscription owned by its handle, whose handler receives only the message.
@usableFromInline
final class HandleEntry<Message>: Entry<Message>, @unchecked Sendable {
  // @unchecked Sendable: `handler` is ordered by `word` (see SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Message) -> Void

  /// Set to nil when released.
  @usableFromInline @exclusivity(unchecked) var handler: Handler?

  @inlinable init(isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(isOnce: isOnce, target: target)
    isOwnedByHandle = true
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Message) {
    if let handler { handler(message) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}

/// A property subscription whose handler receives its owner and the new value: the
/// user's closure stored as given, without a closure that unwraps the update.
///
/// A separate class rather than `OwnedEntry` with a generic "part of the message"
/// parameter: `invoke` runs unspecialized, and going through such a parameter's
/// witness cost about 75 more instructions per delivery (W2) and two more copies of a
/// large value on the stack.
@usableFromInline
final class OwnedValueEntry<Owner: AnyObject, Value: Sendable>: Entry<Update<Value>>, @unchecked Sendable {
  // @unchecked Sendable: `handler` is ordered by `word` (see SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Owner, Value) -> Void

  @usableFromInline @exclusivity(unchecked) var handler: Handler?
  /// Written once before the subscription is published.
  @usableFromInline @exclusivity(unchecked) weak var owner: Owner?

  @inlinable init(owner: Owner, isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(isOnce: isOnce, target: target)
    self.owner = owner
  }

  @usableFromInline override var liveOwner: AnyObject? { owner }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Update<Value>) {
    if let handler { handler(unsafeDowncast(owner, to: Owner.self), message.new) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}

/// A property subscription owned by its handle, whose handler receives the new value.
@usableFromInline
final class HandleValueEntry<Value: Sendable>: Entry<Update<Value>>, @unchecked Sendable {
  // @unchecked Sendable: `handler` is ordered by `word` (see SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Value) -> Void

  @usableFromInline @exclusivity(unchecked) var handler: Handler?

  @inlinable init(isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(isOnce: isOnce, target: target)
    isOwnedByHandle = true
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Update<Value>) {
    if let handler { handler(message.new) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}
