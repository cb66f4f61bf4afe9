// How the public `observe` variants become entries in a hub: one builder, which every
// public overload of the lock-based types calls in one line, through its type's own
// builder (`observeEvents`, `observeUpdates`, `observeArrays`, `observeChangesets`) that
// adds what the type always passes.
//
// An overload says who owns the subscription (`Ownership`: an owner passed to the
// handler, or the returned handle), what the handler receives of each message
// (`Reading`: the message itself or a property's new value; an overload that delivers a
// computed part passes a handler of the message that computes it), the handler, and the
// options (where it runs, once only, the replay of the current value, the anchor of a
// derived source).
//
// The ownership rule: a subscription lives as long as its owner. With an owner, the
// entry holds it weakly and passes it strongly to the handler; without one, the
// returned `Subscription` handle owns it: the entry is alive until it ends, and the
// handle's deinit ends it. A handler never runs once its owner's deinit has begun.
//
// A derived source (a `map`, a `combineLatest`, …) is kept alive by its observers: its
// node is passed as `anchor`, which the handler captures, so the node lives as long as
// one of its subscriptions does (and the node keeps its own sources alive in turn).
//
// Speed: for the message itself and for a property's new value, the builder stores the
// user's closure as given (`OwnedEntry`, `HandleEntry`, `OwnedValueEntry`,
// `HandleValueEntry`), so a delivery calls it directly; only a computed part, an anchor
// or a main-actor handler adds a closure around it. These paths are inlinable, so that
// subscribing is specialized for the message type in the caller's module, where the
// choice of entry folds away. The handlers are parameters, never the payload of an enum
// or a field of a generic struct: a closure stored there is kept at the most general
// abstraction, and moving it into an entry would wrap it in two reabstraction thunks,
// each a call per delivery. The builders and the plain public overloads (`observe`,
// `observeOnce`) are `@inline(__always)`: inlined into the caller, the subscription
// handle that a caller does not keep is not allocated (subscribing and cancelling at
// once costs about 20 % more instructions when they are called instead).

/// Who owns a new subscription.
@usableFromInline
enum Ownership<Owner: AnyObject & Sendable>: Sendable {
  /// `owner`, held weakly and passed strongly to the handler.
  case owner(Owner)
  /// The returned handle; the handler takes the message alone. Spelled `.handle`.
  case returnedHandle
}

extension Ownership where Owner == Subscription {
  /// The returned handle owns the subscription; the handler takes the message alone.
  @inlinable static var handle: Self { .returnedHandle }
}

/// What a handler receives of each message.
@usableFromInline
struct Reading<Message, Input>: Sendable {
  @usableFromInline let isNewValue: Bool

  @inlinable init(isNewValue: Bool) {
    self.isNewValue = isNewValue
  }
}

extension Reading where Input == Message {
  /// The message itself.
  @inlinable static var message: Self { Self(isNewValue: false) }
}

extension Reading where Message == Update<Input> {
  /// A property's new value.
  @inlinable static var newValue: Self { Self(isNewValue: true) }
}

/// A handler for main-queue delivery that runs `handler` on the main actor.
func onMain<Owner: Sendable, Input: Sendable>(
  _ handler: @escaping @MainActor @Sendable (Owner, Input) -> Void
) -> @Sendable (Owner, Input) -> Void {
  // The handler runs on the main queue, so the main actor is the current isolation.
  { owner, input in MainActor.assumeIsolated { handler(owner, input) } }
}

/// A handler for main-queue delivery that runs `handler` on the main actor.
func onMain<Input: Sendable>(_ handler: @escaping @MainActor @Sendable (Input) -> Void) -> @Sendable (Input) -> Void {
  { input in MainActor.assumeIsolated { handler(input) } }
}

extension Hub {
  /// Subscribes a handler of what `reading` selects of each message, and returns the
  /// handle of the subscription.
  ///
  /// - Parameters:
  ///   - ownership: The owner, or `.handle`.
  ///   - reading: What the handler receives of each message.
  ///   - target: Where the handler runs; nil runs it inline on the delivering thread.
  ///   - isOnce: Whether the subscription ends just before its first invocation.
  ///   - replay: Builds the first message from the current value, for a replay.
  ///   - anchor: What the handler keeps alive (a derived source's node), or nil.
  ///   - outlivesRemoveAll: Whether `removeAllObservers()` leaves the subscription in
  ///     place (an Observation site's).
  ///   - merging: For a state observer, how a waiting message takes a newer one when
  ///     the handler runs on a queue (Mailbox.swift); a once-only subscription keeps
  ///     its first. Nil for an event observer, whose every message is submitted.
  ///   - owned: The handler, given with an owner (unused with `.handle`).
  ///   - handler: The handler, given with `.handle` (unused with an owner).
  ///
  /// The two handlers are separate parameters, so that each reaches its entry with the
  /// type the entry stores; the unused one defaults to an empty closure.
  @inlinable @inline(__always)
  func observe<Owner: AnyObject & Sendable, Input: Sendable>(
    _ ownership: Ownership<Owner>,
    reading: Reading<Message, Input>,
    on target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil,
    outlivesRemoveAll: Bool = false,
    merging: Merging<Message>? = nil,
    owned: @escaping @Sendable (Owner, Input) -> Void = { _, _ in },
    _ handler: @escaping @Sendable (Input) -> Void = { _ in }
  ) -> Subscription {
    let node = anchor as? any ObservedNode
    // A derived value's observer keeps the node through an `ObserverAnchor`, which tells
    // the node when the observer's handler is released (its subscription ended).
    let anchor: (any AnyObject & Sendable)? = node.map { ObserverAnchor($0) } ?? anchor
    var target = target
    if let queued = target, let merging {
      target = DeliveryTarget(coalescing: queued, into: Mailbox(isOnce ? .first : merging))
    }
    let entry: Entry<Message>
    switch ownership {
    case .owner(let owner):
      var owned = owned
      if let anchor {
        let unanchored = owned
        owned = { owner, input in
          unanchored(owner, input)
          extendLifetime(anchor)
        }
      }
      if reading.isNewValue {
        // `Message == Update<Input>`, so the value entry is an `Entry<Message>`.
        let valueEntry = OwnedValueEntry(owner: owner, isOnce: isOnce, target: target, handler: owned)
        entry = unsafeDowncast(valueEntry, to: Entry<Message>.self)
      } else {
        // `Input == Message`, so this entry is an `Entry<Message>`. (The entry is cast,
        // not the closure: `unsafeBitCast` would take the closure as a generic value and
        // wrap it in two reabstraction thunks.)
        let messageEntry = OwnedEntry(owner: owner, isOnce: isOnce, target: target, handler: owned)
        entry = unsafeDowncast(messageEntry, to: Entry<Message>.self)
      }
    case .returnedHandle:
      var handler = handler
      if let anchor {
        let unanchored = handler
        handler = { input in
          unanchored(input)
          extendLifetime(anchor)
        }
      }
      if reading.isNewValue {
        let valueEntry = HandleValueEntry(isOnce: isOnce, target: target, handler: handler)
        entry = unsafeDowncast(valueEntry, to: Entry<Message>.self)
      } else {
        let messageEntry = HandleEntry(isOnce: isOnce, target: target, handler: handler)
        entry = unsafeDowncast(messageEntry, to: Entry<Message>.self)
      }
    }
    entry.keepsNoMessage = target == nil
    entry.outlivesRemoveAll = outlivesRemoveAll
    let subscription = Subscription(core: entry)
    node?.willObserve()
    subscribe(entry, replay: replay)
    node?.didObserve()
    return subscription
  }
}

/// A derived value that follows its sources only while it has observers.
@usableFromInline
protocol ObservedNode: AnyObject, Sendable {
  /// Called before an observer subscribes: starts following the sources if needed,
  /// and brings the stored value up to date, so that the replay is current.
  func willObserve()
  /// Called once the observer announced by ``willObserve()`` is subscribed.
  func didObserve()
  /// Whether the node has observers, or one arriving; if not, it records that its
  /// subscriptions to its sources are being dropped, so that the next observer makes
  /// new ones. Takes the node's locks.
  func keepsLinks() -> Bool
  /// Removes the node's subscriptions that ended or whose owner died, and releases
  /// them. Call with no lock held.
  func sweepObservers()
  /// Whether the state the node `owner` (this node) delivered last read the root
  /// `identity` at `version` or later; takes the node's lock. A closure made in code
  /// specialized for the node's types, fetched once per link: called through the
  /// protocol, it would run unspecialized, looking up generic metadata at every commit.
  var deliveredCheck: @Sendable (AnyObject, ObjectIdentifier, UInt64) -> Bool { get }
  /// Called when an observer's handler is released: stops following the roots if no
  /// observer is left or arriving, so that a lazy root stops at the last `cancel()`.
  /// Call with no lock held.
  func observerEnded()
}

/// What a derived value's observer keeps alive: the node. Released with the observer's
/// handler, outside every lock, when its subscription ends; then it tells the node.
@usableFromInline
final class ObserverAnchor: Sendable {
  @usableFromInline let node: any ObservedNode

  @usableFromInline init(_ node: any ObservedNode) {
    self.node = node
  }

  deinit {
    node.observerEnded()
  }
}
