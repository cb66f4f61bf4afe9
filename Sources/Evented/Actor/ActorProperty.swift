/// A value that notifies its subscribers after every change, isolated by an actor
/// instead of a lock.
///
/// ```swift
/// let score = ActorProperty(0)
/// Task { for await value in await score.values { label.show(value) } }
/// await score.setValue(3)
/// await score.modify { $0 += 1 }
/// ```
///
/// `Equatable` values skip writes equal to the current value unless created with
/// `skipsDuplicates: false`; other values never skip.
///
/// Choose it over ``Property`` when writers are already asynchronous and every
/// consumer is too (`for await`, or an `async` handler). Choose ``Property`` when code
/// must read the value synchronously, when handlers must run before a write returns,
/// or when cost per write matters: see the article "Choosing a variant".
///
/// Handlers are `async`. Each subscription holds at most one value not yet handled,
/// the newest, and a task of its own awaits the handler with it: a handler may await
/// other actors (or be `@MainActor`) without holding up writers or other
/// subscriptions, and a slow handler skips to the newest value instead of falling
/// behind. That task exists only while a value waits: a write that finds it idle starts
/// it, and it ends once nothing waits, so an idle subscription holds no task. It has the
/// priority of the task that subscribed (not that of the writer): subscribe from a task
/// of the priority the handler should run at. It does not inherit the subscriber's
/// task-local values. The current value a new subscription receives first is delivered
/// by one task per property, one subscription after another.
///
/// ## Concurrency
///
/// - **Thread safety:** An actor; `Sendable`. Every call from outside is a suspension
///   point: a value read with `await value` may have changed by the time the caller
///   uses it, so read-modify-write with ``modify(_:)``, never with a read then a write.
/// - **Ordering:** Each subscription receives values one at a time, in the order the
///   writes ran on the actor, skipping to the newest when it is behind (a change is then
///   merged: from the value it received last to the newest), even when its task ends
///   between two writes and another starts; when writers stop, the last value delivered
///   to every live
///   subscription equals ``value`` (unless a sequence's buffering policy drops newer
///   values). After `await setValue(x)` returns, the same task reads `x` or a later
///   value. With duplicates skipped, a write equal to the current value notifies
///   nobody, and no subscription receives a change from `x` to `x`.
/// - **Reentrancy:** A handler may read, write, modify, subscribe and cancel (with
///   `await`), on this property or any other: it never runs on the actor, so nothing
///   deadlocks, and a write from a handler is delivered to that subscription after the
///   current value. No write waits for a handler. The closure given to ``modify(_:)``
///   runs on the actor and cannot call it.
/// - **Lifetime:** A handler subscription ends when its owner deinitializes (noticed by
///   its task before the next delivery, so at the latest after the next write, by
///   ``observerCount``, and by subscribing: each subscription checks
///   the next two subscriptions in turn, so a dead owner is found within half as many
///   subscriptions as there are, even without a write) or on
///   ``Subscription/cancel()``. After `cancel()` returns no new invocation
///   begins; one that began before may still be running, or even about to run its
///   first statement, since `cancel()` does not block its thread waiting for an
///   async handler. Sequences and handler tasks do not keep the property alive:
///   when it is deinitialized, its sequences finish, and each handler task delivers
///   the values already queued and ends; the handler and its captures are then
///   released.
public actor ActorProperty<Value: Sendable> {
  /// The current value: the latest committed one.
  public var value: Value { current }
  @usableFromInline var current: Value
  @usableFromInline let isDuplicate: (@Sendable (Value, Value) -> Bool)?
  /// How handler subscriptions merge waiting updates, and how once-subscriptions do;
  /// made by the first of each (an idle property holds neither).
  var madeCoalescing: (plain: Coalescing<Update<Value>>?, once: Coalescing<Update<Value>>?)
  // Touched only on the actor, never twice at once: no exclusivity check needed.
  /// The sequences (`values`).
  @exclusivity(unchecked) @usableFromInline var valueSinks = ActorSinks<Value>()
  /// The handler subscriptions.
  @exclusivity(unchecked) @usableFromInline var updateSinks: ActorSinks<Update<Value>>
  /// New handler subscriptions whose replay waits for the replaying task.
  var replays = Ring<ActorHandler<Update<Value>>>()
  /// Whether a replaying task runs.
  var isReplaying = false

  init(value: Value, isDuplicate: (@Sendable (Value, Value) -> Bool)?) {
    self.current = value
    self.isDuplicate = isDuplicate
    self.updateSinks = ActorSinks()
  }

  /// Creates a property that notifies on every write.
  ///
  /// - Parameter value: The initial value.
  public init(_ value: Value) {
    self.init(value: value, isDuplicate: nil)
  }

  /// Creates a property that notifies on every write.
  ///
  /// A property's handlers hold at most one undelivered value, so writes never wait and
  /// no limit applies: `backlogLimit` is only checked to be at least 1.
  @available(*, deprecated, message: "writes to an ActorProperty never wait: its handlers keep the newest value")
  public init(_ value: Value, backlogLimit: Int) {
    precondition(backlogLimit >= 1, "Evented: backlogLimit must be at least 1")
    self.init(value: value, isDuplicate: nil)
  }

  deinit {
    valueSinks.sourceEnded()
    updateSinks.sourceEnded()
  }

  /// Sets the value and notifies the subscriptions, unless duplicates are skipped and
  /// `newValue` equals the current value.
  ///
  /// Never waits for a handler: a handler subscription holds at most one undelivered
  /// value, the newest (a change merged from the last value it received).
  @inlinable
  nonisolated(nonsending) public final func setValue(_ newValue: Value) async {
    await commit(newValue)
  }

  /// Changes the value in place, atomically, and notifies once with the old and new
  /// value.
  ///
  /// ```swift
  /// await counter.modify { $0 += 1 }
  /// ```
  ///
  /// Reads, changes and commits the value in one step on the actor, so no other write
  /// comes between. Never waits for a handler, as ``setValue(_:)``.
  ///
  /// - Parameter body: Mutates a copy of the value, on the actor. If it throws, the
  ///   value stays as it was.
  /// - Returns: What `body` returns.
  @discardableResult
  public func modify<Result: Sendable, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) async throws(Failure) -> Result {
    var next = value
    let result = try body(&next)
    commit(next)
    return result
  }

  /// The current value, then every new value, keeping only the newest undelivered one.
  ///
  /// A slow consumer never falls behind: it skips to the latest value, and when writers
  /// stop, the last value it receives equals ``value``.
  public var values: AsyncValues<Value> {
    values(bufferingPolicy: .bufferingNewest(1))
  }

  /// The current value, then every new value, with the given buffering.
  ///
  /// - Parameter bufferingPolicy: As for ``PropertyProtocol/values(bufferingPolicy:)``:
  ///   a limit of 0 gives the value current when the consumer next asks.
  /// - Returns: A single-pass sequence whose first element is the value current during
  ///   this call, followed by every later write the policy keeps.
  public func values(bufferingPolicy: BufferingPolicy) -> AsyncValues<Value> {
    let buffer = AsyncBuffer<Value>(policy: bufferingPolicy.forValues)
    buffer.push(value)
    sweepIfGrown()
    valueSinks.append(ActorSink(stream: buffer))
    return AsyncValues(buffer: buffer)
  }

  /// The number of live subscriptions: sequences still iterated and handlers whose
  /// owner is alive.
  ///
  /// - Complexity: O(n): ended subscriptions are removed first.
  public var observerCount: Int {
    valueSinks.sweep()
    updateSinks.sweep()
    return valueSinks.count + updateSinks.count
  }

  /// Awaits `handler` with the current value, then with every new value, for as long
  /// as `owner` lives.
  ///
  /// ```swift
  /// await model.name.observe(with: screen) { @MainActor screen, name in screen.title = name }
  /// ```
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler; the subscription ends
  ///     when it deinitializes.
  ///   - handler: Awaited with the owner and each value, one at a time, in the
  ///     subscription's task; the newest value when it is behind. It may be
  ///     `@MainActor`.
  /// - Returns: A handle that may cancel early; dropping it does not end the
  ///   subscription.
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Value) async -> Void
  ) -> Subscription {
    subscribe(owner: owner, replays: true, .owned(by: Owner.self) { owner, update in await handler(owner, update.new) })
  }

  /// Awaits `handler` with the current value, then with every new value, for as long
  /// as the returned subscription is kept.
  public func observe(_ handler: @escaping @Sendable (Value) async -> Void) -> Subscription {
    subscribe(owner: nil, replays: true, .plain { update in await handler(update.new) })
  }

  /// Awaits `handler` with every change from now on, as the old and the new value, for
  /// as long as `owner` lives. The current value is not replayed.
  @discardableResult
  public func observeChanges<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Change<Value>) async -> Void
  ) -> Subscription {
    subscribe(
      owner: owner, replays: false,
      .owned(by: Owner.self) { owner, update in
        await handler(owner, Change(oldValue: update.old, newValue: update.new))
      })
  }

  /// Awaits `handler` with every change from now on, for as long as the returned
  /// subscription is kept.
  public func observeChanges(_ handler: @escaping @Sendable (Change<Value>) async -> Void) -> Subscription {
    subscribe(
      owner: nil, replays: false, .plain { update in await handler(Change(oldValue: update.old, newValue: update.new)) }
    )
  }

  /// Awaits `handler` with the part of the value at `keyPath` now, then whenever that
  /// part changes, for as long as `owner` lives.
  @discardableResult
  public func observe<Part: Equatable & Sendable, Owner: AnyObject & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Part) async -> Void
  ) -> Subscription {
    subscribe(
      owner: owner, replays: true,
      .owned(by: Owner.self) { owner, update in
        if let part = update.changedPart(keyPath) { await handler(owner, part) }
      })
  }

  /// Awaits `handler` with the part of the value at `keyPath` now, then whenever that
  /// part changes, for as long as the returned subscription is kept.
  public func observe<Part: Equatable & Sendable>(
    _ keyPath: KeyPath<Value, Part> & Sendable,
    _ handler: @escaping @Sendable (Part) async -> Void
  ) -> Subscription {
    subscribe(
      owner: nil, replays: true,
      .plain { update in
        if let part = update.changedPart(keyPath) { await handler(part) }
      })
  }

  /// Awaits `handler` with the next new value only, if `owner` is still alive then. The
  /// current value is not delivered: use ``value`` for it.
  ///
  /// ```swift
  /// await model.status.observeOnce(with: screen) { @MainActor screen, status in screen.announce(status) }
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** A call to the actor, and so a suspension point.
  /// - **Ordering:** The handler receives the value of the first write that runs on the
  ///   actor after this call, in the subscription's task.
  /// - **Reentrancy:** The handler may read, write, subscribe and cancel (with
  ///   `await`); a write it makes is not delivered to it again.
  /// - **Lifetime:** Ends after the one delivery, when `owner` deinitializes, or on
  ///   ``Subscription/cancel()``, whichever comes first.
  ///
  /// - Note: At most once, even when writes are made concurrently or from the handler.
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler.
  ///   - handler: Awaited with the owner and the next value. It may be `@MainActor`.
  /// - Returns: A handle that may cancel early; dropping it does not end the
  ///   subscription.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    _ handler: @escaping @Sendable (Owner, Value) async -> Void
  ) -> Subscription {
    subscribe(
      owner: owner, replays: false, isOnce: true,
      .owned(by: Owner.self) { owner, update in await handler(owner, update.new) })
  }

  /// Awaits `handler` with the next new value only, if the returned subscription is
  /// still kept then.
  ///
  /// - Parameter handler: Awaited with the next value. It may be `@MainActor`.
  /// - Returns: The owner of the subscription: it ends when this handle is released.
  public func observeOnce(_ handler: @escaping @Sendable (Value) async -> Void) -> Subscription {
    subscribe(owner: nil, replays: false, isOnce: true, .plain { update in await handler(update.new) })
  }

  @inlinable
  final func commit(_ newValue: Value) {
    if let isDuplicate, isDuplicate(current, newValue) { return }
    let old = current
    current = newValue
    valueSinks.push(newValue)
    if updateSinks.count != 0 { updateSinks.push(Update(old: old, new: newValue, isInitial: false)) }
  }

  private func subscribe(
    owner: (any AnyObject & Sendable)?,
    replays: Bool,
    isOnce: Bool = false,
    _ handler: ActorHandlerBody<Update<Value>>
  ) -> Subscription {
    let (core, subscription) = ActorHandler<Update<Value>>.make(
      source: self, owner: owner, isOnce: isOnce, backlog: updateSinks.backlogForHandler(),
      coalescing: coalescing(isOnce: isOnce), handler)
    if replays, core.pushReplay(Update(old: value, new: value, isInitial: true)) {
      self.replays.append(core)
      if !isReplaying {
        isReplaying = true
        startReplaying()
      }
    }
    sweepIfGrown()
    updateSinks.append(ActorSink(handler: core))
    return subscription
  }

  /// How a handler subscription merges waiting updates: into one from the value it
  /// received last to the newest (with duplicates skipped, a merged update whose values
  /// are equal is no change, and is skipped as an equal write is); a once-subscription
  /// keeps the first, the next value after it subscribed.
  private func coalescing(isOnce: Bool) -> Coalescing<Update<Value>> {
    if isOnce {
      if let once = madeCoalescing.once { return once }
      let made = Coalescing<Update<Value>>(merge: { waiting, _ in waiting }, skips: nil)
      madeCoalescing.once = made
      return made
    }
    if let plain = madeCoalescing.plain { return plain }
    var skips: (@Sendable (Update<Value>) -> Bool)?
    if let isDuplicate {
      skips = { (update: Update<Value>) -> Bool in
        update.isMerged && !update.isInitial && isDuplicate(update.old, update.new)
      }
    }
    let made = Coalescing(merge: Update.merging, skips: skips)
    madeCoalescing.plain = made
    return made
  }

  /// Starts the task that makes the first delivery of new subscriptions, one after
  /// another: a subscription needs no task of its own until its replay is delivered
  /// (a task costs about 1.8 KB until it runs; a burst of subscriptions would hold one
  /// each). A subscription with more to deliver after its replay gets its own task.
  private nonisolated func startReplaying() {
    Task.detached { await self.replayAll() }
  }

  /// The next subscription to replay to, or nil once there is none (the replaying
  /// task then ends).
  private func nextReplay() -> ActorHandler<Update<Value>>? {
    if let next = replays.removeFirst() { return next }
    isReplaying = false
    return nil
  }

  private nonisolated func replayAll() async {
    while let core = await nextReplay() {
      await core.drain(firstBatchOnly: true)
      // A handler may cancel the task it runs in: the next replay starts uncancelled.
      if Task.isCancelled {
        startReplaying()
        return
      }
    }
  }

  private func sweepIfGrown() {
    valueSinks.scanNext()
    updateSinks.scanNext()
    if ActorSinks<Value>.shouldSweep(count: valueSinks.count + updateSinks.count) {
      valueSinks.sweep()
      updateSinks.sweep()
    }
  }
}

extension ActorProperty where Value: Equatable {
  /// Creates a property that skips writes equal to the current value.
  ///
  /// - Parameter value: The initial value.
  public init(_ value: Value) {
    self.init(value: value, isDuplicate: Self.equals)
  }

  /// Creates a property; with `skipsDuplicates`, writes equal to the current value
  /// notify nobody.
  public init(_ value: Value, skipsDuplicates: Bool) {
    self.init(value: value, isDuplicate: skipsDuplicates ? Self.equals : nil)
  }

  /// Creates a property that skips writes equal to the current value.
  ///
  /// A property's handlers hold at most one undelivered value, so writes never wait and
  /// no limit applies: `backlogLimit` is only checked to be at least 1.
  @available(*, deprecated, message: "writes to an ActorProperty never wait: its handlers keep the newest value")
  public init(_ value: Value, backlogLimit: Int) {
    precondition(backlogLimit >= 1, "Evented: backlogLimit must be at least 1")
    self.init(value: value, isDuplicate: Self.equals)
  }

  /// Creates a property; with `skipsDuplicates`, writes equal to the current value
  /// notify nobody.
  @available(*, deprecated, message: "writes to an ActorProperty never wait: its handlers keep the newest value")
  public init(_ value: Value, skipsDuplicates: Bool, backlogLimit: Int) {
    precondition(backlogLimit >= 1, "Evented: backlogLimit must be at least 1")
    self.init(value: value, isDuplicate: skipsDuplicates ? Self.equals : nil)
  }

  private static var equals: @Sendable (Value, Value) -> Bool { { $0 == $1 } }
}
