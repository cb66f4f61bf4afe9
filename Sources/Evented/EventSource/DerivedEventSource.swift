// The node behind a derived event source (`map`, `filter`, `compactMap`, `merge`), and
// those operators.
//
// A node has a hub of its own, like an `EventSource`'s, and a synchronous
// subscription to each of its sources whose owner is the node (held weakly: a source
// never keeps a node alive). For each event a source delivers, the node applies its
// transform outside every lock and forwards the result to its own hub (`Hub.forward`),
// so its observers receive events in each source's commit order, with the usual
// promises of a hub. A forward never waits inside the handler; when the node's backlog
// is full, the source's deliverer waits for the room after the handler has returned,
// so the node's backlog stays within its limit plus one event per such thread. Its
// limit is its source's (the smallest of a merge's sources'), so that a derived source
// stays within the bound its source was given.
// Observers keep the node alive (it is the anchor their handlers capture), and the
// node keeps its sources alive; when the last reference and the last subscription
// go, the node deinitializes and ends its subscriptions to the sources. Once the owner
// of its last observer died, a sweep of a source frees it (FollowerEntry.swift).

/// The engine of one derived event source.
@usableFromInline
final class DerivedEventSource<Event: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: `links` is guarded by its own lock; `sources` is written once
  // before the node is shared, and emptied only by its deinit, when nothing else can
  // reach it.
  /// The node's observers and their deliveries, bounded by the smallest backlog limit
  /// of the sources: a derived source stays within its sources' own bound.
  @usableFromInline let hub: Hub<Event, Void>
  /// The node's own subscriptions to its sources.
  @usableFromInline let links = Lock.make([SubscriptionCore]())
  /// The sources, kept alive by the node.
  @usableFromInline @exclusivity(unchecked) var sources: [any Sendable]

  @usableFromInline init(sources: [any Sendable], backlogLimit: Int) {
    self.sources = sources
    hub = Hub.make((), backlogLimit: backlogLimit)
  }

  deinit {
    let cores = links.withLock { $0.take() }
    for core in cores { core.endSwept() }
    // The derived sources below are released one at a time by the outermost deinit of
    // the thread, so that freeing a chain of them does not recurse as deep as it.
    let below = sources.compactMap { ($0 as? any DerivedEventSourceView)?.node }
    if below.isEmpty { return }
    sources = []
    DeliveringThread.tearDown(below)
  }

  /// Subscribes the node to `source`; `receive` runs for every event, one at a time, in
  /// commit order, on the thread that delivers for `source`, with no lock held.
  @inlinable func link<SourceEvent>(
    to source: ReadOnlyEventSource<SourceEvent>,
    _ receive: @escaping @Sendable (DerivedEventSource<Event>, SourceEvent) -> Void
  ) {
    let lazyToken = source.hub.lazyHooks?.token()  // counts this link as an observer of a lazy source
    let entry = FollowerEntry<SourceEvent>(node: self) { owner, event in
      withExtendedLifetime(lazyToken) { receive(unsafeDowncast(owner, to: DerivedEventSource<Event>.self), event) }
    }
    links.withLock { $0.append(entry) }
    source.hub.subscribe(entry)
  }
}

/// A view of an event source, seen by the teardown of a derived source built on it.
protocol DerivedEventSourceView {
  /// The node of a derived source; nil for a view of a plain source.
  var node: AnyObject? { get }
}

extension ReadOnlyEventSource: DerivedEventSourceView {
  var node: AnyObject? { derived }
}

extension DerivedEventSource: FollowingNode {
  @usableFromInline var hasLiveObservers: Bool { hub.hasLiveSubscribers }

  @usableFromInline func sweepObservers() {
    _ = hub.liveCount
  }
}

extension Array {
  /// Empties the array and returns what it held.
  mutating func take() -> Array {
    let taken = self
    self = []
    return taken
  }
}

extension EventSourceProtocol {
  /// A source that sends `transform` of every event of this source.
  ///
  /// ```swift
  /// let messages = uploader.didFail.map { error in "Upload failed: \(error)" }
  /// ```
  ///
  /// - Parameter transform: Runs once per event, on the thread that delivers it,
  ///   never under a lock.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be observed from any thread.
  /// - **Ordering:** Observers receive the transformed events in this source's commit
  ///   order.
  /// - **Reentrancy:** As ``EventSource``: a handler may send to this source; the event
  ///   is delivered after the current delivery pass.
  /// - **Lifetime:** The result keeps this source and `transform` alive; this source
  ///   does not keep the result alive. Each subscription to the result keeps it alive;
  ///   when nobody references or observes it, it is freed and its subscription to this
  ///   source ends.
  @inlinable public func map<T: Sendable>(_ transform: @escaping @Sendable (Event) -> T) -> ReadOnlyEventSource<T> {
    derived { transform($0) }
  }

  /// A source that sends the events of this source for which `isIncluded` is true.
  ///
  /// ```swift
  /// let serious = log.entries.filter { $0.level >= .error }
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be observed from any thread.
  /// - **Ordering:** As `map`.
  /// - **Reentrancy:** As `map`.
  /// - **Lifetime:** As `map`.
  @inlinable public func filter(_ isIncluded: @escaping @Sendable (Event) -> Bool) -> ReadOnlyEventSource<Event> {
    derived { isIncluded($0) ? $0 : nil }
  }

  /// A source that sends the non-nil results of `transform` on this source's events.
  ///
  /// ```swift
  /// let numbers = input.compactMap { Int($0) }
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be observed from any thread.
  /// - **Ordering:** As `map`.
  /// - **Reentrancy:** As `map`.
  /// - **Lifetime:** As `map`.
  @inlinable public func compactMap<T: Sendable>(_ transform: @escaping @Sendable (Event) -> T?) -> ReadOnlyEventSource<
    T
  > {
    derived(transform)
  }

  /// A source that sends every event of this source and of `others`.
  ///
  /// ```swift
  /// let anyFailure = upload.didFail.merge(with: download.didFail)
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be observed from any thread.
  /// - **Ordering:** The events of each source arrive in that source's commit order.
  ///   Events of different sources are delivered in the order they reach the merge;
  ///   two sends on different threads are not ordered against each other.
  /// - **Reentrancy:** As `map`.
  /// - **Lifetime:** The result keeps every source alive, not the reverse; each
  ///   subscription to it keeps it alive.
  @inlinable public func merge(with others: any EventSourceProtocol<Event>...) -> ReadOnlyEventSource<Event> {
    ([readOnly] + others.map { $0.readOnly }).merge()
  }

  @inlinable func derived<T: Sendable>(_ transform: @escaping @Sendable (Event) -> T?) -> ReadOnlyEventSource<T> {
    let source = readOnly
    let node = DerivedEventSource<T>(sources: [source], backlogLimit: source.hub.backlogLimit)
    node.link(to: source) { node, event in
      if let result = transform(event) { node.hub.forward(result) } else { node.hub.scanForDeadOwners() }
    }
    return ReadOnlyEventSource(derived: node)
  }
}

extension Collection where Element: EventSourceProtocol {
  /// A source that sends every event of every source in the collection.
  ///
  /// ```swift
  /// let anyTap = buttons.map(\.tapped).merge()
  /// ```
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** `Sendable`; may be observed from any thread.
  /// - **Ordering:** The events of each source arrive in that source's commit order;
  ///   events of different sources in the order they reach the merge.
  /// - **Reentrancy:** As ``EventSource``.
  /// - **Lifetime:** The result keeps every source alive, not the reverse; each
  ///   subscription to it keeps it alive.
  @inlinable public func merge() -> ReadOnlyEventSource<Element.Event> {
    let sources = map { $0.readOnly }
    let limit = sources.map(\.hub.backlogLimit).min() ?? defaultBacklogLimit
    let node = DerivedEventSource<Element.Event>(sources: sources, backlogLimit: limit)
    for source in sources {
      node.link(to: source) { node, event in node.hub.forward(event) }
    }
    return ReadOnlyEventSource(derived: node)
  }
}
