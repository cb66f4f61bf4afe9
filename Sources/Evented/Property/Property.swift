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
@propertyWrapper
public final class Property<Value: Sendable>: PropertyProtocol {
  @usableFromInline let hub: Hub<Update<Value>, Value>
  @usableFromInline let isDuplicate: (@Sendable (Value, Value) -> Bool)?

  @usableFromInline
  init(value: Value, isDuplicate: (@Sendable (Value, Value) -> Bool)?, backlogLimit: Int = defaultBacklogLimit) {
    hub = Hub.make(value, backlogLimit: backlogLimit)
    self.isDuplicate = isDuplicate
  }

  /// Creates a property that notifies on every write.
  ///
  /// - Parameters:
  ///   - value: The initial value.
  ///   - backlogLimit: How many committed writes may wait for the thread that is
  ///     delivering for this property (1,024 unless given). At the limit, a write or a
  ///     replaying subscribe from a thread that is not running a handler or delivering
  ///     waits until there is room; see "Overload" in the guarantees guide.
  @inlinable
  public convenience init(_ value: Value, backlogLimit: Int = 1_024) {
    self.init(value: value, isDuplicate: nil, backlogLimit: backlogLimit)
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
    get { hub.read { copy $0 } }
    set { write(newValue) }
    _modify {
      // Two accessors, so that neither keeps room for the other's temporaries.
      if Hub<Update<Value>, Value>.hasLargeMessages {
        yield &valueInParcel
      } else {
        yield &valueInPlace
      }
    }
  }

  /// The in-place mutation of ``value`` for a small value: on a copy, stored back.
  @inlinable
  var valueInPlace: Value {
    get { value }
    _modify {
      let locked = hub.beginInPlace()
      var next = locked.pointee.stored
      var isYielding = true
      defer {
        if isYielding {
          // The access was aborted (it threw): nothing changes.
          hub.abandonInPlace()
          withExtendedLifetime(next) {}
        }
      }
      yield &next
      isYielding = false
      var old: Value? = nil
      if let isDuplicate, isDuplicate(locked.pointee.stored, next) {
        hub.commitInPlace(locked, nil)
      } else {
        old = locked.pointee.stored
        locked.pointee.stored = next
        hub.commitInPlace(locked, Update(old: old!, new: next, isInitial: false))
      }
      withExtendedLifetime(next) {}
      withExtendedLifetime(old) {}
    }
  }

  /// The in-place mutation of ``value`` for a large value: on a copy, stored back,
  /// and delivered in a parcel.
  @inlinable
  var valueInParcel: Value {
    get { value }
    _modify {
      let locked = hub.beginInPlace()
      var next = locked.pointee.stored
      var isYielding = true
      defer {
        if isYielding {
          // The access was aborted (it threw): nothing changes.
          hub.abandonInPlace()
          withExtendedLifetime(next) {}
        }
      }
      yield &next
      isYielding = false
      let (parcel, commits) = storeInParcel(&locked.pointee.stored, next)
      if commits {
        hub.proceed(locked, locked.pointee.commit(parcel))
      } else {
        hub.abandonInPlace()
      }
      withExtendedLifetime(next) {}
      withExtendedLifetime(parcel) {}
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
  public var readOnly: ReadOnlyProperty<Value> { ReadOnlyProperty(hub: hub) }

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
  ///   would deadlock, so it stops the program with a message instead. Touching other
  ///   sources from `body` can deadlock against a thread that does the opposite, and
  ///   cancelling a subscription (or dropping the last handle of an owner-less one)
  ///   inside `body` waits for its running handler while the lock is held.
  @inlinable @discardableResult
  public func modify<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    // Two functions, so that neither keeps room for the other's temporaries.
    if Hub<Update<Value>, Value>.hasLargeMessages { return try modifyInParcel(body) }
    return try modifyInPlace(body)
  }

  /// `modify` of a small value: on a copy, stored back.
  @inlinable @inline(__always)
  func modifyInPlace<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    let (outcome, leftover) = hub.commit { stored -> ((Swift.Result<Result, Failure>, Value?), Update<Value>?) in
      var next = stored
      let result: Result
      do throws(Failure) {
        result = try body(&next)
      } catch {
        return ((.failure(error), next), nil)
      }
      if let isDuplicate, isDuplicate(stored, next) { return ((.success(result), next), nil) }
      let old = stored
      stored = next
      return ((.success(result), nil), Update(old: old, new: next, isInitial: false))
    }
    _ = leftover
    return try outcome.get()
  }

  @inlinable
  func write(_ newValue: Value) {
    // Two functions, so that neither keeps room for the other's temporaries.
    if Hub<Update<Value>, Value>.hasLargeMessages {
      writeInParcel(newValue)
    } else {
      writeInPlace(newValue)
    }
  }

  /// The write of a small value.
  @inlinable @inline(__always)
  func writeInPlace(_ newValue: Value) {
    hub.commit { stored -> ((), Update<Value>?) in
      if let isDuplicate, isDuplicate(stored, newValue) { return ((), nil) }
      let old = stored
      stored = newValue
      return ((), Update(old: old, new: newValue, isInitial: false))
    }
  }
}

// Large values (see HubState): the change is put in a parcel as soon as it is known,
// by a function that returns before the parcel is delivered, so that a write, `modify`
// or a mutation in place keeps no more than a copy or two of the value on the stack.
extension Property {
  /// The write of a large value.
  @usableFromInline
  func writeInParcel(_ newValue: Value) {
    hub.commitParcel { stored -> ((), Parcel<Update<Value>>?, commits: Bool) in
      if let isDuplicate, isDuplicate(stored, newValue) { return ((), nil, false) }
      let parcel = Self.parcel(changingFrom: stored, to: newValue)
      stored = newValue
      return ((), parcel, true)
    }
  }

  /// `modify` of a large value.
  @inlinable
  func modifyInParcel<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    let (outcome, _) = hub.commitParcel {
      stored -> ((Swift.Result<Result, Failure>, Parcel<Update<Value>>?), Parcel<Update<Value>>?, commits: Bool) in
      var next = stored
      let result: Result
      do throws(Failure) {
        result = try body(&next)
      } catch {
        // What `body` left in `next` is released after unlocking, in a parcel.
        return ((.failure(error), Self.parcel(changingFrom: next, to: next)), nil, false)
      }
      let (parcel, commits) = storeInParcel(&stored, next)
      return ((.success(result), parcel), parcel, commits)
    }
    return try outcome.get()
  }

  /// Stores `next` unless it is a duplicate of `stored`.
  ///
  /// - Returns: the change in a parcel (a duplicate, not to commit, is in it too, to be
  ///   released after unlocking), and whether to commit it.
  @usableFromInline @inline(never)
  func storeInParcel(_ stored: inout Value, _ next: borrowing Value) -> (Parcel<Update<Value>>, Bool) {
    let parcel = Self.parcel(changingFrom: stored, to: next)
    if let isDuplicate, isDuplicate(stored, next) { return (parcel, false) }
    stored = copy next
    return (parcel, true)
  }

  /// A parcel for the change from `old` to `new`. Not inlined, so that the temporaries
  /// of making it are off the stack afterwards.
  @usableFromInline @inline(never)
  static func parcel(changingFrom old: borrowing Value, to new: borrowing Value) -> Parcel<Update<Value>> {
    Parcel(Update(old: copy old, new: copy new, isInitial: false))
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
