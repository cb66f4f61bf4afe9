/// A broadcaster of events with no current value.
///
/// ```swift
/// let didFail = EventSource<ProfileError>()
/// didFail.observe(with: view, on: .main) { view, error in view.show(error) }
/// let token = didFail.observe { error in log(error) }   // keep `token`
/// didFail.send(.offline)
/// ```
///
/// Expose ``readOnly`` to let other code observe without being able to send.
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member may be called from any thread at any
///   time. Handlers never run while an internal lock is held.
/// - **Ordering:** Each subscription receives events one at a time, in the order the
///   sends were committed. With `.synchronous` delivery a send runs the handlers
///   before it returns, unless another thread is delivering for this source: then that
///   thread delivers the event after the ones before it, and `send` returns at once.
///   Different subscriptions are not ordered relative to each other.
/// - **Reentrancy:** A handler may send, subscribe and cancel, on this source or any
///   other. A send from inside a handler is committed at once and delivered after the
///   current delivery pass; deliveries never nest. A subscription added from inside a
///   handler does not receive the event being delivered.
/// - **Lifetime:** A subscription ends when its owner deinitializes, or on
///   ``Subscription/cancel()``. The source holds its owners weakly and does not keep
///   itself alive: when it is deinitialized, its subscriptions receive nothing more,
///   not even deliveries already submitted to a queue that had not started.
public final class EventSource<Event: Sendable>: EventSourceProtocol {
  @usableFromInline let hub: Hub<Event, Void>

  /// Creates a source with no subscriptions.
  ///
  /// - Parameter backlogLimit: How many sent events may wait for the thread that is
  ///   delivering for this source (1,024 unless given). At the limit, a `send` from a
  ///   thread that is not running a handler or delivering waits until there is room;
  ///   see "Overload" in the guarantees guide.
  public init(backlogLimit: Int = 1_024) {
    hub = Hub.make((), backlogLimit: backlogLimit)
  }

  /// Creates a source that starts something when its first observer arrives and stops
  /// it when its last observer is gone: a socket, a sensor, a file watcher.
  ///
  /// ```swift
  /// let readings = EventSource<Double>(
  ///   onFirstObserver: { sensor.start() },
  ///   onLastObserverGone: { sensor.stop() })
  /// ```
  ///
  /// Every subscription counts, whatever made it: `observe`, `observeOnce`, `events`,
  /// and the subscription a derived source or a read-only view's observer makes. It
  /// stops counting when its handler is released: on `cancel()`, after a once-only
  /// delivery, when an event loop ends, on ``removeAllObservers()``, or, for a
  /// subscription whose owner died, when the source next meets it (a send, a
  /// subscribe, ``EventSourceProtocol/observerCount``).
  ///
  /// - Parameters:
  ///   - backlogLimit: As for ``init(backlogLimit:)``.
  ///   - onFirstObserver: Runs when the number of subscriptions rises from zero, on the
  ///     subscribing thread before `observe` returns (or on the thread running the
  ///     hooks, if one is). The new subscription is added after it returns, so events
  ///     it sends synchronously do not reach that subscription.
  ///   - onLastObserverGone: Runs when the number of subscriptions falls to zero, on
  ///     the thread that released the last one.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** The hooks run outside every lock and may use this source
  ///   (send, subscribe, cancel) and any other.
  /// - **Ordering:** The hooks never run concurrently with each other for one source,
  ///   and run in the order the count crossed zero: start, stop, start, … An observer
  ///   that arrives while the stop hook runs gets a start hook after it.
  /// - **Reentrancy:** A crossing caused by a hook (it subscribes or cancels) runs its
  ///   hook after the current one returns, on the same thread.
  /// - **Lifetime:** The source keeps the hooks until it is deinitialized.
  public init(
    backlogLimit: Int = 1_024, onFirstObserver: @escaping @Sendable () -> Void,
    onLastObserverGone: @escaping @Sendable () -> Void
  ) {
    hub = Hub.makeLazy(
      (), backlogLimit: backlogLimit,
      hooks: LazyHooks(onFirstObserver: onFirstObserver, onLastObserverGone: onLastObserverGone))
  }

  /// Creates a lazy source whose hooks receive it, so that they can send on it without
  /// holding it: what a class needs to start and stop the source it is initializing.
  ///
  /// ```swift
  /// final class Thermometer: Sendable {
  ///   let readings: EventSource<Double>
  ///   init(sensor: Sensor) {
  ///     readings = EventSource(
  ///       onFirstObserver: { source in sensor.start { [weak source] in source?.send($0) } },
  ///       onLastObserverGone: { _ in sensor.stop() })
  ///   }
  /// }
  /// ```
  ///
  /// The same as the initializer whose hooks take no argument, except that each
  /// hook is given this source. The source holds its hooks, not the reverse:
  /// it passes itself when it calls one, so hooks that use their argument and capture
  /// nothing else keep nothing alive.
  ///
  /// - Parameters:
  ///   - backlogLimit: As for ``init(backlogLimit:)``.
  ///   - onFirstObserver: Runs with this source when the number of subscriptions rises
  ///     from zero, as for the hooks that take no argument.
  ///   - onLastObserverGone: Runs with this source when the number of subscriptions
  ///     falls to zero, as for the hooks that take no argument.
  ///
  /// - Important: A hook runs only while the source exists. When the source is
  ///   deinitialized while observed, its subscriptions end and the stop hook does not
  ///   run, as there is no source left to give it: stop what the start hook started
  ///   from the deinit of the object that owns the source, or let it hold the source
  ///   weakly and stop when the source is gone.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** The hooks run outside every lock and may use this source
  ///   (send, subscribe, cancel) and any other.
  /// - **Ordering:** The hooks never run concurrently with each other for one source,
  ///   and run in the order the count crossed zero: start, stop, start, …
  /// - **Reentrancy:** A crossing caused by a hook runs its hook after the current one
  ///   returns, on the same thread.
  /// - **Lifetime:** The source keeps the hooks until it is deinitialized; the hooks
  ///   do not keep the source. A hook holds it strongly only while it runs (and
  ///   longer if it stores it).
  public init(
    backlogLimit: Int = 1_024, onFirstObserver: @escaping @Sendable (EventSource<Event>) -> Void,
    onLastObserverGone: @escaping @Sendable (EventSource<Event>) -> Void
  ) {
    let hooks = LazyHooks(
      receiving: EventSource.self, onFirstObserver: onFirstObserver, onLastObserverGone: onLastObserverGone)
    hub = Hub.makeLazy((), backlogLimit: backlogLimit, hooks: hooks)
    hooks.attach(self)
  }

  /// Delivers `event` to every current subscription.
  ///
  /// - Parameter event: The event to broadcast.
  /// - Complexity: O(n) in the number of subscriptions, plus the handlers.
  @inlinable
  public func send(_ event: Event) {
    hub.sendFromSource(event)
  }

  /// Ends every subscription made with `observe`, `observeOnce` or `events` on this
  /// source.
  ///
  /// When this returns, no such handler of this source will start again. A handler
  /// that is running on another thread is waited for, as with ``Subscription/cancel()``.
  /// This holds when several threads call it at once, too: each call also ends, and
  /// waits for, the subscriptions that another call removed and is still ending.
  ///
  /// Event sources derived from this one (`map`, `filter`, `compactMap`, `merge`) keep
  /// following it, and their own subscriptions go on: this ends the subscriptions
  /// users made on this source, not the links of what is built on it.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** May be called from any thread, and from inside a handler.
  /// - **Ordering:** No event sent after this returns reaches an ended subscription.
  /// - **Reentrancy:** Called from inside a handler of this source, it returns at once
  ///   for that handler's own subscription, which ends when the handler returns.
  /// - **Lifetime:** Each ended handler and its captures are released once it is not
  ///   running.
  ///
  /// - Important: A handler whose subscription has already ended (it cancelled
  ///   itself, or it is a once-only handler) is still waited for while it runs. As with
  ///   `cancel()`, a handler that waits for the thread calling this (a lock it holds, a
  ///   semaphore it would signal) deadlocks.
  public func removeAllObservers() {
    hub.removeAll()
  }

  /// A view of this source that can observe but not send.
  @inlinable
  public var readOnly: ReadOnlyEventSource<Event> {
    ReadOnlyEventSource(viewing: self)
  }
}

extension EventSource where Event == Void {
  /// Delivers an event to every current subscription.
  @inlinable
  public func send() {
    hub.sendFromSource(())
  }
}

/// A view of an ``EventSource`` that can observe but not send, or a source derived
/// from others with `map`, `filter`, `compactMap` or `merge`.
///
/// ```swift
/// final class Uploader: Sendable {
///   private let finishedSource = EventSource<URL>()
///   var finished: ReadOnlyEventSource<URL> { finishedSource.readOnly }
/// }
/// ```
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member may be called from any thread.
/// - **Ordering:** As the ``EventSource`` it views.
/// - **Reentrancy:** As the ``EventSource`` it views.
/// - **Lifetime:** A view keeps its source alive; subscriptions follow the ownership
///   rule of ``EventSource``. A derived source keeps its sources and its transform
///   alive; a source never keeps a derived source alive, but each subscription to the
///   derived source does.
public struct ReadOnlyEventSource<Event: Sendable>: EventSourceProtocol {
  @usableFromInline let hub: Hub<Event, Void>
  /// The node of a derived source (`map`, `filter`, `merge`, …); nil for a view.
  @usableFromInline let derived: DerivedEventSource<Event>?
  /// The source a view shows, kept alive by it (so that a subscription owned by the
  /// source lives on, and a weak reference to it stays set); nil for a derived source.
  @usableFromInline let viewed: EventSource<Event>?

  @usableFromInline init(viewing source: EventSource<Event>) {
    hub = source.hub
    derived = nil
    viewed = source
  }

  /// A view of `source` that can observe but not send: the same as `source.readOnly`.
  ///
  /// ```swift
  /// let finished = ReadOnlyEventSource(finishedSource)
  /// ```
  public init(_ source: EventSource<Event>) {
    self.init(viewing: source)
  }

  @usableFromInline init(derived: DerivedEventSource<Event>) {
    hub = derived.hub
    self.derived = derived
    viewed = nil
  }

  /// This view itself.
  public var readOnly: ReadOnlyEventSource<Event> { self }
}
