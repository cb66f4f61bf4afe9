// How each derived operator builds its computed value (DerivedProperty.swift): `map`
// and `combineLatest` read their sources in one snapshot; `flatMapLatest` reads its
// outer source, then the target the outer value picks, and keeps that target alive.

extension PropertyProtocol {
  @inlinable func derivedMap<T: Sendable>(
    _ transform: @escaping @Sendable (Value) -> T, isDuplicate: (@Sendable (T, T) -> Bool)?
  ) -> ReadOnlyProperty<T> {
    let source = readOnly
    // Of a property (not a large value, which goes through a snapshot: Parcel.swift), a
    // commit runs the transform without one.
    let ofRoot: (@Sendable (any Sendable) -> T)? =
      source.viewed == nil || MemoryLayout<Value>.size > largeMessageSize ? nil : { @Sendable in transform(unbox($0)) }
    let node = DerivedProperty(
      upstream: [source.computedNode].compactMap { $0 }, isDuplicate: isDuplicate, transformOfRoot: ofRoot
    ) { snapshot in transform(source.evaluate(in: snapshot)) }
    return ReadOnlyProperty(derived: node)
  }

  @inlinable func derivedPair<Other: PropertyProtocol>(
    _ other: Other, isDuplicate: (@Sendable ((Value, Other.Value), (Value, Other.Value)) -> Bool)?
  ) -> ReadOnlyProperty<(Value, Other.Value)> {
    let first = readOnly
    let second = other.readOnly
    let node = DerivedProperty(
      upstream: [first.computedNode, second.computedNode].compactMap { $0 }, isDuplicate: isDuplicate
    ) {
      snapshot in (first.evaluate(in: snapshot), second.evaluate(in: snapshot))
    }
    return ReadOnlyProperty(derived: node)
  }

  /// Builds a `flatMapLatest`: `select` picks the target for an outer value (nil for
  /// none, which reads as `missing`), `wrap` turns a target's value into the result's.
  /// A computed value like the others: it reads the outer source and then the target
  /// picked, in one snapshot.
  @inlinable func derivedSwitch<Inner: Sendable, T: Sendable>(
    select: @escaping @Sendable (Value) -> ReadOnlyProperty<Inner>?,
    wrap: @escaping @Sendable (Inner) -> T,
    missing: T?,
    isDuplicate: (@Sendable (T, T) -> Bool)?
  ) -> ReadOnlyProperty<T> {
    let outer = readOnly
    let keeper = TargetKeeper()
    let node = DerivedProperty(
      upstream: [outer.computedNode].compactMap { $0 }, keeper: keeper, isDuplicate: isDuplicate
    ) { snapshot -> T in
      guard let target = select(outer.evaluate(in: snapshot)) else {
        keeper.keep(nil, node: nil)
        return missingValue(missing)
      }
      keeper.keep(target, node: target.derived)
      return wrap(target.evaluate(in: snapshot))
    }
    return ReadOnlyProperty(derived: node)
  }
}
/// A `flatMapLatest`'s value while it has no target: `missing`, which only a
/// `flatMapLatest` through an optional link has.
@inlinable func missingValue<T>(_ missing: T?) -> T {
  guard let missing else { fatalError("Evented: flatMapLatest picked no target") }
  return missing
}

/// The target a `flatMapLatest` picked last, kept alive with its node; the node is also
/// what a deep chain evaluates below it (DerivedProperty+Evaluate.swift).
@usableFromInline
final class TargetKeeper: Sendable {
  @usableFromInline let current = Lock<(target: (any Sendable)?, node: (any EvaluatedNode)?)>.make((nil, nil))

  @usableFromInline init() {}

  /// Keeps `target`; the one kept before is released after unlocking.
  @inlinable func keep(_ target: (any Sendable)?, node: (any EvaluatedNode)?) {
    var replaced: (target: (any Sendable)?, node: (any EvaluatedNode)?) = (target, node)
    current.withLock { swap(&$0, &replaced) }
    _ = replaced
  }

  /// The node of the target kept, if it is a computed value.
  @inlinable var node: (any EvaluatedNode)? { current.withLock { $0.node } }

  /// Takes the target out, for the teardown of the `flatMapLatest` that kept it.
  @usableFromInline func take() -> (any EvaluatedNode)? {
    var taken: (target: (any Sendable)?, node: (any EvaluatedNode)?) = (nil, nil)
    current.withLock { swap(&$0, &taken) }
    return taken.node
  }
}

extension Collection where Element: PropertyProtocol {
  @inlinable func derivedArray(
    isDuplicate: (@Sendable ([Element.Value], [Element.Value]) -> Bool)?
  ) -> ReadOnlyProperty<[Element.Value]> {
    let sources = map { $0.readOnly }
    if sources.isEmpty { return ReadOnlyProperty(constant: []) }
    // Of properties only (most collections), each is read through an unretained
    // reference, which `sources` keeps valid: a read through its view retains the view.
    var properties: [Unmanaged<Property<Element.Value>>]? = []
    for source in sources {
      guard source.derived == nil, let viewed = source.viewed else {
        properties = nil
        break
      }
      properties?.append(Unmanaged.passUnretained(viewed))
    }
    let plain = properties
    let node = DerivedProperty(upstream: sources.compactMap(\.computedNode), isDuplicate: isDuplicate) { snapshot in
      guard let properties = plain else { return sources.map { $0.evaluate(in: snapshot) } }
      return withExtendedLifetime(sources) {
        properties.map { property -> Element.Value in property._withUnsafeGuaranteedRef { snapshot.read($0) } }
      }
    }
    return ReadOnlyProperty(derived: node)
  }
}
