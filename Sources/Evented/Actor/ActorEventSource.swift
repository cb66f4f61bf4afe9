/// A broadcaster of events whose state is isolated by an actor instead of a lock.
///
/// ```swift
/// let progress = ActorEventSource<Double>()
/// Task { for await fraction in await progress.events() { bar.show(fraction) } }
/// await progress.observe(with: screen) { @MainActor screen, fraction in screen.show(fraction) }
/// await progress.send(0.5)
/// ```
///
/// Choose it over ``EventSource`` when the code that sends already runs on this actor's
/// terms, in async code, and every consumer is asynchronous (`for await`, or an
/// `async` handler). Choose ``EventSource`` when senders are synchronous, when handlers
/// must run before `send` returns, or when cost per event matters: see the article
/// "Choosing a variant".
///
/// Handlers are `async`. Each subscription keeps the events not yet handled in a queue
/// of its own, and a task of its own awaits the handler with them, one event at a
/// time: a handler may await other actors (or be `@MainActor`) without holding up the
/// source or other subscriptions. That task exists only while the queue has events: a
/// send that finds it idle starts it, and it ends once the queue is empty, so an idle
/// subscription holds no task. It has the priority of the task that subscribed (not
/// that of the sender): subscribe from a task of the priority the handler should run
/// at. It does not inherit the subscriber's task-local values.
///
/// ## Concurrency
///
/// - **Thread safety:** An actor; `Sendable`. Every call from outside is a suspension
///   point, and other sends, subscriptions and cancellations may take effect across
///   any `await`.
/// - **Ordering:** Each subscription receives events one at a time, in the order the
///   sends ran on the actor, even when its task ends between two events and another
///   starts. Handlers run after `send` returns, in each subscription's task; different
///   subscriptions are not ordered relative to each other.
/// - **Reentrancy:** A handler may send, subscribe and cancel (with `await`), on this
///   source or any other: it never runs on the actor, so nothing deadlocks, and a send
///   from a handler is delivered to that subscription after the current event. A
///   subscription added from a handler does not receive the event being handled.
///   A handler's sends, and those of tasks it starts while it runs, never wait for room
///   in a full queue (see the overload bound in ``send(_:)``).
/// - **Lifetime:** A handler subscription ends when its owner deinitializes (noticed by
///   its task before the next delivery, so at the latest after the next send, by
///   ``observerCount``, and by subscribing: each subscription checks
///   the next two subscriptions in turn, so a dead owner is found within half as many
///   subscriptions as there are, even without a send) or on
///   ``Subscription/cancel()``. After `cancel()` returns no new invocation
///   begins; one that began before may still be running, or even about to run its
///   first statement, since `cancel()` does not block its thread waiting for an
///   async handler. Sequences and handler tasks do not keep the source alive:
///   when it is deinitialized, its sequences finish, and each handler task delivers
///   the events already queued and ends; the handler and its captures are then
///   released.
public actor ActorEventSource<Event: Sendable>: ActorBoundedSource {
  // Touched only on the actor, never twice at once: no exclusivity check needed.
  @exclusivity(unchecked) @usableFromInline var sinks: ActorSinks<Event>

  /// Creates a source with no subscriptions.
  ///
  /// - Parameter backlogLimit: How many sent events a handler subscription may hold
  ///   undelivered before a send from outside a handler waits for it (see
  ///   ``send(_:)``). Must be at least 1.
  public init(backlogLimit: Int = 1_024) {
    precondition(backlogLimit >= 1, "Evented: backlogLimit must be at least 1")
    sinks = ActorSinks(limit: backlogLimit)
  }

  deinit {
    sinks.sourceEnded()
  }

  /// Delivers `event` to every current subscription.
  ///
  /// Appends the event to each subscription's queue (starting its task if it was
  /// idle) and returns; handlers and `for await` loops receive it afterwards, in their
  /// own tasks.
  ///
  /// If a handler subscription already holds `backlogLimit` undelivered events, a send
  /// from outside a handler first waits, suspended, until each has room (the actor
  /// is free meanwhile). A send made inside a handler's call never waits, nor does one
  /// from a task the handler started, while the call runs; once it returned, that
  /// task's sends wait like any other.
  ///
  /// A cancelled task never waits either, so that it can always finish (a handler may
  /// cancel a sender and await it): its sends go past the limit up to twice
  /// `backlogLimit` undelivered events. Past that, its send is refused and returns
  /// false: nothing is queued, and memory stays bounded.
  ///
  /// - Returns: Whether the event was sent: false only for a send of a cancelled task
  ///   that found a handler subscription holding twice `backlogLimit` events.
  /// - Complexity: O(n) in the number of subscriptions.
  @inlinable @discardableResult
  nonisolated(nonsending) public final func send(_ event: Event) async -> Bool {
    await commitWithinBound(event)
  }

  /// The events sent from now on, as an asynchronous sequence.
  ///
  /// ```swift
  /// for await event in await source.events(bufferingPolicy: .bufferingNewest(16)) { … }
  /// ```
  ///
  /// - Parameter bufferingPolicy: What to keep while the consumer is busy.
  /// - Returns: A single-pass sequence that receives every event sent after this call
  ///   and none sent before.
  public func events(bufferingPolicy: BufferingPolicy = .unbounded) -> AsyncEvents<Event> {
    let buffer = AsyncBuffer<Event>(policy: bufferingPolicy)
    add(ActorSink(stream: buffer))
    return AsyncEvents(buffer: buffer)
  }

  /// The number of live subscriptions: sequences still iterated and handlers whose
  /// owner is alive.
  ///
  /// - Complexity: O(n): ended subscriptions are removed first.
  public var observerCount: Int {
    sinks.sweep()
    return sinks.count
  }

  /// Awaits `handler` with every event from now on, for as long as `owner` lives.
  ///
  /// ```swift
  /// await source.observe(with: self) { me, event in await me.handle(event) }
  /// ```
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler; the subscription ends
  ///     when it deinitializes. Do not capture it strongly in `handler`.
  ///   - handler: Awaited with the owner and each event, one at a time, in the
  ///     subscription's task. It may be `@MainActor`.
  /// - Returns: A handle that may cancel early; dropping it does not end the
  ///   subscription.
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Event) async -> Void
  ) -> Subscription {
    subscribe(owner: owner, .owned(by: Owner.self, handler))
  }

  /// Awaits `handler` with every event from now on, for as long as the returned
  /// subscription is kept.
  ///
  /// - Returns: The owner of the subscription: it ends when this handle is released.
  @inlinable
  public final func observe(_ handler: @escaping @Sendable (Event) async -> Void) -> Subscription {
    subscribe(owner: nil, .plain(handler))
  }

  /// Awaits `handler` with the next event only, if `owner` is still alive then.
  ///
  /// - Note: At most once, even when events are sent concurrently or from the handler.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Event) async -> Void
  ) -> Subscription {
    subscribe(owner: owner, isOnce: true, .owned(by: Owner.self, handler))
  }

  /// Awaits `handler` with the next event only, if the returned subscription is still
  /// kept then.
  public func observeOnce(_ handler: @escaping @Sendable (Event) async -> Void) -> Subscription {
    subscribe(owner: nil, isOnce: true, .plain(handler))
  }

  /// Ends every subscription of this source: sequences finish once they have handed
  /// out the events they buffered, handlers are not started again (one already running
  /// may finish).
  public func removeAllObservers() {
    sinks.endAll()
  }

  @inlinable
  final func subscribe(
    owner: (any AnyObject & Sendable)?,
    isOnce: Bool = false,
    _ handler: ActorHandlerBody<Event>
  ) -> Subscription {
    let (handler, subscription) = ActorHandler<Event>.make(
      source: self, owner: owner, isOnce: isOnce, backlog: sinks.backlogForHandler(), handler)
    add(ActorSink(handler: handler))
    return subscription
  }

  /// Delivers `event` to every current subscription now, whatever the queues hold.
  @inlinable
  final func commit(_ event: Event) {
    sinks.push(event)
  }

  @inlinable
  final func withHandlerSinks<Result>(_ body: (inout ActorSinks<Event>) -> Result) -> Result {
    body(&sinks)
  }

  @inlinable
  final func add(_ sink: ActorSink<Event>) {
    sinks.scanNext()
    if ActorSinks<Event>.shouldSweep(count: sinks.count) { sinks.sweep() }
    sinks.append(sink)
  }
}

extension ActorEventSource where Event == Void {
  /// Delivers an event to every current subscription; see ``send(_:)``.
  ///
  /// - Returns: Whether the event was sent (see ``send(_:)``).
  @discardableResult
  public func send() async -> Bool {
    await send(())
  }
}
