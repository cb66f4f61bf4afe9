/// One committed change of a property: the value before and after it.
///
/// ## Concurrency
///
/// - **Thread safety:** A value type; `Sendable` when `Value` is.
/// - **Ordering:** Consecutive changes seen by one subscription slide: the `oldValue`
///   of each equals the `newValue` of the one before.
/// - **Reentrancy:** Not applicable.
/// - **Lifetime:** Holds both values.
public struct Change<Value> {
  /// The value before the change.
  public let oldValue: Value
  /// The value after the change.
  public let newValue: Value

  /// Creates a change from `oldValue` to `newValue`.
  public init(oldValue: Value, newValue: Value) {
    self.oldValue = oldValue
    self.newValue = newValue
  }
}

extension Change: Sendable where Value: Sendable {}
extension Change: Equatable where Value: Equatable {}
extension Change: Hashable where Value: Hashable {}

/// What a property's hub delivers: one committed change, or the current value replayed
/// to a new subscription (`isInitial`, with `old` equal to `new`).
@usableFromInline
struct Update<Value: Sendable>: Sendable {
  // `new` comes first: at offset 0 it is reached without the type's metadata, which
  // the unspecialized handler call of a property subscription would otherwise look up.
  @usableFromInline let new: Value
  @usableFromInline let old: Value
  @usableFromInline let isInitial: Bool

  @inlinable init(old: Value, new: Value, isInitial: Bool) {
    self.old = old
    self.new = new
    self.isInitial = isInitial
  }
}
