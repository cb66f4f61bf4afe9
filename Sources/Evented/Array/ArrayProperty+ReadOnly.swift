// `readOnly`: the array as a derived `ReadOnlyProperty<[Element]>`, so that `map`,
// `combineLatest` and `flatMapLatest` work on it. Its node subscribes to the array's
// hub like any observer and commits each changeset's resulting array to its own hub.
//
// The node is made by the first read and kept in `view` for as long as the array
// lives, so every read returns the same view. Two threads reading first at once may
// both make one; `storeIfNil` keeps the first stored, and the other, released, ends
// its subscription to the array. The array counts the kept node's subscription among
// its observers only while the node has observers of its own.

extension ArrayProperty {
  /// The array as a read-only property of whole arrays, for `map`, `combineLatest` and
  /// `flatMapLatest`.
  ///
  /// ```swift
  /// let title = friends.readOnly.map { "\($0.count) friends" }
  /// ```
  ///
  /// Every read returns the same view. It is made by the first read, and it follows
  /// this array with one subscription of its own, which ``observerCount`` counts only
  /// while the view has subscriptions.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be read and observed from any thread.
  /// - **Ordering:** Its `value` is this array's latest committed value. Its observers
  ///   receive the arrays in commit order, one per changeset, and end on `value` when
  ///   writers stop.
  /// - **Reentrancy:** As ``ArrayProperty``.
  /// - **Lifetime:** The view keeps this array's storage alive, and this array keeps
  ///   the view; each subscription to the view keeps it alive too. When the array and
  ///   the view's last subscription are gone, the view is freed and its subscription
  ///   to the array ends.
  public var readOnly: ReadOnlyProperty<[Element]> {
    if let node = view.load() { return ReadOnlyProperty(derived: node) }
    return ReadOnlyProperty(derived: view.storeIfNil(makeViewNode()))
  }

  /// Ends the subscriptions to ``readOnly``; its next observer makes it follow this
  /// array again: for ``removeAllObservers()``, which ended its subscription.
  func restartView() {
    guard let node = view.load() else { return }
    node.hub.removeAll()
    node.unlink()
  }

  /// A node that follows this array.
  private func makeViewNode() -> DerivedProperty<[Element]> {
    let hub = hub
    return DerivedProperty(roots: [HubRoot(hub, committedValue: { $0.array })], isDuplicate: nil) { $0.read(hub) }
  }
}
