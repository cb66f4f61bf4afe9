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
  ///   writers stop. For `Equatable` elements, an array equal to the one delivered last
  ///   is skipped, as a `Property` skips an equal value (a batch or a transaction that
  ///   leaves the array as it was notifies nobody).
  /// - **Reentrancy:** As ``ArrayProperty``.
  /// - **Lifetime:** The view, and every value derived from it, keeps this array alive;
  ///   the array keeps the view's node, which its subscriptions keep too. When the
  ///   array is freed, every subscription to the view ends.
  public var readOnly: ReadOnlyProperty<[Element]> {
    let node = view.load() ?? view.storeIfNil(makeViewNode())
    return ReadOnlyProperty(derived: node, keeping: self)
  }

  /// Ends the subscriptions to ``readOnly``; its next observer makes it follow this
  /// array again: for ``removeAllObservers()``, which ended its subscription.
  func restartView() {
    guard let node = view.load() else { return }
    node.hub.removeAll()
    node.unlink()
    // The subscription of Observation's scopes outlives `removeAll()`: follow again.
    if node.hub.hasLiveSubscribers {
      node.willObserve()
      node.didObserve()
    }
  }

  /// Ends every subscription to ``readOnly``, for the array's deinit: nothing can
  /// change the view again, so scopes waiting for its next change would keep it, and
  /// the array's elements, for good.
  func endView() {
    view.load()?.hub.removeAll(keepingTracking: false)
  }

  /// A node that follows this array. An array of `Equatable` elements skips an array
  /// equal to the one delivered last, as every `Equatable` derived value does; the view
  /// is made once, by whichever read comes first, so that is asked of the element type
  /// here rather than by an overload.
  private func makeViewNode() -> DerivedProperty<[Element]> {
    let root = ArrayRoot(hub)
    return DerivedProperty(isDuplicate: Self.equalArrays()) { unbox($0.pin(root).value) }
  }

  /// `==` of two arrays, if `Element` is `Equatable`. Arrays that share their storage
  /// compare equal at once, and arrays of different counts unequal.
  private static func equalArrays() -> (@Sendable ([Element], [Element]) -> Bool)? {
    guard let equatable = Element.self as? any (Equatable & Sendable).Type else { return nil }
    func comparing<Compared: Equatable & Sendable>(_: Compared.Type) -> @Sendable ([Element], [Element]) -> Bool {
      // `Compared` is `Element`: the arrays are only seen as what they are.
      { unsafeBitCast($0, to: [Compared].self) == unsafeBitCast($1, to: [Compared].self) }
    }
    return comparing(equatable)
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
  // array, as a property's root does (Transaction.swift); a transaction's read is
  // recorded (TransactionReads.swift).

  @usableFromInline func pin(for reader: Snapshot.Reader) -> (version: UInt64, value: any Sendable) {
    let me = reader.threadID
    return hub.storage.withLock { state in
      hub.noteRead(&state, by: me)
      return state.visible(to: me) { ($0.stored.version, $0.stored.share()) }
    }
  }

  @usableFromInline func version(for reader: Snapshot.Reader) -> UInt64 {
    let me = reader.threadID
    return hub.storage.withLock { state in
      hub.noteRead(&state, by: me)
      return state.visibleVersion(to: me, current: state.stored.version)
    }
  }

  /// None: an array's version is its store's, written under the lock only.
  @usableFromInline var versionWord: UnsafePointer<Atomic<UInt64>>? { nil }

  @usableFromInline func sweep() {
    // Not from inside this source's own locked section.
    if !hub.storage.isHeldByCurrentThread { _ = hub.liveCount }
  }

  /// `mapped` is only for a `map` of a property: never an array's.
  @usableFromInline func notify(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void,
    mapped: (@Sendable (AnyObject, Snapshot.Pin) -> Void)?
  ) -> SubscriptionCore {
    // Every commit after the subscription counts the store's version up by one and
    // reaches this subscription, in commit order.
    let version = Atomic<UInt64>(0)
    let entry = RootEntry<ArrayChangeset<Element>>(node: node) { [self] owner, changeset in
      let committed = version.add(1, ordering: .relaxed).newValue
      refresh(owner, Snapshot.ofCommit(of: self, version: committed, value: changeset.array))
    }
    // The version every other thread reads: an open transaction's commit counts one more.
    hub.subscribe(entry) { state in
      version.store(state.visibleVersion(to: .max, current: state.stored.version), ordering: .relaxed)
    }
    return entry
  }
}
