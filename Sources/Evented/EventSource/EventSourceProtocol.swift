/// The observing side of an event source, shared by ``EventSource`` and
/// ``ReadOnlyEventSource``.
///
/// ## Concurrency
///
/// - **Thread safety:** Every member may be called from any thread.
/// - **Ordering:** Each subscription receives events one at a time, in commit order.
/// - **Reentrancy:** Handlers may send, subscribe and cancel; see ``EventSource``.
/// - **Lifetime:** A subscription lives as long as its owner.
public protocol EventSourceProtocol<Event>: Sendable {
  /// The type of the events.
  associatedtype Event: Sendable

  /// A view of the source that can observe but not send.
  var readOnly: ReadOnlyEventSource<Event> { get }
}

extension EventSourceProtocol {
  @usableFromInline var hub: Hub<Event, Void> { readOnly.hub }

  /// What every subscription keeps alive: the node of a derived source, a new token
  /// of a lazy source (it counts the subscription), or nil.
  @inlinable var anchor: (any AnyObject & Sendable)? {
    let view = readOnly
    if let derived = view.derived { return derived }
    return view.hub.lazyHooks?.token()
  }

  /// Subscribes a handler of each event, anchored as ``anchor`` says: what every
  /// `observe` and `observeOnce` overload builds.
  ///
  /// - Parameters:
  ///   - ownership: The owner, or `.handle`.
  ///   - target: Where the handler runs; nil runs it inline on the delivering thread.
  ///   - isOnce: Whether the subscription ends just before its first invocation.
  ///   - owned: The handler, given with an owner (unused with `.handle`).
  ///   - handler: The handler, given with `.handle` (unused with an owner).
  @inlinable @inline(__always)
  func observeEvents<Owner: AnyObject & Sendable>(
    _ ownership: Ownership<Owner>,
    on target: DeliveryTarget?,
    isOnce: Bool = false,
    owned: @escaping @Sendable (Owner, Event) -> Void = { _, _ in },
    _ handler: @escaping @Sendable (Event) -> Void = { _ in }
  ) -> Subscription {
    hub.observe(ownership, reading: .message, on: target, isOnce: isOnce, anchor: anchor, owned: owned, handler)
  }

  /// The number of subscriptions whose owner is alive.
  ///
  /// - Complexity: O(n): subscriptions of owners that are gone are swept out first.
  public var observerCount: Int { hub.liveCount }

  /// Calls `handler` with every event from now on, for as long as `owner` lives.
  ///
  /// ```swift
  /// source.observe(with: self) { me, event in me.handle(event) }
  /// ```
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler; the subscription ends
  ///     when it deinitializes. Do not capture it strongly in `handler`.
  ///   - delivery: Where the handler runs.
  ///   - handler: Called with the owner and each event, never concurrently with itself.
  /// - Returns: A handle that may cancel the subscription early; dropping it does not
  ///   end the subscription.
  @inlinable @inline(__always)
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, Event) -> Void
  ) -> Subscription {
    observeEvents(.owner(owner), on: DeliveryTarget(delivery), owned: handler)
  }

  /// Calls a main-actor `handler` on the main queue with every event from now on, for
  /// as long as `owner` lives.
  ///
  /// ```swift
  /// source.observe(with: self, on: .main) { me, event in me.label.text = event }
  /// ```
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, Event) -> Void
  ) -> Subscription {
    observeEvents(.owner(owner), on: .main, owned: onMain(handler))
  }

  /// Calls `handler` with every event from now on, for as long as the returned
  /// subscription is kept.
  ///
  /// - Parameters:
  ///   - delivery: Where the handler runs.
  ///   - handler: Called with each event, never concurrently with itself.
  /// - Returns: The owner of the subscription: it ends when this handle is released.
  @inlinable @inline(__always)
  public func observe(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Event) -> Void
  ) -> Subscription {
    observeEvents(.handle, on: DeliveryTarget(delivery), handler)
  }

  /// Calls a main-actor `handler` on the main queue with every event from now on, for
  /// as long as the returned subscription is kept.
  public func observe(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Event) -> Void
  ) -> Subscription {
    observeEvents(.handle, on: .main, onMain(handler))
  }

  /// Calls `handler` with the next event only, if `owner` is still alive then.
  ///
  /// - Note: At most once, even when events are sent concurrently or from inside the
  ///   handler.
  @inlinable @inline(__always)
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, Event) -> Void
  ) -> Subscription {
    observeEvents(.owner(owner), on: DeliveryTarget(delivery), isOnce: true, owned: handler)
  }

  /// Calls a main-actor `handler` on the main queue with the next event only, if
  /// `owner` is still alive then.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, Event) -> Void
  ) -> Subscription {
    observeEvents(.owner(owner), on: .main, isOnce: true, owned: onMain(handler))
  }

  /// Calls a main-actor `handler` on the main queue with the next event only, if the
  /// returned subscription is still kept then.
  public func observeOnce(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Event) -> Void
  ) -> Subscription {
    observeEvents(.handle, on: .main, isOnce: true, onMain(handler))
  }

  /// Calls `handler` with the next event only, if the returned subscription is still
  /// kept then.
  @inlinable @inline(__always)
  public func observeOnce(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Event) -> Void
  ) -> Subscription {
    observeEvents(.handle, on: DeliveryTarget(delivery), isOnce: true, handler)
  }
}
