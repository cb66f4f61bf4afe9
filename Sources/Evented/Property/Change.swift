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
/// to a new subscription (`isInitial`, with `old` equal to `new`). A transaction's commit
/// says so (`isFromTransaction`): a derived value that delivered a state with it already
/// (made visible with the transaction's other commits) skips it (Root.swift).
@usableFromInline
struct Update<Value: Sendable>: Sendable {
  // `new` comes first: at offset 0 it is reached without the type's metadata, which
  // the unspecialized handler call of a property subscription would otherwise look up.
  @usableFromInline let new: Value
  @usableFromInline let old: Value
  /// `isInitial`, `isFromTransaction` and `isMerged`, in one byte.
  @usableFromInline let flags: UInt8

  @inlinable init(old: Value, new: Value, isInitial: Bool, isFromTransaction: Bool = false, isMerged: Bool = false) {
    self.old = old
    self.new = new
    flags = (isInitial ? 1 : 0) | (isFromTransaction ? 2 : 0) | (isMerged ? 4 : 0)
  }

  /// `waiting` and then `newer`, as one update: from the old value of the first to the
  /// new value of the second (a replay stays a replay, of the newer value).
  @inlinable static func merging(_ waiting: Self, _ newer: Self) -> Self {
    Update(old: waiting.old, new: newer.new, isInitial: waiting.isInitial, isMerged: true)
  }

  /// The current value replayed to a new subscription, not a change.
  @inlinable var isInitial: Bool { flags & 1 != 0 }
  /// A transaction's commit of the source (Transaction.swift).
  @inlinable var isFromTransaction: Bool { flags & 2 != 0 }
  /// Several changes merged into one while they waited (`merging`): its old and new
  /// values may be equal.
  @inlinable var isMerged: Bool { flags & 4 != 0 }
}
