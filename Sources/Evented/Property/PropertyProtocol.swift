/// The observing side of a property, shared by ``Property`` and ``ReadOnlyProperty``.
///
/// ## Concurrency
///
/// - **Thread safety:** Every member may be called from any thread.
/// - **Ordering:** Each subscription receives values one at a time, in commit order,
///   and ends on the latest value when writers stop.
/// - **Reentrancy:** Handlers may read, write, subscribe and cancel; see ``Property``.
/// - **Lifetime:** A subscription lives as long as its owner.
public protocol PropertyProtocol<Value>: Sendable {
  /// The type of the value.
  associatedtype Value: Sendable

  /// The current value: the latest committed one.
  var value: Value { get }

  /// A view of the property that can observe but not write.
  var readOnly: ReadOnlyProperty<Value> { get }
}

extension PropertyProtocol {
  @usableFromInline var hub: Hub<Update<Value>, Value> { readOnly.hub }

  /// What every subscription keeps alive: the node of a derived value, a new token of
  /// a lazy property (it counts the subscription), or nil.
  @inlinable var anchor: (any AnyObject & Sendable)? {
    let view = readOnly
    if let derived = view.derived { return derived }
    return view.hub.lazyHooks?.token()
  }

  /// Subscribes a handler of what `reading` selects of each update, anchored as
  /// ``anchor`` says: what every `observe`, `observeChanges` and `observeOnce` overload
  /// builds.
  ///
  /// - Parameters:
  ///   - ownership: The owner, or `.handle`.
  ///   - reading: What the handler receives of each update.
  ///   - target: Where the handler runs; nil runs it inline on the delivering thread.
  ///   - isOnce: Whether the subscription ends just before its first invocation.
  ///   - replay: Builds the first update from the current value, for a replay.
  ///   - owned: The handler, given with an owner (unused with `.handle`).
  ///   - handler: The handler, given with `.handle` (unused with an owner).
  @inlinable @inline(__always)
  func observeUpdates<Owner: AnyObject & Sendable, Input: Sendable>(
    _ ownership: Ownership<Owner>,
    reading: Reading<Update<Value>, Input>,
    on target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing Value) -> Update<Value>)? = nil,
    owned: @escaping @Sendable (Owner, Input) -> Void = { _, _ in },
    _ handler: @escaping @Sendable (Input) -> Void = { _ in }
  ) -> Subscription {
    hub.observe(
      ownership, reading: reading, on: target, isOnce: isOnce, replay: replay, anchor: anchor,
      merging: target == nil ? nil : updateMerging, owned: owned, handler)
  }

  /// How an observer on a queue merges its waiting update with a newer one: into one
  /// from the value it received last to the newest. With duplicates skipped, a merged
  /// update whose values are equal is no change, and is skipped as an equal write is.
  @inlinable var updateMerging: Merging<Update<Value>> {
    let view = readOnly
    guard let isDuplicate = view.viewed?.isDuplicate ?? view.derived?.isDuplicate else {
      return Merging(merge: Update.merging)
    }
    return Merging(merge: Update.merging) { update in
      update.isMerged && !update.isInitial && isDuplicate(update.old, update.new)
    }
  }

  /// The number of subscriptions whose owner is alive.
  ///
  /// It counts the subscriptions made by `observe`, `observeChanges`, `observeOnce`,
  /// `values` and the actor sinks, the links of observed derived values built on this
  /// one (one per derived value), and, while a SwiftUI view or another Observation
  /// scope shows this value, the one subscription Observation follows it with: that one
  /// ends one second after a change that no scope read again (see
  /// ObservationAndSwiftUI.md). To check for a leak, let such a second pass, then
  /// compare with 0.
  ///
  /// Values derived from a derived value subscribe to its roots, not to it: counting
  /// sweeps those roots too, so that a value derived from this one whose last
  /// observer's owner died is freed here as well.
  ///
  /// - Complexity: O(n): subscriptions of owners that are gone are swept out first (for
  ///   a derived value, its roots' too).
  public var observerCount: Int {
    if let node = readOnly.derived {
      for root in node.readRoots { root.sweep() }
    }
    return hub.liveCount
  }

  /// Calls `handler` with the current value now, then with every new value, for as
  /// long as `owner` lives.
  ///
  /// ```swift
  /// model.name.observe(with: label) { label, name in label.text = name }
  /// ```
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler; the subscription ends
  ///     when it deinitializes.
  ///   - delivery: Where the handler runs. With `.synchronous`, the current value is
  ///     delivered before this returns unless another thread is delivering for the
  ///     property (then it is delivered in order by that thread).
  ///   - handler: Called with the owner and each value, never concurrently with itself.
  /// - Returns: A handle that may cancel early; dropping it does not end the
  ///   subscription.
  @inlinable @inline(__always)
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, Value) -> Void
  ) -> Subscription {
    observeUpdates(
      .owner(owner), reading: .newValue, on: DeliveryTarget(delivery), replay: replayCurrent, owned: handler)
  }

  /// Calls a main-actor `handler` on the main queue with the current value, then with
  /// every new value, for as long as `owner` lives.
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, Value) -> Void
  ) -> Subscription {
    observeUpdates(.owner(owner), reading: .newValue, on: .main, replay: replayCurrent, owned: onMain(handler))
  }

  /// Calls `handler` with the current value now, then with every new value, for as
  /// long as the returned subscription is kept.
  @inlinable @inline(__always)
  public func observe(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Value) -> Void
  ) -> Subscription {
    observeUpdates(.handle, reading: .newValue, on: DeliveryTarget(delivery), replay: replayCurrent, handler)
  }

  /// Calls a main-actor `handler` on the main queue with the current value, then with
  /// every new value, for as long as the returned subscription is kept.
  public func observe(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Value) -> Void
  ) -> Subscription {
    observeUpdates(.handle, reading: .newValue, on: .main, replay: replayCurrent, onMain(handler))
  }

  /// Calls `handler` with every change from now on, as the old and the new value, for
  /// as long as `owner` lives. The current value is not replayed.
  ///
  /// ```swift
  /// model.score.observeChanges(with: view) { view, change in
  ///   view.animate(from: change.oldValue, to: change.newValue)
  /// }
  /// ```
  @inlinable
  @discardableResult
  public func observeChanges<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, Change<Value>) -> Void
  ) -> Subscription {
    observeUpdates(
      .owner(owner), reading: .message, on: DeliveryTarget(delivery),
      owned: { owner, update in handler(owner, update.change) })
  }

  /// Calls a main-actor `handler` on the main queue with every change from now on, for
  /// as long as `owner` lives.
  @discardableResult
  public func observeChanges<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, Change<Value>) -> Void
  ) -> Subscription {
    observeUpdates(
      .owner(owner), reading: .message, on: .main, owned: onMain { owner, update in handler(owner, update.change) })
  }

  /// Calls `handler` with every change from now on, for as long as the returned
  /// subscription is kept.
  @inlinable
  public func observeChanges(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Change<Value>) -> Void
  ) -> Subscription {
    observeUpdates(.handle, reading: .message, on: DeliveryTarget(delivery), { update in handler(update.change) })
  }

  /// Calls a main-actor `handler` on the main queue with every change from now on, for
  /// as long as the returned subscription is kept.
  public func observeChanges(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Change<Value>) -> Void
  ) -> Subscription {
    observeUpdates(.handle, reading: .message, on: .main, onMain { update in handler(update.change) })
  }

  /// Calls `handler` with the part of the value at `keyPath` now, then whenever that
  /// part changes, for as long as `owner` lives.
  ///
  /// ```swift
  /// appState.observe(\.login.userName, with: self) { me, name in me.greet(name) }
  /// ```
  ///
  /// Writes that leave the part equal are not delivered; `\.self` skips equal values
  /// of any `Equatable` property.
  @inlinable
  @discardableResult
  public func observe<Part: Equatable & Sendable, Owner: AnyObject & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, Part) -> Void
  ) -> Subscription {
    observeUpdates(
      .owner(owner), reading: .message, on: DeliveryTarget(delivery), replay: replayCurrent,
      owned: { owner, update in if let part = update.changedPart(keyPath) { handler(owner, part) } })
  }

  /// Calls a main-actor `handler` on the main queue with the part of the value at
  /// `keyPath` now, then whenever that part changes, for as long as `owner` lives.
  @discardableResult
  public func observe<Part: Equatable & Sendable, Owner: AnyObject & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, Part) -> Void
  ) -> Subscription {
    observeUpdates(
      .owner(owner), reading: .message, on: .main, replay: replayCurrent,
      owned: onMain { owner, update in if let part = update.changedPart(keyPath) { handler(owner, part) } })
  }

  /// Calls `handler` with the part of the value at `keyPath` now, then whenever that
  /// part changes, for as long as the returned subscription is kept.
  @inlinable
  public func observe<Part: Equatable & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Part) -> Void
  ) -> Subscription {
    observeUpdates(
      .handle, reading: .message, on: DeliveryTarget(delivery), replay: replayCurrent,
      { update in if let part = update.changedPart(keyPath) { handler(part) } })
  }

  /// Calls a main-actor `handler` on the main queue with the part of the value at
  /// `keyPath` now, then whenever that part changes, for as long as the returned
  /// subscription is kept.
  public func observe<Part: Equatable & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Part) -> Void
  ) -> Subscription {
    observeUpdates(
      .handle, reading: .message, on: .main, replay: replayCurrent,
      onMain { update in if let part = update.changedPart(keyPath) { handler(part) } })
  }
}

/// Builds the replay of the current value for a new subscription.
@usableFromInline @Sendable
func replayCurrent<Value>(_ value: borrowing Value) -> Update<Value> {
  let current = copy value
  return Update(old: current, new: current, isInitial: true)
}

extension Update {
  /// The part at `keyPath` if this update should be delivered for it: always for the
  /// replay, otherwise only when the part differs between old and new.
  @usableFromInline func changedPart<Part: Equatable>(_ keyPath: KeyPath<Value, Part>) -> Part? {
    let part = new[keyPath: keyPath]
    if isInitial || old[keyPath: keyPath] != part { return part }
    return nil
  }

  /// This update as a change from the old to the new value.
  @inlinable var change: Change<Value> { Change(oldValue: old, newValue: new) }
}
