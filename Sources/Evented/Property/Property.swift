/// A value that notifies its subscribers after every change.
///
/// ```swift
/// let volume = Property(5)
/// volume.observe(with: self, on: .main) { owner, level in owner.show(level) }
/// volume.value = 6
/// volume.modify { $0 += 1 }
/// ```
///
/// `Equatable` values skip writes equal to the current value unless created with
/// `skipsDuplicates: false`; other values never skip. Inside a class, use it as a
/// property wrapper: `@Property var name = ""` reads and writes the value, and
/// `$name` is a ``ReadOnlyProperty`` that outside code can observe but not write.
///
/// A property is `Observable`: a SwiftUI view, `withObservationTracking` or
/// `Observations` that reads ``value`` is notified once after each commit that changes
/// it, whichever thread wrote it; an equal write notifies nobody. A property no
/// tracking scope has read since its last change pays one atomic load per write for
/// this. The guide `ObservationAndSwiftUI.md` shows it with SwiftUI.
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member may be called from any thread at any
///   time. Handlers never run while an internal lock is held.
/// - **Ordering:** Each subscription receives values one at a time, in the order the
///   writes were committed. When writers stop, the last value delivered to every live
///   subscription equals ``value``. After `value = x` returns on a thread, that thread
///   reads `x` or a later value. With duplicates skipped, a write equal to the current
///   value notifies nobody, and no subscription receives a change from `x` to `x`.
/// - **Reentrancy:** A handler may read ``value`` (the latest committed value), write,
///   modify, subscribe and cancel, on this property or any other. A write from inside a
///   handler is committed at once and delivered after the current delivery pass.
///   The closure given to ``modify(_:)``, a mutation in place through ``value`` or
///   the wrapper (`value += 1`), and the `==` that detects duplicates run under the
///   property's lock: they must not use this property (doing so stops the program
///   with a message) and should not use other sources.
/// - **Lifetime:** A subscription ends when its owner deinitializes, or on
///   ``Subscription/cancel()``. Old values are released outside the lock.
/// - **Observation:** A tracking scope's `onChange` runs on the thread that committed,
///   after the commit, with no lock held, and reads the new value (an `@Observable`
///   class calls it before the change, where it reads the old one). A write inside a
///   `transaction` notifies when the transaction has ended, and not at all if it throws.
@propertyWrapper
public final class Property<Value: Sendable>: PropertyProtocol {
  @usableFromInline let hub: Hub<Update<Value>, Value>
  @usableFromInline let isDuplicate: (@Sendable (Value, Value) -> Bool)?
  /// Observation's view of this property (see ObservationSite.swift), kept in the hub's
  /// storage, after its lock (PropertyStorage.swift). A lazy property's hooks are in the
  /// hub's core.
  @inlinable var observation: UnsafeMutablePointer<ObservationSlot> {
    unsafeDowncast(hub.storage, to: PropertyHubStorage<Update<Value>, Value>.self).observation
  }

  /// This property as a root of derived values (Root.swift): made by an evaluation that
  /// reads the property first, not kept here, so that an idle property stays small
  /// (a snapshot finds a root pinned already by its identity, and a memo keeps the
  /// roots it read).
  @inlinable var root: HubRoot<Update<Value>, Value> {
    HubRoot(property: hub, lazy: hub.lazyHooks)
  }

  @usableFromInline
  init(
    value: Value, isDuplicate: (@Sendable (Value, Value) -> Bool)?, backlogLimit: Int = defaultBacklogLimit,
    lazy: LazyHooks? = nil
  ) {
    hub = Hub.makeProperty(value, backlogLimit: backlogLimit, lazy: lazy)
    self.isDuplicate = isDuplicate
    if lazy != nil {
      // A scope that reads a lazy property follows it with a subscription, which keeps
      // it started (ObservationSite.swift). The site is this property's, and follows it
      // only from a read of it.
      observation.pointee.makeSite { [unowned self] site in
        hub.observe(
          .handle, reading: .message, on: nil, anchor: hub.lazyHooks?.token(), outlivesRemoveAll: true,
          { (_: Update<Value>) in site.changed() })
      }
    }
  }

  /// Creates a property that notifies on every write.
  ///
  /// - Parameters:
  ///   - value: The initial value.
  ///   - backlogLimit: How many committed writes may wait for the thread that is
  ///     delivering for this property (1,024 unless given). At the limit, a write or a
  ///     replaying subscribe from a thread that is not running a handler or delivering
  ///     waits until there is room; see "Overload" in the guarantees guide. Observers
  ///     on a queue are not counted: each holds one waiting value, never more, so no
  ///     write waits for them.
  @inlinable
  public convenience init(_ value: Value, backlogLimit: Int = 1_024) {
    self.init(value: value, isDuplicate: nil, backlogLimit: backlogLimit)
  }

  /// Creates a property that starts something when its first observer arrives and
  /// stops it when its last observer is gone; notifies on every write.
  ///
  /// ```swift
  /// let location = Property<Coordinate?>(
  ///   nil, onFirstObserver: { gps.start() }, onLastObserverGone: { gps.stop() })
  /// ```
  ///
  /// Every subscription counts, as for
  /// `EventSource(onFirstObserver:onLastObserverGone:)`: `observe`,
  /// `observeChanges`, `observeOnce`, `values`, and the link of a derived value (a
  /// `map` of this property counts once, while it lives). Reading ``value`` does not
  /// count, nor does a SwiftUI view or `withObservationTracking` reading it.
  ///
  /// - Parameters:
  ///   - value: The initial value.
  ///   - backlogLimit: How many committed writes may wait for the thread that is
  ///     delivering for this property (1,024 unless given), as for a property that is
  ///     not lazy.
  ///   - onFirstObserver: Runs when the number of subscriptions rises from zero,
  ///     usually before the new subscription is added, so that a value it writes is
  ///     the one that subscription receives first. If the stop hook is still running
  ///     on another thread, it runs after that hook instead, on that thread, and the
  ///     subscription may first receive the value current before it.
  ///   - onLastObserverGone: Runs when the number of subscriptions falls to zero, on
  ///     the thread that released the last one.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** The hooks run outside every lock and may use this property
  ///   (write, subscribe, cancel) and any other.
  /// - **Ordering:** The hooks never run concurrently with each other for one
  ///   property, and run in the order the count crossed zero. An observer that arrives
  ///   while the stop hook runs gets a start hook after it.
  /// - **Reentrancy:** A crossing caused by a hook runs its hook after the current one
  ///   returns, on the same thread.
  /// - **Lifetime:** The property keeps the hooks until it is deinitialized.
  @inlinable
  public convenience init(
    _ value: Value, backlogLimit: Int = 1_024, onFirstObserver: @escaping @Sendable () -> Void,
    onLastObserverGone: @escaping @Sendable () -> Void
  ) {
    self.init(
      value: value, isDuplicate: nil, backlogLimit: backlogLimit,
      lazy: LazyHooks(onFirstObserver: onFirstObserver, onLastObserverGone: onLastObserverGone))
  }

  /// Creates a lazy property whose hooks receive it, so that they can write it without
  /// holding it; notifies on every write.
  ///
  /// ```swift
  /// final class Tracker: Sendable {
  ///   let location: Property<Coordinate?>
  ///   init(gps: GPS) {
  ///     location = Property(
  ///       nil,
  ///       onFirstObserver: { property in gps.start { [weak property] in property?.value = $0 } },
  ///       onLastObserverGone: { _ in gps.stop() })
  ///   }
  /// }
  /// ```
  ///
  /// The same as the initializer whose hooks take no argument, except that each hook
  /// is given this property. The property holds its hooks, not
  /// the reverse: it passes itself when it calls one, so hooks that use their argument
  /// and capture nothing else keep nothing alive.
  ///
  /// - Parameters:
  ///   - value: The initial value.
  ///   - backlogLimit: As for a property that is not lazy.
  ///   - onFirstObserver: Runs with this property when the number of subscriptions
  ///     rises from zero, as for the hooks that take no argument.
  ///   - onLastObserverGone: Runs with this property when the number of subscriptions
  ///     falls to zero, as for the hooks that take no argument.
  ///
  /// - Important: A hook runs only while the property exists. When the property is
  ///   deinitialized while observed, the stop hook does not run, as there is no
  ///   property left to give it: stop what the start hook started from the deinit of
  ///   the object that owns the property, or let it hold the property weakly and stop
  ///   when the property is gone.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** The hooks run outside every lock and may use this property
  ///   (write, subscribe, cancel) and any other.
  /// - **Ordering:** The hooks never run concurrently with each other for one
  ///   property, and run in the order the count crossed zero.
  /// - **Reentrancy:** A crossing caused by a hook runs its hook after the current one
  ///   returns, on the same thread.
  /// - **Lifetime:** The property keeps the hooks until it is deinitialized; the hooks
  ///   do not keep the property. A hook holds it strongly only while it runs (and
  ///   longer if it stores it).
  public convenience init(
    _ value: Value, backlogLimit: Int = 1_024, onFirstObserver: @escaping @Sendable (Property<Value>) -> Void,
    onLastObserverGone: @escaping @Sendable (Property<Value>) -> Void
  ) {
    let hooks = LazyHooks(
      receiving: Property.self, onFirstObserver: onFirstObserver, onLastObserverGone: onLastObserverGone)
    self.init(value: value, isDuplicate: nil, backlogLimit: backlogLimit, lazy: hooks)
    hooks.attach(self)
  }

  /// Creates a property for use as `@Property var name = value`; notifies on every write.
  @inlinable
  public convenience init(wrappedValue: Value, backlogLimit: Int = 1_024) {
    self.init(value: wrappedValue, isDuplicate: nil, backlogLimit: backlogLimit)
  }

  /// The current value. Setting it commits and notifies the subscriptions.
  ///
  /// A mutation in place, such as `value += 1` or `value.append(x)`, is atomic and
  /// notifies once with the old and the new value, as ``modify(_:)`` does: the
  /// property's lock is held for the whole access, and a result equal to the old value
  /// (when duplicates are skipped) notifies nobody.
  ///
  /// - Important: The access must not use this property: `mutate(&p.value) { _ in
  ///   p.value }` would deadlock, so it stops the program with a message instead.
  @inlinable
  public var value: Value {
    get {
      observation.pointee.access()
      return hub.readVisible()
    }
    @inline(__always) set { write(newValue) }
    _modify {
      // On a copy, stored back. If the access is aborted (it threw), the token's end
      // unlocks and nothing changes. `next` is declared first so that, on an abort, it
      // ends after the token: what the access left in it is released after unlocking.
      var next: Value
      let token = hub.lockForCommit()
      next = token.state.pointee.stored
      yield &next
      if hub.change(token, to: next, isDuplicate: isDuplicate) { observation.pointee.committed() }
      withExtendedLifetime(next) {}
    }
  }

  /// The current value, as a property wrapper: `@Property var name` reads and writes
  /// it. A mutation in place (`model.names.append(x)`, `model.count += 1`) is atomic
  /// and notifies once, as with ``value``.
  @inlinable
  public var wrappedValue: Value {
    get { value }
    set { write(newValue) }
    _modify { yield &value }
  }

  /// A view that can observe but not write: `$name` of `@Property var name`.
  public var projectedValue: ReadOnlyProperty<Value> { readOnly }

  /// A view that can observe but not write.
  @inlinable public var readOnly: ReadOnlyProperty<Value> { ReadOnlyProperty(viewing: self) }

  /// Changes the value in place, atomically, and notifies once with the old and new
  /// value.
  ///
  /// ```swift
  /// counter.modify { $0 += 1 }
  /// let removed = queue.modify { $0.popLast() }
  /// ```
  ///
  /// - Parameter body: Mutates a copy of the value; runs under the property's lock, so
  ///   keep it short. If it throws, the value stays as it was.
  /// - Returns: What `body` returns.
  /// - Important: `body` must not read, write, observe or modify this property: that
  ///   would deadlock, so it stops the program with a message instead. Using another
  ///   source from `body` while another thread does the opposite would deadlock too;
  ///   that also stops the program with a message naming both. Cancelling a
  ///   subscription (or dropping the last handle of an owner-less one) inside `body`
  ///   waits for its running handler while the lock is held; if that handler waits
  ///   for this property, the program stops with a message instead of hanging.
  @inlinable @discardableResult
  public func modify<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    let token = hub.lockForCommit()
    var next = token.state.pointee.stored
    let outcome: Swift.Result<Result, Failure>
    do throws(Failure) {
      outcome = .success(try body(&next))
    } catch {
      outcome = .failure(error)
    }
    if case .success = outcome {
      if hub.change(token, to: next, isDuplicate: isDuplicate) { observation.pointee.committed() }
    } else {
      token.unlock()
    }
    // Whatever `next` holds is released only now, after unlocking.
    withExtendedLifetime(next) {}
    return try outcome.get()
  }

  /// Always inlined: the caller's own specialized copy skips an equal write in a
  /// few instructions.
  @inlinable @inline(__always)
  func write(_ newValue: Value) {
    if hub.change(hub.lockForCommit(), to: newValue, isDuplicate: isDuplicate) { observation.pointee.committed() }
  }
}

extension Property where Value: Equatable {
  @inlinable static var equals: @Sendable (Value, Value) -> Bool { { $0 == $1 } }

  /// Creates a property that skips writes equal to the current value.
  ///
  /// - Parameters:
  ///   - value: The initial value.
  ///   - backlogLimit: As for ``init(_:backlogLimit:)``.
  @inlinable
  public convenience init(_ value: Value, backlogLimit: Int = 1_024) {
    self.init(value: value, isDuplicate: Self.equals, backlogLimit: backlogLimit)
  }

  /// Creates a property; with `skipsDuplicates`, writes equal to the current value
  /// notify nobody.
  @inlinable
  public convenience init(_ value: Value, skipsDuplicates: Bool, backlogLimit: Int = 1_024) {
    self.init(value: value, isDuplicate: skipsDuplicates ? Self.equals : nil, backlogLimit: backlogLimit)
  }

  /// Creates a lazy property that skips writes equal to the current value (unless
  /// `skipsDuplicates` is false); see the lazy initializer without `skipsDuplicates`
  /// whose hooks take no argument.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** The hooks run outside every lock.
  /// - **Ordering:** The hooks never run concurrently with each other, and run in the
  ///   order the count of subscriptions crossed zero.
  /// - **Reentrancy:** A hook may use this property and any other.
  /// - **Lifetime:** The property keeps the hooks until it is deinitialized.
  @inlinable
  public convenience init(
    _ value: Value, skipsDuplicates: Bool = true, backlogLimit: Int = 1_024,
    onFirstObserver: @escaping @Sendable () -> Void, onLastObserverGone: @escaping @Sendable () -> Void
  ) {
    self.init(
      value: value, isDuplicate: skipsDuplicates ? Self.equals : nil, backlogLimit: backlogLimit,
      lazy: LazyHooks(onFirstObserver: onFirstObserver, onLastObserverGone: onLastObserverGone))
  }

  /// Creates a lazy property whose hooks receive it, and that skips writes equal to the
  /// current value (unless `skipsDuplicates` is false); see the lazy initializer
  /// without `skipsDuplicates` whose hooks receive the property.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** The hooks run outside every lock.
  /// - **Ordering:** The hooks never run concurrently with each other, and run in the
  ///   order the count of subscriptions crossed zero.
  /// - **Reentrancy:** A hook may use this property and any other.
  /// - **Lifetime:** The property keeps the hooks until it is deinitialized; the hooks
  ///   do not keep the property.
  public convenience init(
    _ value: Value, skipsDuplicates: Bool = true, backlogLimit: Int = 1_024,
    onFirstObserver: @escaping @Sendable (Property<Value>) -> Void,
    onLastObserverGone: @escaping @Sendable (Property<Value>) -> Void
  ) {
    let hooks = LazyHooks(
      receiving: Property.self, onFirstObserver: onFirstObserver, onLastObserverGone: onLastObserverGone)
    self.init(value: value, isDuplicate: skipsDuplicates ? Self.equals : nil, backlogLimit: backlogLimit, lazy: hooks)
    hooks.attach(self)
  }

  /// Creates a property for `@Property var name = value` that skips equal writes.
  @inlinable
  public convenience init(wrappedValue: Value, backlogLimit: Int = 1_024) {
    self.init(value: wrappedValue, isDuplicate: Self.equals, backlogLimit: backlogLimit)
  }

  /// Creates a property for `@Property(skipsDuplicates: false) var name = value`.
  @inlinable
  public convenience init(wrappedValue: Value, skipsDuplicates: Bool, backlogLimit: Int = 1_024) {
    self.init(
      value: wrappedValue, isDuplicate: skipsDuplicates ? Self.equals : nil, backlogLimit: backlogLimit)
  }
}
