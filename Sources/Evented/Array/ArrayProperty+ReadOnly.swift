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

  /// Whether ``readOnly`` has made its node, which follows this array with one
  /// subscription, and nobody observes it.
  var hasIdleView: Bool {
    guard let node = view.load() else { return false }
    return node.hub.liveCount == 0
  }

  /// Ends the subscriptions to ``readOnly``, and follows this array again with a new
  /// subscription: for ``removeAllObservers()``, which ended the old one.
  func restartView() {
    guard let node = view.load() else { return }
    node.hub.removeAll()
    follow(with: node)
  }

  /// A node that follows this array.
  private func makeViewNode() -> DerivedProperty<[Element]> {
    let hub = hub
    let node = DerivedProperty(initial: hub.storage.withLock { $0.stored.share() }, isDuplicate: nil) {
      hub.storage.withLock { $0.stored.share() }
    }
    follow(with: node)
    return node
  }

  /// Subscribes `node` to this array, starting with the current array, in place of its
  /// earlier subscription.
  private func follow(with node: DerivedProperty<[Element]>) {
    let entry = OwnedEntry<AnyObject, ArrayChangeset<Element>>(owner: node, target: nil) { owner, changeset in
      unsafeDowncast(owner, to: DerivedProperty<[Element]>.self).publish(changeset.array)
    }
    let earlier = node.links.withLock { links in
      defer { links.sources = [entry] }
      return links.sources
    }
    for core in earlier { core.endSwept() }
    hub.subscribe(entry, replay: Self.replay)
  }
}
