// Glitch freedom, the roots' side: the sources that derived values read (a property's
// hub or an array's), how their version and committed value are read together, and the
// link through which each commit reaches an observed derived value (Snapshot.swift says
// how an evaluation reads them).

import Synchronization

/// A source whose committed value derived values read: a property's hub or an array's.
@usableFromInline
protocol Root: AnyObject, Sendable {
  /// The source's hub storage: two roots are the same root when this is the same.
  var identity: ObjectIdentifier { get }
  /// The source's backlog limit: a derived value takes the smallest of its roots', so
  /// that it stays within the bound its sources were given.
  var backlogLimit: Int { get }
  /// The version and the value now, read together under the source's lock, as the
  /// thread `reader` sees them (``Snapshot/Reader``).
  func pin(for reader: Snapshot.Reader) -> (version: UInt64, value: any Sendable)
  /// The version now, as the thread `reader` sees it.
  func version(for reader: Snapshot.Reader) -> UInt64
  /// Where the version can be loaded without the lock, if anywhere
  /// (``Hub/versionWord``); valid while the root lives.
  var versionWord: UnsafePointer<Atomic<UInt64>>? { get }
  /// Sweeps the source's subscriptions as its `observerCount` does: those of values
  /// derived from it whose last observer's owner died are dropped, and those values
  /// freed. Does nothing inside the source's own locked section.
  func sweep()
  /// Subscribes `refresh` to every commit of the source, with `node` as the owner;
  /// `refresh` receives a snapshot that pins only the commit, and recycles it
  /// (``Snapshot/ofCommit(of:version:value:)``). A property's commit goes to `mapped`
  /// instead if there is one, as a pin, without a snapshot (a `map` of the property).
  func notify(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void,
    mapped: (@Sendable (AnyObject, Snapshot.Pin) -> Void)?
  ) -> SubscriptionCore
}

extension Root {
  /// The version now, as ``version`` gives it, but loaded without the lock when the root
  /// has a version word that no open transaction marks (`HubState.mayHideBit`).
  @inlinable var versionNow: UInt64 {
    unlockedVersion(versionWord) ?? version(for: .calling)
  }

  /// ``versionNow`` as the thread `reader` sees it.
  @inlinable func versionNow(for reader: Snapshot.Reader) -> UInt64 {
    unlockedVersion(versionWord) ?? version(for: reader)
  }
}

/// The version in `word`, loaded without the lock; nil if there is no word, or if an
/// open transaction may hide the latest commits from this thread (`HubState.mayHideBit`,
/// set before any of them is counted): then the version must be read under the root's
/// lock, where the transaction's record decides (Transaction.swift). Nil as well on the
/// thread of the open transaction, whose reads are recorded under the lock
/// (TransactionReads.swift).
@inlinable func unlockedVersion(_ word: UnsafePointer<Atomic<UInt64>>?) -> UInt64? {
  guard let word, wordsAreCurrent else { return nil }
  return wordVersion(UInt(bitPattern: word))
}

/// Whether the calling thread may take versions from version words: false on the thread
/// of the open transaction (``unlockedVersion(_:)``), the same for every root.
@inlinable var wordsAreCurrent: Bool {
  let thread = transactionThread.load(ordering: .relaxed)
  return thread == 0 || thread != currentThreadID()
}

/// The version in the version word at `address`, unless an open transaction may hide
/// the latest commits (``unlockedVersion(_:)``); the caller checked ``wordsAreCurrent``.
@inlinable func wordVersion(_ address: UInt) -> UInt64? {
  let bits = UnsafePointer<Atomic<UInt64>>(bitPattern: address).unsafelyUnwrapped.pointee.load(ordering: .acquiring)
  return bits & versionMayHideBit == 0 ? bits : nil
}

/// The root of a hub whose stored value is a property's value or an array.
@usableFromInline
final class HubRoot<Message: Sendable, Stored: Sendable>: Root {
  @usableFromInline let hub: Hub<Message, Stored>

  /// The hooks of a lazy property: a derived value following it counts as its observer.
  @usableFromInline let lazy: LazyHooks?

  /// ``pin()`` and ``version``, as closures that capture nothing, made by the inlinable
  /// initializer: so they run code specialized for the hub's types, not the generic
  /// code that a call through the `Root` protocol would reach.
  @usableFromInline let pinning:
    @Sendable (Hub<Message, Stored>, Snapshot.Reader) -> (version: UInt64, value: any Sendable)
  @usableFromInline let versioning: @Sendable (Hub<Message, Stored>, Snapshot.Reader) -> UInt64
  /// The address of ``versionWord``, found by the inlinable initializer (in generic
  /// code, finding it looks up the state's type and the field's offset). An address,
  /// so that the root stays `Sendable`: the word is atomic and lives with `hub`.
  @usableFromInline let wordAddress: UInt
  /// ``notify(_:_:)``, made by the initializer of a property's root (its handler runs
  /// for every commit); nil for a root that is only read, never notified.
  @usableFromInline let notifying:
    (
      @Sendable (
        HubRoot, any ObservedNode, @escaping @Sendable (AnyObject, Snapshot) -> Void,
        (@Sendable (AnyObject, Snapshot.Pin) -> Void)?
      ) -> SubscriptionCore
    )?

  @inlinable init(
    _ hub: Hub<Message, Stored>,
    notifying: (
      @Sendable (
        HubRoot, any ObservedNode, @escaping @Sendable (AnyObject, Snapshot) -> Void,
        (@Sendable (AnyObject, Snapshot.Pin) -> Void)?
      ) -> SubscriptionCore
    )?,
    lazy: LazyHooks? = nil
  ) {
    self.hub = hub
    self.notifying = notifying
    self.lazy = lazy
    // A transaction's read of the root is recorded (TransactionReads.swift).
    pinning = { hub, reader in
      let me = reader.threadID
      return hub.storage.withLock { state in
        hub.noteRead(&state, by: me)
        return state.visible(to: me)
      }
    }
    versioning = { hub, reader in
      let me = reader.threadID
      return hub.storage.withLock { state in
        hub.noteRead(&state, by: me)
        return state.visibleVersion(to: me, current: state.version)
      }
    }
    wordAddress = UInt(bitPattern: hub.versionWord)
  }

  @usableFromInline var identity: ObjectIdentifier { ObjectIdentifier(hub.storage) }

  @usableFromInline var backlogLimit: Int { hub.backlogLimit }

  @usableFromInline func pin(for reader: Snapshot.Reader) -> (version: UInt64, value: any Sendable) {
    pinning(hub, reader)
  }

  @usableFromInline func version(for reader: Snapshot.Reader) -> UInt64 { versioning(hub, reader) }

  @usableFromInline var versionWord: UnsafePointer<Atomic<UInt64>>? { UnsafePointer(bitPattern: wordAddress) }

  @usableFromInline func sweep() {
    // Not from inside this source's own locked section (a `modify` closure or an `==`).
    if !hub.storage.isHeldByCurrentThread { _ = hub.liveCount }
  }

  @usableFromInline func notify(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void,
    mapped: (@Sendable (AnyObject, Snapshot.Pin) -> Void)?
  ) -> SubscriptionCore {
    guard let notifying else { fatalError("Evented: a root that is only read was notified") }
    return notifying(self, node, refresh, mapped)
  }
}

extension HubRoot where Message == Update<Stored> {
  /// Subscribes `refresh`, or `mapped`, to every commit, with `node` as the owner (see
  /// ``notify(_:_:mapped:)``).
  @inlinable func subscribe(
    _ node: any ObservedNode, _ refresh: @escaping @Sendable (AnyObject, Snapshot) -> Void,
    mapped: (@Sendable (AnyObject, Snapshot.Pin) -> Void)?
  ) -> SubscriptionCore {
    // Every commit after the subscription bumps the version by one and reaches this
    // subscription, in commit order: counting them gives each one's version.
    let version = Atomic<UInt64>(0)
    let lazyToken = lazy?.token()  // counts this subscription as an observer of a lazy source
    let hasDelivered = node.deliveredCheck
    let entry = RootEntry<Message>(node: node, keeping: lazyToken) { [self] owner, update in
      let committed = version.add(1, ordering: .relaxed).newValue
      // A transaction's commits are visible together: the state another of them made the
      // node deliver may hold this one already. `owner` is the node.
      if update.isFromTransaction, hasDelivered(owner, identity, committed) { return }
      if mapped != nil {
        return mapped.unsafelyUnwrapped(owner, Snapshot.Pin(root: self, version: committed, value: update.new))
      }
      refresh(owner, Snapshot.ofCommit(of: self, version: committed, value: update.new))
    }
    // The version every other thread reads: an open transaction's commit counts one more.
    hub.subscribe(entry) { state in
      version.store(state.visibleVersion(to: .max, current: state.version), ordering: .relaxed)
    }
    return entry
  }
}

/// A derived value's subscription to one of its roots. It counts as alive only while
/// the derived value has observers, so that the root's `observerCount` and sweeps see
/// through an unobserved derived value (which then subscribes again when observed).
@usableFromInline
final class RootEntry<Message>: Entry<Message>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock; `handler` is ordered by `word` (see
  // SubscriptionCore), and `kept` with it; `node` is written once, before the
  // subscription is published; `isDropped` and `deliveries` are atomic.
  @usableFromInline typealias Handler = @Sendable (AnyObject, Message) -> Void

  @usableFromInline @exclusivity(unchecked) var handler: Handler?
  /// Written once before the subscription is published.
  @usableFromInline @exclusivity(unchecked) weak var node: (any ObservedNode)?

  /// What the subscription keeps alive until it ends (a lazy source's observer token);
  /// released with the handler.
  @usableFromInline @exclusivity(unchecked) var kept: LazyObserverToken?

  @usableFromInline init(node: any ObservedNode, keeping kept: LazyObserverToken? = nil, handler: @escaping Handler) {
    self.handler = handler
    self.kept = kept
    super.init(isOnce: false, target: nil)
    self.node = node
    outlivesRemoveAll = true  // a link, not an observer: `removeAllObservers()` leaves it
  }

  /// Set once the node was found unobserved: the subscription is over for good.
  @usableFromInline let isDropped = Atomic<Bool>(false)

  /// Deliveries since the node's observers were last checked.
  @usableFromInline let deliveries = Atomic<UInt8>(0)

  /// For a delivery: the node, checking that it is still observed once every 32
  /// deliveries (a full check takes the node's locks). Sweeps and counts check every
  /// time (`sweptOwner`), so an unobserved node is dropped by them at once, and by its
  /// deliveries within 32 commits.
  @usableFromInline override var liveOwner: AnyObject? {
    guard !isDropped.load(ordering: .acquiring), let node else { return nil }
    if deliveries.wrappingAdd(1, ordering: .relaxed).oldValue & 31 != 0 { return node }
    return observed(node)
  }

  @usableFromInline override var sweptOwner: AnyObject? {
    guard !isDropped.load(ordering: .acquiring), let node else { return nil }
    return observed(node)
  }

  /// `node` if it still has observers; else nil, and the subscription is over for good.
  @usableFromInline func observed(_ node: any ObservedNode) -> AnyObject? {
    guard node.keepsLinks() else {
      isDropped.store(true, ordering: .releasing)
      return nil
    }
    return node
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Message) {
    if let handler { handler(owner, message) }
  }

  /// Released when the subscription ends, outside every lock. If it ended because the
  /// node has no observer left, the node's observers whose owners died are swept out
  /// now: they hold the node, which would otherwise live until its next delivery.
  @usableFromInline override func releaseHandler() {
    handler = nil
    kept = nil
    node?.sweepObservers()
  }
}

extension HubRoot where Message == Update<Stored> {
  /// The root of a property's hub.
  @inlinable convenience init(property hub: Hub<Message, Stored>, lazy: LazyHooks? = nil) {
    self.init(
      hub, notifying: { root, node, refresh, mapped in root.subscribe(node, refresh, mapped: mapped) }, lazy: lazy)
  }
}
