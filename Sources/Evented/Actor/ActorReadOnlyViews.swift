// Read-only views of the actor variants: structs that forward the observing members
// to the actor and have no way to write. No second engine: every call is the actor's.

/// A view of an ``ActorProperty`` that can read and observe but not write.
///
/// ```swift
/// actor Downloader {
///   private let progressSource = ActorProperty(0.0)
///   nonisolated var progress: ActorReadOnlyProperty<Double> { progressSource.readOnly }
/// }
/// for await fraction in await downloader.progress.values { bar.show(fraction) }
/// ```
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member is a call to the actor, and so a
///   suspension point.
/// - **Ordering:** As the ``ActorProperty`` it views.
/// - **Reentrancy:** As the ``ActorProperty`` it views.
/// - **Lifetime:** The view keeps its property alive, not the reverse.
public struct ActorReadOnlyProperty<Value: Sendable>: Sendable {
  let property: ActorProperty<Value>

  /// A read-only view of `property`.
  public init(_ property: ActorProperty<Value>) {
    self.property = property
  }

  /// The current value: the latest committed one.
  public var value: Value {
    get async { await property.value }
  }

  /// The number of subscriptions and sequences whose owner or consumer is alive.
  public var observerCount: Int {
    get async { await property.observerCount }
  }

  /// The current value, then every new value, keeping only the newest undelivered one.
  public var values: AsyncValues<Value> {
    get async { await property.values }
  }

  /// The current value, then every new value, with the given buffering.
  public func values(bufferingPolicy: BufferingPolicy) async -> AsyncValues<Value> {
    await property.values(bufferingPolicy: bufferingPolicy)
  }

  /// Calls `handler` with the current value, then every new value, for as long as
  /// `owner` lives; see ``ActorProperty/observe(with:_:)``.
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Value) async -> Void
  ) async -> Subscription {
    await property.observe(with: owner, handler)
  }

  /// Calls `handler` with the current value, then every new value, for as long as the
  /// returned subscription is kept.
  public func observe(_ handler: @escaping @Sendable (Value) async -> Void) async -> Subscription {
    await property.observe(handler)
  }

  /// Calls `handler` with the next new value only, if `owner` is still alive then; see
  /// ``ActorProperty/observeOnce(with:_:)``.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Value) async -> Void
  ) async -> Subscription {
    await property.observeOnce(with: owner, handler)
  }

  /// Calls `handler` with the next new value only, if the returned subscription is
  /// still kept then.
  public func observeOnce(_ handler: @escaping @Sendable (Value) async -> Void) async -> Subscription {
    await property.observeOnce(handler)
  }

  /// Calls `handler` with every change from now on, for as long as `owner` lives.
  @discardableResult
  public func observeChanges<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Change<Value>) async -> Void
  ) async -> Subscription {
    await property.observeChanges(with: owner, handler)
  }

  /// Calls `handler` with every change from now on, for as long as the returned
  /// subscription is kept.
  public func observeChanges(_ handler: @escaping @Sendable (Change<Value>) async -> Void) async -> Subscription {
    await property.observeChanges(handler)
  }

  /// Calls `handler` with the part of the value at `keyPath` now, then whenever that
  /// part changes, for as long as `owner` lives.
  @discardableResult
  public func observe<Part: Equatable & Sendable, Owner: AnyObject & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Part) async -> Void
  ) async -> Subscription {
    await property.observe(keyPath, with: owner, handler)
  }

  /// Calls `handler` with the part of the value at `keyPath` now, then whenever that
  /// part changes, for as long as the returned subscription is kept.
  public func observe<Part: Equatable & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    _ handler: @escaping @Sendable (Part) async -> Void
  ) async -> Subscription {
    await property.observe(keyPath, handler)
  }
}

extension ActorProperty {
  /// A view of this property that can read and observe but not write.
  public nonisolated var readOnly: ActorReadOnlyProperty<Value> {
    ActorReadOnlyProperty(self)
  }
}

/// A view of an ``ActorEventSource`` that can observe but not send.
///
/// ```swift
/// let finished = uploads.readOnly
/// for await file in await finished.events() { show(file) }
/// ```
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member is a call to the actor, and so a
///   suspension point.
/// - **Ordering:** As the ``ActorEventSource`` it views.
/// - **Reentrancy:** As the ``ActorEventSource`` it views.
/// - **Lifetime:** The view keeps its source alive, not the reverse.
public struct ActorReadOnlyEventSource<Event: Sendable>: Sendable {
  let source: ActorEventSource<Event>

  /// A read-only view of `source`.
  public init(_ source: ActorEventSource<Event>) {
    self.source = source
  }

  /// The number of subscriptions and sequences whose owner or consumer is alive.
  public var observerCount: Int {
    get async { await source.observerCount }
  }

  /// The events sent from now on, as an asynchronous sequence.
  public func events(bufferingPolicy: BufferingPolicy = .unbounded) async -> AsyncEvents<Event> {
    await source.events(bufferingPolicy: bufferingPolicy)
  }

  /// Calls `handler` with every event from now on, for as long as `owner` lives.
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Event) async -> Void
  ) async -> Subscription {
    await source.observe(with: owner, handler)
  }

  /// Calls `handler` with every event from now on, for as long as the returned
  /// subscription is kept.
  public func observe(_ handler: @escaping @Sendable (Event) async -> Void) async -> Subscription {
    await source.observe(handler)
  }

  /// Calls `handler` with the next event only, if `owner` is still alive then.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Event) async -> Void
  ) async -> Subscription {
    await source.observeOnce(with: owner, handler)
  }

  /// Calls `handler` with the next event only, if the returned subscription is still
  /// kept then.
  public func observeOnce(_ handler: @escaping @Sendable (Event) async -> Void) async -> Subscription {
    await source.observeOnce(handler)
  }
}

extension ActorEventSource {
  /// A view of this source that can observe but not send.
  public nonisolated var readOnly: ActorReadOnlyEventSource<Event> {
    ActorReadOnlyEventSource(self)
  }
}
