// `flatMapLatest`: a computed value that reads its outer source, then the target the
// outer value picks, in one snapshot, and keeps that target alive.

extension PropertyProtocol {
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
