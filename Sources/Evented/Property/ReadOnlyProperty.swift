/// A read-only view of a property, a value derived from other properties, or a
/// constant.
///
/// ```swift
/// final class Player {
///   @Property private(set) var volume = 5
/// }
/// player.$volume.observe(with: self) { owner, level in owner.show(level) }
/// player.$volume.value      // 5; there is no setter, not even on a copy
/// let label = player.$volume.map { "Volume \($0)" }   // a derived ReadOnlyProperty
/// ```
///
/// Views come from ``Property/readOnly``, `$name` of `@Property var name`, or
/// ``init(_:)``; derived values from `map`, `combineLatest` and `flatMapLatest` on any
/// ``PropertyProtocol``; constants from ``init(constant:)``.
///
/// It is `Observable`, as ``Property`` is: reading ``value`` inside a tracking scope
/// registers the access. A view notifies with its property. A derived value notifies
/// after its next change, through one subscription of its own that it holds from the
/// tracked read until that change (``PropertyProtocol/observerCount`` counts it); its
/// transforms read their sources, so the scope also tracks them. A constant never
/// notifies.
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member may be called from any thread.
/// - **Ordering:** A view behaves as the ``Property`` it views. A derived value is
///   computed from the latest committed values of its sources when read, and its
///   subscriptions receive updates in the sources' commit order.
/// - **Reentrancy:** As ``Property``: handlers may read, write, subscribe and cancel.
/// - **Lifetime:** A view keeps its property alive, not the reverse. A derived value
///   keeps its sources and its transform alive; a source never keeps a derived value
///   alive, but each subscription to a derived value does.
public struct ReadOnlyProperty<Value: Sendable>: PropertyProtocol {
  /// The hub that observers subscribe to: the viewed property's, or the derived node's.
  @usableFromInline let hub: Hub<Update<Value>, Value>
  /// The node of a derived value; nil for a view of a property or a constant.
  @usableFromInline let derived: DerivedProperty<Value>?
  /// The viewed property; nil for a derived value or a constant.
  @usableFromInline let viewed: Property<Value>?
  /// The source object that a derived node does not hold itself, to keep it alive:
  /// the array of an `ArrayProperty.readOnly`, which holds that node.
  @usableFromInline let kept: (any AnyObject & Sendable)?

  @usableFromInline init(hub: Hub<Update<Value>, Value>) {
    self.hub = hub
    derived = nil
    viewed = nil
    kept = nil
  }

  @usableFromInline init(derived: DerivedProperty<Value>, keeping kept: (any AnyObject & Sendable)? = nil) {
    hub = derived.hub
    self.derived = derived
    viewed = nil
    self.kept = kept
  }

  @usableFromInline init(viewing property: Property<Value>) {
    hub = property.hub
    derived = nil
    viewed = property
    kept = nil
  }

  /// A read-only view of `property`: the same as `property.readOnly`.
  public init(_ property: Property<Value>) {
    self.init(viewing: property)
  }

  /// A property that always has `value`; observing it delivers `value` once.
  public init(constant value: Value) {
    // A hub nobody writes: its sequences end when the last copy of the constant goes,
    // and values derived from it do not count it as a root (see `roots`).
    self.init(hub: Hub.make(value))
  }

  /// The current value: for a view, the property's latest committed value; for a
  /// derived value, computed now from the latest committed values of its sources.
  ///
  /// Reading never waits for a delivery to happen. For a derived value the transforms
  /// run on the reading thread when a source committed since they last ran (the
  /// result is kept: reading an unchanged derived value runs nothing).
  @inlinable
  public var value: Value {
    if derived != nil {
      // Borrowed from `self`, not retained.
      return Unmanaged.passUnretained(derived.unsafelyUnwrapped)._withUnsafeGuaranteedRef { derived in
        derived.observation.access { site in
          hub.observe(
            .handle, reading: .message, on: nil, anchor: derived, outlivesRemoveAll: true,
            { (_: Update<Value>) in site.changed() })
        }
        return derived.value
      }
    }
    viewed?.observation.pointee.access()
    return hub.readVisible()
  }

  /// The computed node behind this value, if it is one (not a view or a constant).
  @inlinable var computedNode: (any EvaluatedNode)? { derived }

  /// The value in `snapshot`.
  @inlinable func evaluate(in snapshot: Snapshot) -> Value {
    if derived != nil {
      // Borrowed from `self`, not retained.
      return Unmanaged.passUnretained(derived.unsafelyUnwrapped)._withUnsafeGuaranteedRef { $0.evaluate(in: snapshot) }
    }
    if viewed != nil {
      return Unmanaged.passUnretained(viewed.unsafelyUnwrapped)._withUnsafeGuaranteedRef { snapshot.read($0) }
    }
    return hub.read { copy $0 }  // a constant: never committed, so never a root
  }

  /// This view itself.
  public var readOnly: ReadOnlyProperty<Value> { self }
}
