// `map`, `combineLatest` and `flatMapLatest` on every property kind. Each builds a
// `DerivedProperty` node (see DerivedProperty.swift) and returns it as a
// `ReadOnlyProperty`, so every observation member works on the result and operators
// chain. `Equatable` results skip duplicates, as `Property` does.

extension PropertyProtocol {
  /// A property whose value is `transform` applied to this property's value.
  ///
  /// ```swift
  /// let title = model.name.map { "Hello, \($0)" }
  /// title.observe(with: label) { label, text in label.text = text }
  /// ```
  ///
  /// - Parameter transform: A pure function of the value. It runs on the writing or
  ///   delivering thread for every update, on the reading thread for every read of
  ///   `value`, and never under a lock.
  /// - Returns: A derived property. Its `value` is always `transform(self.value)`,
  ///   computed from the latest committed value. Its observers receive the transformed
  ///   values in this property's commit order.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** After `value = x` returns on a thread, that thread reads
  ///   `transform(x)` (or a later value) from the result, without waiting for a
  ///   delivery. Observers receive updates in this property's commit order, and when
  ///   writers stop, the last value each observer received equals the result's
  ///   `value`.
  /// - **Reentrancy:** As ``Property``: a handler of the result may write to this
  ///   property; the write is delivered after the current delivery pass.
  /// - **Lifetime:** The result keeps this property and `transform` alive; this
  ///   property does not keep the result alive. Each subscription to the result keeps
  ///   it alive. When nobody references or observes it, it is freed and its
  ///   subscription to this property ends.
  @inlinable public func map<T: Sendable>(_ transform: @escaping @Sendable (Value) -> T) -> ReadOnlyProperty<T> {
    derivedMap(transform, isDuplicate: nil)
  }

  /// A property whose value is `transform` applied to this property's value; a change
  /// that leaves the result equal notifies nobody.
  ///
  /// ```swift
  /// let isEmpty = model.name.map { $0.isEmpty }   // notifies only when it flips
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** As the other `map`; in addition, no observer receives a change
  ///   from `x` to `x`.
  /// - **Reentrancy:** As ``Property``. The `==` of `T` runs under the result's lock.
  /// - **Lifetime:** As the other `map`.
  @inlinable public func map<T: Sendable & Equatable>(_ transform: @escaping @Sendable (Value) -> T)
    -> ReadOnlyProperty<T>
  {
    derivedMap(transform, isDuplicate: { $0 == $1 })
  }

  /// The latest values of this property and `other`, as a pair.
  ///
  /// ```swift
  /// let canSend = form.name.combineLatest(form.email).map { !$0.isEmpty && $1.contains("@") }
  /// let three = a.combineLatest(b, c)   // (A, B, C): see the variadic overload
  /// ```
  ///
  /// - Returns: A derived property whose `value` pairs the two latest committed
  ///   values. A write to either side is delivered once, paired with the latest value
  ///   of the other side delivered so far.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** Every pair an observer receives is made of values that were each
  ///   committed (never torn). Updates arrive in each side's commit order; when writers
  ///   stop, the last pair each observer received equals the result's `value`.
  /// - **Reentrancy:** As ``Property``.
  /// - **Lifetime:** The result keeps both properties alive, not the reverse; each
  ///   subscription to it keeps it alive.
  @inlinable public func combineLatest<Other: PropertyProtocol>(_ other: Other) -> ReadOnlyProperty<
    (Value, Other.Value)
  > {
    derivedPair(other, isDuplicate: nil)
  }

  /// The latest values of this property and `other`, as a pair; a write that leaves
  /// the pair equal notifies nobody.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** As the other `combineLatest`; in addition, no observer receives a
  ///   change from a pair to an equal pair.
  /// - **Reentrancy:** As ``Property``. The `==` of both sides runs under the result's
  ///   lock.
  /// - **Lifetime:** As the other `combineLatest`.
  @inlinable public func combineLatest<Other: PropertyProtocol>(
    _ other: Other
  ) -> ReadOnlyProperty<(Value, Other.Value)> where Value: Equatable, Other.Value: Equatable {
    derivedPair(other, isDuplicate: { $0.0 == $1.0 && $0.1 == $1.1 })
  }

  /// The latest values of this property and of two or more others, as one flat tuple.
  ///
  /// ```swift
  /// let summary = name.combineLatest(age, city)   // ReadOnlyProperty<(String, Int, String)>
  /// ```
  ///
  /// - Returns: A derived property whose `value` holds the latest committed value of
  ///   each source, in argument order. Every state it delivers was one the sources held
  ///   together; it notifies on every change of a source (for an `Equatable` result
  ///   that skips equal states, `map` it to one).
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** As the two-source `combineLatest`: never torn, each source's
  ///   commits in order, and when writers stop the last tuple each observer received
  ///   equals the result's `value`.
  /// - **Reentrancy:** As ``Property``.
  /// - **Lifetime:** The result keeps every source alive, not the reverse; each
  ///   subscription to it keeps it alive.
  @inlinable public func combineLatest<Second: PropertyProtocol, Third: PropertyProtocol, each Rest: PropertyProtocol>(
    _ second: Second, _ third: Third, _ rest: repeat each Rest
  ) -> ReadOnlyProperty<(Value, Second.Value, Third.Value, repeat (each Rest).Value)> {
    let sources = (readOnly, second.readOnly, third.readOnly)
    let more = (repeat (each rest).readOnly)
    var upstream = [sources.0.computedNode, sources.1.computedNode, sources.2.computedNode].compactMap { $0 }
    for source in repeat each more { if let node = source.computedNode { upstream.append(node) } }
    let node = DerivedProperty(upstream: upstream, isDuplicate: nil) { snapshot in
      (
        sources.0.evaluate(in: snapshot), sources.1.evaluate(in: snapshot), sources.2.evaluate(in: snapshot),
        repeat (each more).evaluate(in: snapshot)
      )
    }
    return ReadOnlyProperty(derived: node)
  }

  /// Follows the property that `transform` picks from this property's value: the
  /// value of the current target, switching targets when this property changes.
  ///
  /// ```swift
  /// // The name of my current friend, following both the friend and their name.
  /// let friendName = me.friend.flatMapLatest { friend in friend.name }
  /// ```
  ///
  /// The transform may return a ``Property``, a ``ReadOnlyProperty`` (including a
  /// derived one) or a constant (`ReadOnlyProperty(constant:)`).
  ///
  /// - Parameter transform: Picks the target for a value of this property. It runs for
  ///   every update of this property and every read of `value`, never under a lock.
  ///   Returning the same target again keeps following it without resubscribing.
  /// - Returns: A derived property that attaches to the current target at once.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** `value` is always the current target's latest committed value.
  ///   On a switch, the result detaches from the old target (its `observerCount`
  ///   drops back) before it delivers the new target's value, and nothing from the old
  ///   target is delivered after that. When writers stop, the last value each observer
  ///   received equals the result's `value`.
  /// - **Reentrancy:** As ``Property``.
  /// - **Lifetime:** The result keeps this property, `transform` and its current
  ///   target alive; neither keeps the result alive. Each subscription to the result
  ///   keeps it alive.
  @inlinable public func flatMapLatest<Target: PropertyProtocol>(
    _ transform: @escaping @Sendable (Value) -> Target
  ) -> ReadOnlyProperty<Target.Value> {
    derivedSwitch(select: { transform($0).readOnly }, wrap: { $0 }, missing: nil, isDuplicate: nil)
  }

  /// Follows the property that `transform` picks, skipping values equal to the last
  /// one delivered (also across a switch to a target with an equal value).
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** As the other `flatMapLatest`; in addition, no observer receives a
  ///   change from `x` to `x`.
  /// - **Reentrancy:** As ``Property``.
  /// - **Lifetime:** As the other `flatMapLatest`.
  @inlinable public func flatMapLatest<Target: PropertyProtocol>(
    _ transform: @escaping @Sendable (Value) -> Target
  ) -> ReadOnlyProperty<Target.Value> where Target.Value: Equatable {
    derivedSwitch(select: { transform($0).readOnly }, wrap: { $0 }, missing: nil, isDuplicate: { $0 == $1 })
  }

  /// Follows the property that `transform` picks, or nil while it picks none: a chain
  /// through an optional link.
  ///
  /// ```swift
  /// let friendName = me.friend.flatMapLatest { $0?.name }   // ReadOnlyProperty<String?>
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** As the other `flatMapLatest`; a missing target reads and delivers
  ///   nil.
  /// - **Reentrancy:** As ``Property``.
  /// - **Lifetime:** As the other `flatMapLatest`.
  @_disfavoredOverload
  @inlinable public func flatMapLatest<Target: PropertyProtocol>(
    _ transform: @escaping @Sendable (Value) -> Target?
  ) -> ReadOnlyProperty<Target.Value?> {
    derivedSwitch(select: { transform($0)?.readOnly }, wrap: { $0 }, missing: .some(nil), isDuplicate: nil)
  }

  /// Follows the property that `transform` picks, or nil while it picks none,
  /// skipping values equal to the last one delivered.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** As the other `flatMapLatest`; in addition, no observer receives a
  ///   change from `x` to `x` (nil to nil included).
  /// - **Reentrancy:** As ``Property``.
  /// - **Lifetime:** As the other `flatMapLatest`.
  @_disfavoredOverload
  @inlinable public func flatMapLatest<Target: PropertyProtocol>(
    _ transform: @escaping @Sendable (Value) -> Target?
  ) -> ReadOnlyProperty<Target.Value?> where Target.Value: Equatable {
    derivedSwitch(select: { transform($0)?.readOnly }, wrap: { $0 }, missing: .some(nil), isDuplicate: { $0 == $1 })
  }
}

extension Collection where Element: PropertyProtocol {
  /// The latest values of every property in the collection, in order.
  ///
  /// ```swift
  /// let scores = [alice.score, bob.score, carol.score].combineLatest()   // [Int]
  /// let total = scores.map { $0.reduce(0, +) }
  /// ```
  ///
  /// An empty collection gives a constant empty array.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** Every array an observer receives is made of committed values. A
  ///   write to one property is delivered once, with the others at their latest
  ///   values delivered so far; when writers stop, the last array each observer
  ///   received equals the result's `value`.
  /// - **Reentrancy:** As ``Property``.
  /// - **Lifetime:** The result keeps every property alive, not the reverse; each
  ///   subscription to it keeps it alive.
  @inlinable public func combineLatest() -> ReadOnlyProperty<[Element.Value]> {
    derivedArray(isDuplicate: nil)
  }

  /// The latest values of every property in the collection, in order; a write that
  /// leaves the array equal notifies nobody.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** As the other `combineLatest()`; in addition, no observer receives
  ///   a change from an array to an equal array.
  /// - **Reentrancy:** As ``Property``. The `==` of the values runs under the result's
  ///   lock.
  /// - **Lifetime:** As the other `combineLatest()`.
  @inlinable public func combineLatest() -> ReadOnlyProperty<[Element.Value]> where Element.Value: Equatable {
    derivedArray(isDuplicate: { $0 == $1 })
  }
}
