/// A read-only view of a property, or a constant.
///
/// ```swift
/// final class Player {
///   @Property private(set) var volume = 5
/// }
/// player.$volume.observe(with: self) { owner, level in owner.show(level) }
/// player.$volume.value      // 5; there is no setter, not even on a copy
/// ```
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member may be called from any thread.
/// - **Ordering:** As the ``Property`` it views.
/// - **Reentrancy:** As the ``Property`` it views.
/// - **Lifetime:** The view keeps its property alive, not the reverse.
public struct ReadOnlyProperty<Value: Sendable>: PropertyProtocol {
  let property: Property<Value>

  init(property: Property<Value>) {
    self.property = property
  }

  /// A property that always has `value`; observing it delivers `value` once.
  public init(constant value: Value) {
    property = Property(value)
  }

  /// The current value.
  public var value: Value { property.value }

  /// This view itself.
  public var readOnly: ReadOnlyProperty<Value> { self }
}
