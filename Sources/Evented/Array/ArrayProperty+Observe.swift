extension ArrayProperty {
  /// The number of subscriptions whose owner is alive.
  ///
  /// The subscription by which ``readOnly`` follows this array counts as one while the
  /// view has subscriptions of its own (derived values made from it included), and not
  /// while nobody observes the view. While an Observation scope (a SwiftUI view) shows
  /// the array, the one subscription Observation follows it with counts too, until one
  /// second after a change that no scope read again.
  ///
  /// - Complexity: O(n): subscriptions of owners that are gone are swept out first.
  public var observerCount: Int {
    hub.liveCount
  }

  /// Ends every subscription users made on this array, including those to ``readOnly``.
  ///
  /// ```swift
  /// friends.removeAllObservers()
  /// friends.observerCount   // 0
  /// ```
  ///
  /// When this returns, no handler of this array or of its ``readOnly`` view will start
  /// again. A handler that is running on another thread is waited for, as with
  /// ``Subscription/cancel()``; this holds when several threads call it at once, too.
  /// ``readOnly`` keeps following the array for new subscriptions. Values derived from
  /// it (`map`, `combineLatest`, …) keep following the array, and their observers keep
  /// receiving their updates: this ends the subscriptions users made on this array and
  /// its view, not the links of what is built on them. So ``observerCount`` is 0
  /// afterwards unless a value derived from the array is observed (it counts that
  /// value's link).
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** May be called from any thread, and from inside a handler.
  /// - **Ordering:** No commit made after this returns reaches an ended subscription.
  /// - **Reentrancy:** Called from inside a handler of this array, it returns at once
  ///   for that handler's own subscription, which ends when the handler returns.
  /// - **Lifetime:** Each ended handler and its captures are released once it is not
  ///   running.
  ///
  /// - Important: As with `cancel()`, a handler that waits for the thread calling this
  ///   (a lock it holds, a semaphore it would signal) deadlocks.
  public func removeAllObservers() {
    hub.removeAll()
    restartView()
  }

  /// Calls `handler` with the current array now, then with the array after every
  /// commit, for as long as `owner` lives.
  ///
  /// ```swift
  /// model.friends.observe(with: label) { label, friends in label.text = "\(friends.count)" }
  /// ```
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler; the subscription ends
  ///     when it deinitializes.
  ///   - delivery: Where the handler runs. With `.synchronous`, the current array is
  ///     delivered before this returns unless another thread is delivering for the
  ///     property (then it is delivered in order by that thread).
  ///   - handler: Called with the owner and each array, never concurrently with itself.
  /// - Returns: A handle that may cancel early; dropping it does not end the
  ///   subscription.
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, [Element]) -> Void
  ) -> Subscription {
    observeArrays(.owner(owner), on: DeliveryTarget(delivery), replay: Self.replay, owned: handler)
  }

  /// Calls a main-actor `handler` on the main queue with the current array, then with
  /// the array after every commit, for as long as `owner` lives.
  @discardableResult
  public func observe<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, [Element]) -> Void
  ) -> Subscription {
    observeArrays(.owner(owner), on: .main, replay: Self.replay, owned: onMain(handler))
  }

  /// Calls `handler` with the current array now, then with the array after every
  /// commit, for as long as the returned subscription is kept.
  public func observe(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable ([Element]) -> Void
  ) -> Subscription {
    observeArrays(.handle, on: DeliveryTarget(delivery), replay: Self.replay, handler)
  }

  /// Calls a main-actor `handler` on the main queue with the current array, then with
  /// the array after every commit, for as long as the returned subscription is kept.
  public func observe(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable ([Element]) -> Void
  ) -> Subscription {
    observeArrays(.handle, on: .main, replay: Self.replay, onMain(handler))
  }

  /// Calls `handler` with the changeset of every commit from now on, for as long as
  /// `owner` lives; with `fromEmpty`, first with a changeset that inserts the current
  /// array into an empty one.
  ///
  /// ```swift
  /// model.friends.observeChanges(with: view) { view, changeset in
  ///   view.rows = changeset.array
  ///   view.animate(removing: changeset.removals, inserting: changeset.insertions)
  /// }
  /// ```
  ///
  /// Without `fromEmpty` the current array is not replayed, and reading ``value``
  /// before subscribing races with other writers. A replica uses `fromEmpty`: every
  /// changeset it receives applies to the array the one before produced, starting from
  /// an empty array, with nothing lost or repeated in between, whatever other threads
  /// write meanwhile.
  ///
  /// ```swift
  /// final class Replica: Sendable {
  ///   let rows = Mutex<[Friend]>([])
  /// }
  /// let replica = Replica()
  /// model.friends.observeChanges(with: replica, fromEmpty: true) { replica, changeset in
  ///   replica.rows.withLock { $0 = changeset.applied(to: $0) }
  /// }
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** May be called from any thread, and from inside a handler.
  /// - **Ordering:** One changeset per commit, in commit order. With `fromEmpty`, the
  ///   first changeset is taken from the array at the instant the subscription takes
  ///   effect, atomically with it.
  /// - **Reentrancy:** The handler may read, mutate, subscribe and cancel; a commit made
  ///   inside it is delivered after the current delivery pass.
  /// - **Lifetime:** Ends when `owner` deinitializes, or on ``Subscription/cancel()``.
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler; the subscription ends
  ///     when it deinitializes.
  ///   - delivery: Where the handler runs.
  ///   - fromEmpty: Whether to deliver first a changeset that inserts every current
  ///     element, at indices 0, 1, 2, …, into an empty array (false unless given).
  ///   - handler: Called with the owner and each changeset, one per commit, in commit
  ///     order, never concurrently with itself.
  /// - Returns: A handle that may cancel early; dropping it does not end the
  ///   subscription.
  /// - Complexity: With `fromEmpty`, O(*n*) under the lock to record the first
  ///   changeset.
  @discardableResult
  public func observeChanges<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    fromEmpty: Bool = false,
    _ handler: @escaping @Sendable (Owner, ArrayChangeset<Element>) -> Void
  ) -> Subscription {
    observeChangesets(.owner(owner), on: DeliveryTarget(delivery), fromEmpty: fromEmpty, owned: handler)
  }

  /// Calls a main-actor `handler` on the main queue with the changeset of every commit
  /// from now on, for as long as `owner` lives; with `fromEmpty`, first with a
  /// changeset that inserts the current array into an empty one.
  @discardableResult
  public func observeChanges<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    fromEmpty: Bool = false,
    _ handler: @escaping @MainActor @Sendable (Owner, ArrayChangeset<Element>) -> Void
  ) -> Subscription {
    observeChangesets(.owner(owner), on: .main, fromEmpty: fromEmpty, owned: onMain(handler))
  }

  /// Calls `handler` with the changeset of every commit from now on, for as long as
  /// the returned subscription is kept; with `fromEmpty`, first with a changeset that
  /// inserts the current array into an empty one.
  public func observeChanges(
    on delivery: Delivery = .synchronous,
    fromEmpty: Bool = false,
    _ handler: @escaping @Sendable (ArrayChangeset<Element>) -> Void
  ) -> Subscription {
    observeChangesets(.handle, on: DeliveryTarget(delivery), fromEmpty: fromEmpty, handler)
  }

  /// Calls a main-actor `handler` on the main queue with the changeset of every commit
  /// from now on, for as long as the returned subscription is kept; with `fromEmpty`,
  /// first with a changeset that inserts the current array into an empty one.
  public func observeChanges(
    on delivery: MainActorDelivery,
    fromEmpty: Bool = false,
    _ handler: @escaping @MainActor @Sendable (ArrayChangeset<Element>) -> Void
  ) -> Subscription {
    observeChangesets(.handle, on: .main, fromEmpty: fromEmpty, onMain(handler))
  }

  /// Calls `handler` with the array after the next commit only, if `owner` is still
  /// alive then. The current array is not delivered: use ``value`` for it.
  ///
  /// ```swift
  /// model.friends.observeOnce(with: self) { me, friends in me.announce(friends.count) }
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** May be called from any thread, and from inside a handler.
  /// - **Ordering:** The handler receives the array of the first commit after the
  ///   subscription took effect, the one its changeset produced.
  /// - **Reentrancy:** The handler may read, mutate, subscribe and cancel; a commit made
  ///   inside it is not delivered to it again.
  /// - **Lifetime:** Ends after the one delivery, when `owner` deinitializes, or on
  ///   ``Subscription/cancel()``, whichever comes first.
  ///
  /// - Note: At most once, even when commits are made concurrently or from inside the
  ///   handler.
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler; the subscription ends
  ///     when it deinitializes.
  ///   - delivery: Where the handler runs.
  ///   - handler: Called with the owner and the array after the next commit.
  /// - Returns: A handle that may cancel early; dropping it does not end the
  ///   subscription.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable (Owner, [Element]) -> Void
  ) -> Subscription {
    observeArrays(.owner(owner), on: DeliveryTarget(delivery), isOnce: true, owned: handler)
  }

  /// Calls a main-actor `handler` on the main queue with the array after the next
  /// commit only, if `owner` is still alive then.
  ///
  /// - Parameters:
  ///   - owner: Held weakly and passed strongly to the handler.
  ///   - delivery: `.main`.
  ///   - handler: Called on the main actor with the owner and the array.
  /// - Returns: A handle that may cancel early.
  @discardableResult
  public func observeOnce<Owner: AnyObject & Sendable>(
    with owner: Owner,
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable (Owner, [Element]) -> Void
  ) -> Subscription {
    observeArrays(.owner(owner), on: .main, isOnce: true, owned: onMain(handler))
  }

  /// Calls `handler` with the array after the next commit only, if the returned
  /// subscription is still kept then.
  ///
  /// - Important: Keep the returned handle: it owns the subscription, and
  ///   `_ = friends.observeOnce { … }` ends at once.
  ///
  /// - Parameters:
  ///   - delivery: Where the handler runs.
  ///   - handler: Called with the array after the next commit.
  /// - Returns: The owner of the subscription: it ends when this handle is released.
  public func observeOnce(
    on delivery: Delivery = .synchronous,
    _ handler: @escaping @Sendable ([Element]) -> Void
  ) -> Subscription {
    observeArrays(.handle, on: DeliveryTarget(delivery), isOnce: true, handler)
  }

  /// Calls a main-actor `handler` on the main queue with the array after the next
  /// commit only, if the returned subscription is still kept then.
  ///
  /// - Parameters:
  ///   - delivery: `.main`.
  ///   - handler: Called on the main actor with the array.
  /// - Returns: The owner of the subscription: it ends when this handle is released.
  public func observeOnce(
    on delivery: MainActorDelivery,
    _ handler: @escaping @MainActor @Sendable ([Element]) -> Void
  ) -> Subscription {
    observeArrays(.handle, on: .main, isOnce: true, onMain(handler))
  }

  /// The current array, then the array after every commit, keeping only the newest
  /// undelivered one.
  ///
  /// ```swift
  /// for await friends in model.friends.values { render(friends) }
  /// ```
  ///
  /// A slow consumer never falls behind: it skips to the latest array, and when
  /// writers stop, the last array it receives equals ``value``.
  ///
  /// An array property is not itself an `AsyncSequence`, as a ``Property`` is: its
  /// `Element` is the array's element, and iterating it could as well mean elements or
  /// changesets. Iterate this sequence, or ``readOnly``, which is a property and so a
  /// sequence of whole arrays (`for await friends in model.friends.readOnly`).
  public var values: AsyncValues<[Element]> {
    values(bufferingPolicy: .bufferingNewest(1))
  }

  /// The current array, then the array after every commit, with the given buffering.
  ///
  /// - Parameter bufferingPolicy: What to keep while the consumer is busy;
  ///   `.unbounded` delivers the array of every commit; a limit of 0 gives the array
  ///   current when the consumer next asks, so the sequence ends on ``value``.
  /// - Returns: A single-pass sequence that subscribed during this call, together with
  ///   reading the current array, so no later commit is missed.
  public func values(bufferingPolicy: BufferingPolicy) -> AsyncValues<[Element]> {
    let buffer = AsyncBuffer<[Element]>(policy: bufferingPolicy.forValues)
    let link = SourceLink(buffer)
    let entry = OwnedEntry<AnyObject, ArrayChangeset<Element>>(owner: buffer, target: nil) { owner, changeset in
      withExtendedLifetime(link) { _ = unsafeDowncast(owner, to: AsyncBuffer<[Element]>.self).push(changeset.array) }
    }
    hub.subscribe(buffer, with: entry, replay: Self.replay)
    return AsyncValues(buffer: buffer)
  }

  /// Subscribes a handler of the array after each commit: what every `observe` and
  /// `observeOnce` overload builds.
  ///
  /// - Parameters:
  ///   - ownership: The owner, or `.handle`.
  ///   - target: Where the handler runs; nil runs it inline on the delivering thread.
  ///   - isOnce: Whether the subscription ends just before its first invocation.
  ///   - replay: Builds the first message from the current array, for a replay.
  ///   - owned: The handler, given with an owner (unused with `.handle`).
  ///   - handler: The handler, given with `.handle` (unused with an owner).
  func observeArrays<Owner: AnyObject & Sendable>(
    _ ownership: Ownership<Owner>,
    on target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing ArrayStore<Element>) -> ArrayChangeset<Element>)? = nil,
    owned: @escaping @Sendable (Owner, [Element]) -> Void = { _, _ in },
    _ handler: @escaping @Sendable ([Element]) -> Void = { _ in }
  ) -> Subscription {
    // Only the closure that is used is made.
    switch ownership {
    case .owner:
      let ownedArray: @Sendable (Owner, ArrayChangeset<Element>) -> Void = { owner, changeset in
        owned(owner, changeset.array)
      }
      return hub.observe(
        ownership, reading: .message, on: target, isOnce: isOnce, replay: replay, merging: .newest, owned: ownedArray)
    case .returnedHandle:
      return hub.observe(
        ownership, reading: .message, on: target, isOnce: isOnce, replay: replay, merging: .newest,
        { changeset in handler(changeset.array) })
    }
  }

  /// Subscribes a handler of each commit's changeset: what every `observeChanges`
  /// overload builds.
  ///
  /// - Parameters:
  ///   - ownership: The owner, or `.handle`.
  ///   - target: Where the handler runs; nil runs it inline on the delivering thread.
  ///   - fromEmpty: Whether the first changeset inserts the current array into an empty
  ///     one.
  ///   - owned: The handler, given with an owner (unused with `.handle`).
  ///   - handler: The handler, given with `.handle` (unused with an owner).
  func observeChangesets<Owner: AnyObject & Sendable>(
    _ ownership: Ownership<Owner>,
    on target: DeliveryTarget?,
    fromEmpty: Bool,
    owned: @escaping @Sendable (Owner, ArrayChangeset<Element>) -> Void = { _, _ in },
    _ handler: @escaping @Sendable (ArrayChangeset<Element>) -> Void = { _ in }
  ) -> Subscription {
    hub.observe(
      ownership, reading: .message, on: target, replay: Self.replay(fromEmpty: fromEmpty),
      merging: Merging(merge: { waiting, newer in waiting.merged(with: newer) }), owned: owned, handler)
  }

  /// ``replayFromEmpty(_:)`` if `fromEmpty`, else nil.
  static func replay(fromEmpty: Bool) -> ((borrowing ArrayStore<Element>) -> ArrayChangeset<Element>)? {
    if fromEmpty { return replayFromEmpty }
    return nil
  }

  /// The message that gives a replica the current array: every element inserted into
  /// an empty array.
  @Sendable
  static func replayFromEmpty(_ store: borrowing ArrayStore<Element>) -> ArrayChangeset<Element> {
    let array = store.share()
    var changes: [ArrayChange<Element>] = []
    changes.reserveCapacity(array.count)
    for (index, element) in array.enumerated() { changes.append(.insert(index: index, element: element)) }
    return ArrayChangeset(changes: changes, array: array)
  }

  /// The message that gives a new subscription the current array.
  @Sendable
  static func replay(_ store: borrowing ArrayStore<Element>) -> ArrayChangeset<Element> {
    ArrayChangeset(changes: [], array: store.share())
  }
}
