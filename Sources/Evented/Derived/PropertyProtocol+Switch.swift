// `flatMapLatest`'s node: how `derivedSwitch` builds a following node from an outer
// source and a choice of target (DerivedProperty+Follow.swift says how it follows and
// commits), and the values it reads while it has no target or inside a transaction.

extension PropertyProtocol {
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
