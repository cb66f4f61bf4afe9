import Synchronization

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
    let root = ArrayRoot(hub)
    return DerivedProperty(roots: [root], isDuplicate: nil) { unbox($0.pin(root).value) }
  }
}

/// An array as the root of derived values: its store's version, and the array shared
/// out of the lock.
@usableFromInline
final class ArrayRoot<Element: Sendable>: Root {
  @usableFromInline let hub: Hub<ArrayChangeset<Element>, ArrayStore<Element>>

  @usableFromInline init(_ hub: Hub<ArrayChangeset<Element>, ArrayStore<Element>>) {
    self.hub = hub
  }

  @usableFromInline var identity: ObjectIdentifier { ObjectIdentifier(hub.storage) }

  @usableFromInline var backlogLimit: Int { hub.backlogLimit }

  // Both read the state before an open transaction of another thread that wrote the
  // array, as a property's root does (Transaction.swift).

  @usableFromInline func pin(for reader: Snapshot.Reader) -> (version: UInt64, value: any Sendable) {
    let me = reader.threadID
    return hub.storage.withLock { state in state.visible(to: me) { ($0.stored.version, $0.stored.share()) } }
  }

  @usableFromInline func version(for reader: Snapshot.Reader) -> UInt64 {
    let me = reader.threadID
    return hub.storage.withLock { $0.visibleVersion(to: me, current: $0.stored.version) }
  }

  /// None: an array's version is its store's, written under the lock only.
  @usableFromInline var versionWord: UnsafePointer<Atomic<UInt64>>? { nil }

  @usableFromInline func notify(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void
  ) -> SubscriptionCore {
    // Every commit after the subscription counts the store's version up by one and
    // reaches this subscription, in commit order.
    let version = Atomic<UInt64>(0)
    let entry = RootEntry<ArrayChangeset<Element>>(node: node) { [self] owner, changeset in
      let committed = version.add(1, ordering: .relaxed).newValue
      // A commit of a transaction is never a state of its own (Transaction.swift).
      let isPartial = transactionsBegun.load(ordering: .relaxed) && changeset.isTransactional
      Snapshot.ofCommit(of: self, version: committed, value: changeset.array, isPartial: isPartial) {
        refresh(owner, $0)
      }
    }
    hub.subscribe(entry) { state in version.store(state.stored.version, ordering: .relaxed) }
    return entry
  }
}
