// `readOnly`: the array as a derived `ReadOnlyProperty<[Element]>`, so that `map`,
// `combineLatest` and `flatMapLatest` work on it. The node subscribes to the array's
// hub like any observer and commits each changeset's resulting array to its own hub.

extension ArrayProperty {
  /// The array as a read-only property of whole arrays, for `map`, `combineLatest` and
  /// `flatMapLatest`.
  ///
  /// ```swift
  /// let title = friends.readOnly.map { "\($0.count) friends" }
  /// ```
  ///
  /// Each read makes a new derived value with its own subscription to this array: keep
  /// the one you observe.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** Its `value` is this array's latest committed value. Its observers
  ///   receive the arrays in commit order, one per changeset, and end on `value` when
  ///   writers stop.
  /// - **Reentrancy:** As ``ArrayProperty``.
  /// - **Lifetime:** The result keeps this array alive, not the reverse; each
  ///   subscription to it keeps it alive. When nobody references or observes it, it is
  ///   freed and its subscription to this array ends.
  public var readOnly: ReadOnlyProperty<[Element]> {
    let hub = hub
    let node = DerivedProperty(initial: hub.read { copy $0 }, isDuplicate: nil) { hub.read { copy $0 } }
    let entry = OwnedEntry<AnyObject, ArrayChangeset<Element>>(owner: node, target: nil) { owner, changeset in
      unsafeDowncast(owner, to: DerivedProperty<[Element]>.self).publish(changeset.array)
    }
    node.links.withLock { $0.sources.append(entry) }
    hub.subscribe(entry, replay: Self.replay)
    return ReadOnlyProperty(derived: node)
  }
}
