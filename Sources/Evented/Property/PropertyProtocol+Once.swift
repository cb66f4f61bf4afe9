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
  @inlinable @inline(__always)
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, Value) -> Void
  ) -> Subscription {
    observeUpdates(.owner(owner), reading: .newValue, on: DeliveryTarget(delivery), isOnce: true, owned: handler)
  }

  /// Calls a main-actor `handler` on the main queue with the next new value only, if
  /// `owner` is still alive then.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, Value) -> Void
  ) -> Subscription {
    observeUpdates(.owner(owner), reading: .newValue, on: .main, isOnce: true, owned: onMain(handler))
  }

  /// Calls `handler` with the next new value only, if the returned subscription is
  /// still kept then.
  ///
  /// - Important: Keep the returned handle: it owns the subscription, and
  ///   `_ = property.observeOnce { … }` ends at once.
  @inlinable @inline(__always)
  public func observeOnce(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Value) -> Void
  ) -> Subscription {
    observeUpdates(.handle, reading: .newValue, on: DeliveryTarget(delivery), isOnce: true, handler)
  }

  /// Calls a main-actor `handler` on the main queue with the next new value only, if
  /// the returned subscription is still kept then.
  public func observeOnce(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Value) -> Void
  ) -> Subscription {
    observeUpdates(.handle, reading: .newValue, on: .main, isOnce: true, onMain(handler))
  }
}
