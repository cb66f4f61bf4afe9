// `observeOnce` on properties: the next new value, delivered at most once.

extension PropertyProtocol {
  /// Calls `handler` with the next new value only, if `owner` is still alive then. The
  /// current value is not delivered: use ``value`` for it.
  ///
  /// ```swift
  /// model.status.observeOnce(with: self) { me, status in me.announce(status) }
  /// ```
  ///
  /// - Note: At most once, even when writes are committed concurrently or from inside
  ///   the handler.
  @inlinable
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, Value) -> Void
  ) -> Subscription {
    hub.observeValues(owner: owner, target: DeliveryTarget(delivery), isOnce: true, anchor: anchor, handler)
  }

  /// Calls a main-actor `handler` on the main queue with the next new value only, if
  /// `owner` is still alive then.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, Value) -> Void
  ) -> Subscription {
    hub.observeOnMain(owner: owner, isOnce: true, anchor: anchor) { owner, update in
      handler(owner, update.new)
    }
  }

  /// Calls `handler` with the next new value only, if the returned subscription is
  /// still kept then.
  ///
  /// - Important: Keep the returned handle: it owns the subscription, and
  ///   `_ = property.observeOnce { … }` ends at once.
  @inlinable
  public func observeOnce(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Value) -> Void
  ) -> Subscription {
    hub.observeValues(target: DeliveryTarget(delivery), isOnce: true, anchor: anchor, handler)
  }

  /// Calls a main-actor `handler` on the main queue with the next new value only, if
  /// the returned subscription is still kept then.
  public func observeOnce(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Value) -> Void
  ) -> Subscription {
    hub.observeOnMain(isOnce: true, anchor: anchor) { update in
      handler(update.new)
    }
  }
}
