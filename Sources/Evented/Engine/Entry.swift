// Promise 3 (serial delivery) and the ownership rule: one subscription's handler, run
// only between a successful start and the matching finish of its state word
// (StateWord.swift).
//
// One object per subscription besides the user's closure and the returned handle:
// `OwnedEntry` stores a handler that takes the owner, `HandleEntry` one that does not
// (its subscription is owned by the handle, whose deinit ends it, so the entry needs
// no weak reference to it). `OwnedValueEntry` and `HandleValueEntry` are the same for a
// property's new values. All four store the closure as given; the weak owner, or the
// handle's ownership, comes from `WeakOwnerEntry` or `HandleOwnedEntry`.

import Dispatch
import Synchronization

/// One subscription with a handler for `Message`; see `OwnedEntry` and `HandleEntry`.
@usableFromInline
class Entry<Message>: SubscriptionCore, @unchecked Sendable {
  // @unchecked Sendable: no stored property of its own, and no lock; the subclasses'
  // handlers are ordered by `word` (see SubscriptionCore).

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
    #if FaultInjection
      if Planted.keepDeadOwners { return }
    #endif
    endSwept()
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
    if let mailbox = target.mailbox {
      leave(message, in: mailbox, on: target.queue)
      return true
    }
    target.submit {
      let thread = DeliveringThread.enter()
      _ = self.run(message, me: currentThreadID())
      DeliveringThread.exit(thread)
    }
    return true
  }
}

extension Entry where Message: Sendable {
  /// Leaves `message` in the mailbox of a state observer on a queue (Mailbox.swift).
  @inlinable @inline(never)
  final func leave(_ message: Message, in mailbox: any AnyObject & Sendable, on queue: DispatchQueue) {
    unsafeDowncast(mailbox, to: Mailbox<Message>.self).offer(message, to: self, on: queue)
  }
}

/// A subscription whose owner is held weakly: what `OwnedEntry` and `OwnedValueEntry`
/// share.
@usableFromInline
class WeakOwnerEntry<Owner: AnyObject, Message>: Entry<Message>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock; `owner` is written once, before the subscription
  // is published.

  /// Written once before the subscription is published.
  @usableFromInline @exclusivity(unchecked) final weak var owner: Owner?

  @inlinable init(owner: Owner, isOnce: Bool, target: DeliveryTarget?) {
    super.init(isOnce: isOnce, target: target)
    self.owner = owner
  }

  @usableFromInline final override var liveOwner: AnyObject? { owner }
}

/// A subscription owned by its handle: what `HandleEntry` and `HandleValueEntry` share.
@usableFromInline
class HandleOwnedEntry<Message>: Entry<Message>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock and no stored property of its own.

  @inlinable override init(isOnce: Bool, target: DeliveryTarget?) {
    super.init(isOnce: isOnce, target: target)
    isOwnedByHandle = true
  }
}

/// A subscription whose handler receives its owner, held weakly.
@usableFromInline
final class OwnedEntry<Owner: AnyObject, Message>: WeakOwnerEntry<Owner, Message>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock; `handler` is ordered by `word` (see
  // SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Owner, Message) -> Void

  /// Set to nil when released (not to a no-op closure: in unspecialized code an empty
  /// closure of a generic type allocates a context for its type metadata).
  @usableFromInline @exclusivity(unchecked) var handler: Handler?

  @inlinable init(owner: Owner, isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(owner: owner, isOnce: isOnce, target: target)
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Message) {
    if let handler { handler(unsafeDowncast(owner, to: Owner.self), message) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}

/// A subscription owned by its handle, whose handler receives only the message.
@usableFromInline
final class HandleEntry<Message>: HandleOwnedEntry<Message>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock; `handler` is ordered by `word` (see
  // SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Message) -> Void

  /// Set to nil when released.
  @usableFromInline @exclusivity(unchecked) var handler: Handler?

  @inlinable init(isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(isOnce: isOnce, target: target)
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
final class OwnedValueEntry<Owner: AnyObject, Value: Sendable>: WeakOwnerEntry<Owner, Update<Value>>,
  @unchecked Sendable
{
  // @unchecked Sendable: owns no lock; `handler` is ordered by `word` (see
  // SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Owner, Value) -> Void

  @usableFromInline @exclusivity(unchecked) var handler: Handler?

  @inlinable init(owner: Owner, isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(owner: owner, isOnce: isOnce, target: target)
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Update<Value>) {
    if let handler { handler(unsafeDowncast(owner, to: Owner.self), message.new) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}

/// A property subscription owned by its handle, whose handler receives the new value.
@usableFromInline
final class HandleValueEntry<Value: Sendable>: HandleOwnedEntry<Update<Value>>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock; `handler` is ordered by `word` (see
  // SubscriptionCore).
  @usableFromInline typealias Handler = @Sendable (Value) -> Void

  @usableFromInline @exclusivity(unchecked) var handler: Handler?

  @inlinable init(isOnce: Bool = false, target: DeliveryTarget?, handler: @escaping Handler) {
    self.handler = handler
    super.init(isOnce: isOnce, target: target)
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Update<Value>) {
    if let handler { handler(message.new) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}
