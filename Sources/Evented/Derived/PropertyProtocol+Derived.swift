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
  /// let three = a.combineLatest(b).combineLatest(c)   // ((A, B), C)
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

  @inlinable func derivedArray(
    isDuplicate: (@Sendable ([Element.Value], [Element.Value]) -> Bool)?
  ) -> ReadOnlyProperty<[Element.Value]> {
    let sources = map { $0.readOnly }
    if sources.isEmpty { return ReadOnlyProperty(constant: []) }
    let node = DerivedProperty(
      roots: uniqueRoots(sources.map(\.roots)), upstream: sources.compactMap(\.computedNode), isDuplicate: isDuplicate
    ) { snapshot in
      sources.map { $0.evaluate(in: snapshot) }
    }
    return ReadOnlyProperty(derived: node)
  }
}

extension PropertyProtocol {
  @inlinable func derivedMap<T: Sendable>(
    _ transform: @escaping @Sendable (Value) -> T, isDuplicate: (@Sendable (T, T) -> Bool)?
  ) -> ReadOnlyProperty<T> {
    let source = readOnly
    if let viewed = source.viewed {
      // A map of a property: each commit's value is computed from the commit itself.
      let node = DerivedProperty(
        roots: source.roots, isDuplicate: isDuplicate
      ) { snapshot in
        transform(snapshot.read(viewed.hub))
      }
      node.directLink = { node in
        HubRoot(property: viewed.hub, lazy: viewed.hub.lazyHooks).notifyDirectly(node, transform)
      }
      return ReadOnlyProperty(derived: node)
    }
    let node = DerivedProperty(
      roots: source.roots, upstream: [source.computedNode].compactMap { $0 }, isDuplicate: isDuplicate
    ) { snapshot in
      transform(source.evaluate(in: snapshot))
    }
    return ReadOnlyProperty(derived: node)
  }

  @inlinable func derivedPair<Other: PropertyProtocol>(
    _ other: Other, isDuplicate: (@Sendable ((Value, Other.Value), (Value, Other.Value)) -> Bool)?
  ) -> ReadOnlyProperty<(Value, Other.Value)> {
    let first = readOnly
    let second = other.readOnly
    let node = DerivedProperty(
      roots: uniqueRoots([first.roots, second.roots]),
      upstream: [first.computedNode, second.computedNode].compactMap { $0 }, isDuplicate: isDuplicate
    ) {
      snapshot in (first.evaluate(in: snapshot), second.evaluate(in: snapshot))
    }
    return ReadOnlyProperty(derived: node)
  }

  /// Builds a `flatMapLatest`: `select` picks the target for an outer value (nil for
  /// none, which reads as `missing`), `wrap` turns a target's value into the result's.
  @inlinable func derivedSwitch<Inner: Sendable, T: Sendable>(
    select: @escaping @Sendable (Value) -> ReadOnlyProperty<Inner>?,
    wrap: @escaping @Sendable (Inner) -> T,
    missing: T?,
    isDuplicate: (@Sendable (T, T) -> Bool)?
  ) -> ReadOnlyProperty<T> {
    let outer = readOnly
    let roots = outer.roots
    // No optional or pair of the value is kept on the way (a large value's copies on the
    // stack): a missing target reads as `missing` where it is found.
    let compute: @Sendable () -> T = {
      if outer.derived != nil, outer.computedNode == nil {
        // A following outer source is read by its own value (its hub may lag behind it).
        guard let target = select(outer.value) else { return missingValue(missing) }
        return wrap(target.value)
      }
      // The outer source and the target in one consistent snapshot, so that the target
      // is the one the outer value picks at that instant (they may share roots). A
      // following target is read by its own value.
      return Snapshot.consistent(of: roots) { snapshot -> T in
        guard let target = select(outer.evaluate(in: snapshot)) else { return missingValue(missing) }
        if target.derived != nil, target.computedNode == nil { return wrap(target.value) }
        return wrap(target.evaluate(in: snapshot))
      }.0
    }
    let node = DerivedProperty<T>.following(outer, select: select, wrap: wrap, missing: missing, compute: compute) {
      DerivedProperty(initial: $0, backlogLimit: outer.hub.backlogLimit, isDuplicate: isDuplicate, compute: compute)
    }
    // A property's link receives every commit of its root, so a target's update of a
    // commit it shares waits for that commit's choice (DerivedProperty+Follow.swift).
    // A computed outer source skips the commits that leave it equal: such an update
    // reads the outer source again instead (`recheck`), and is published if the outer
    // value there still picks the target, or equals the one that chose it. A following
    // outer source reads its own hub, which no target shares.
    let outerRoots = outer.derived == nil || outer.computedNode != nil ? roots.map(\.identity) : []
    let outerEquals = outer.derived?.isDuplicate
    let recheck: DerivedProperty<T>.Recheck<Inner>? =
      outer.computedNode == nil
      ? nil
      : { @Sendable target, targetRoots, chosenAt, chosenValue in
        while true {
          let found = DerivedProperty<T>.pinned(
            target, roots: targetRoots, chosenAt: chosenAt, pickedBy: outer, roots: roots
          ) {
            if let outerEquals, let chosen = chosenValue as? Value, outerEquals(chosen, $0) { return true }
            return select($0)?.hub.storage === target.hub.storage
          }
          if let found { return found }
          // The outer value read there picks another target. Its link is delivered each
          // state it commits, but a value of several roots commits its roots' latest
          // state, and not at all if they moved back meanwhile: make it commit now. If
          // its committed value then differs from the one that chose the target, a
          // delivery is on its way to the link; if not, the roots moved back, and the
          // next read sees it. (A value that is not `Equatable` commits every state.)
          let node = outer.derived.unsafelyUnwrapped
          node.refreshing.unsafelyUnwrapped(node)
          guard let outerEquals, let chosen = chosenValue as? Value else { return nil }
          let (committed, _) = outer.committedState(roots: roots, as: DerivedProperty<T>.followReader)
          if !outerEquals(chosen, committed) { return nil }
        }
      }
    let keepsValue = recheck != nil && outerEquals != nil
    node.catchingUp = { node in node.catchUp(outer: outer, roots: roots, select: select, wrap: wrap) }
    let keep = { (entry: SubscriptionCore) in node.links.withLock { $0.sources.append(entry) } }
    node.link(to: outer, roots: roots, keep: keep) { node, value, versions in
      node.follow(
        select(value), chosenAt: versions, chosenValue: keepsValue ? value : nil, outerRoots: outerRoots,
        missing: missing, recheck: recheck, wrap: wrap)
    }
    return ReadOnlyProperty(derived: node)
  }
}

extension DerivedProperty {
  /// A following node made by `make` from its initial value: the value `compute` reads,
  /// or made inside a transaction, the state other threads see, as a computed node
  /// does (DerivedProperty.init): its observers never hold part of the transaction.
  /// Out of line, so that the caller's frame keeps no room for the value.
  @inlinable @inline(never) static func following<Outer: Sendable, Inner: Sendable>(
    _ outer: ReadOnlyProperty<Outer>, select: (Outer) -> ReadOnlyProperty<Inner>?, wrap: (Inner) -> Value,
    missing: Value?, compute: () -> Value, make: (Value) -> DerivedProperty
  ) -> DerivedProperty {
    make(isInTransaction ? outsiderValue(of: outer, select: select, wrap: wrap, missing: missing) : compute())
  }
}

/// A `flatMapLatest`'s value while it has no target: `missing`, which only a
/// `flatMapLatest` through an optional link has.
@inlinable func missingValue<T>(_ missing: T?) -> T {
  guard let missing else { fatalError("Evented: flatMapLatest picked no target") }
  return missing
}

/// A `flatMapLatest`'s value as a thread that runs no transaction sees it: the outer
/// value, then the target's, each from a consistent snapshot of its roots.
@usableFromInline func outsiderValue<Outer: Sendable, Inner: Sendable, T: Sendable>(
  of outer: ReadOnlyProperty<Outer>, select: (Outer) -> ReadOnlyProperty<Inner>?, wrap: (Inner) -> T, missing: T?
) -> T {
  let (outerValue, _) = Snapshot.consistent(of: outer.roots, as: .outsider) { outer.evaluate(in: $0) }
  guard let target = select(outerValue) else { return missingValue(missing) }
  let (inner, _) = Snapshot.consistent(of: target.roots, as: .outsider) { target.evaluate(in: $0) }
  return wrap(inner)
}

/// The roots of several sources, each once, in the order first met.
@usableFromInline func uniqueRoots(_ lists: [[any Root]]) -> [any Root] {
  var roots: [any Root] = []
  for root in lists.joined() where !roots.contains(where: { $0.identity == root.identity }) { roots.append(root) }
  return roots
}
