// The node behind a derived property (`map`, `combineLatest`, `flatMapLatest`).
//
// A node has a hub of its own, exactly like a `Property`'s: its stored value is the
// derived value as of the updates delivered to the node so far, and its observers
// subscribe to it with the usual replay. The node subscribes to each source with an
// ordinary synchronous subscription whose owner is the node (held weakly, so a source
// never keeps a node alive) and, for each update a source delivers, computes the new
// derived value outside every lock and commits it to its own hub, skipping
// duplicates as `Property` does. A source delivers to one subscription serially and
// in commit order, so the node commits in the sources' commit order, and when the
// writers stop, the last update each source delivered is its `value`: the stored
// value converges on the value computed from the sources.
//
// Reading `value` does not use the stored value: it recomputes from the sources'
// latest committed values, so a thread reads its own writes through any chain without
// waiting for a delivery.
//
// Lifetimes:
//   observer's subscription --(handler captures the node as anchor)--> node
//   node --(strong: `compute`, `links`)--> its sources and transforms
//   source --(weak owner)--> node
// When the last reference and the last subscription go, the node deinitializes and
// ends its own subscriptions to the sources (their `observerCount` drops back).
//
// `flatMapLatest` adds a switch: `links.inner` is the subscription to the current
// target, and `generation` numbers the targets. The outer source's handler (serial)
// detaches from the old target, bumps the generation, then subscribes to the new one;
// an update from an old target is committed only if the generation it was made for is
// still current, checked under the hub's lock, so once the new target's first value is
// committed nothing from an old target follows it.

import Synchronization

/// The subscriptions a node holds on its sources; ended when the node deinitializes.
@usableFromInline
struct LinkState: Sendable {
  @usableFromInline var sources: [SubscriptionCore] = []
  /// `flatMapLatest` only: the subscription to the current target.
  @usableFromInline var inner: SubscriptionCore?
  /// `flatMapLatest` only: the current target, kept alive while it is followed.
  @usableFromInline var target: (any Sendable)?
  /// `flatMapLatest` only: the identity of `target`'s hub; nil for a missing target.
  @usableFromInline var targetID: ObjectIdentifier?
  /// `flatMapLatest` only: whether a target (or a missing one) has been chosen yet.
  @usableFromInline var isSwitched = false

  @usableFromInline init() {}
}

/// The engine of one derived property.
@usableFromInline
final class DerivedProperty<Value: Sendable>: Sendable {
  /// The derived value as of the updates delivered so far, and the observers.
  @usableFromInline let hub: Hub<Update<Value>, Value>
  /// Computes the value from the sources' latest committed values; keeps them alive.
  @usableFromInline let compute: @Sendable () -> Value
  @usableFromInline let isDuplicate: (@Sendable (Value, Value) -> Bool)?
  /// The node's own subscriptions to its sources.
  @usableFromInline let links = Lock.make(LinkState())
  /// `flatMapLatest` only: the number of the current target.
  @usableFromInline let generation = Atomic<UInt>(0)
  /// Observation's view of this value (see ObservationSite.swift).
  @usableFromInline let observation = ObservationSlot()

  @usableFromInline init(
    initial: Value, isDuplicate: (@Sendable (Value, Value) -> Bool)?, compute: @escaping @Sendable () -> Value
  ) {
    hub = Hub.make(initial)
    self.isDuplicate = isDuplicate
    self.compute = compute
  }

  deinit {
    let (cores, target) = links.withLock { state -> ([SubscriptionCore], (any Sendable)?) in
      var cores = state.sources
      if let inner = state.inner { cores.append(inner) }
      let target = state.target
      state = LinkState()
      return (cores, target)
    }
    for core in cores { core.endSwept() }
    _ = target
  }

  /// Subscribes the node to `source`, starting with its current value.
  ///
  /// `receive` runs for every update of `source`, one at a time, in commit order, on
  /// the thread that delivers for `source`, with no lock held.
  @inlinable func link<SourceValue>(
    to source: ReadOnlyProperty<SourceValue>,
    _ receive: @escaping @Sendable (DerivedProperty<Value>, SourceValue) -> Void
  ) {
    let lazyToken = source.viewed?.lazy?.token()  // counts this link as an observer of a lazy source
    let entry = OwnedEntry<AnyObject, Update<SourceValue>>(owner: self, target: nil) { owner, update in
      withExtendedLifetime(lazyToken) { receive(unsafeDowncast(owner, to: DerivedProperty<Value>.self), update.new) }
    }
    links.withLock { $0.sources.append(entry) }
    source.hub.subscribe(entry, replay: replayCurrent)
  }

  /// Commits `value` as the derived value, unless it equals the stored one.
  @inlinable func publish(_ value: Value) {
    publish(value, generation: nil)
  }

  /// Commits the stored value changed by `change` (one side of a combination), unless
  /// the result equals the stored one.
  @inlinable func publish(changing change: (inout Value) -> Void) {
    let token = hub.lockForCommit()
    var next = token.state.pointee.stored
    change(&next)
    if !hub.change(token, to: next, isDuplicate: isDuplicate) { hub.scanForDeadOwners() }
    withExtendedLifetime(next) {}
  }

  /// Commits `value` if `generation` still names the current target (or is nil), unless
  /// it equals the stored value.
  @inlinable func publish(_ value: Value, generation expected: UInt?) {
    let token = hub.lockForCommit()
    if let expected, generation.load(ordering: .acquiring) != expected { return token.unlock() }
    if !hub.change(token, to: value, isDuplicate: isDuplicate) { hub.scanForDeadOwners() }
  }

  /// Follows `target` from now on (`flatMapLatest`): detaches from the previous target,
  /// then attaches to this one and commits its current value, transformed by `wrap`.
  /// A nil target commits `missing`.
  ///
  /// Called only from the outer source's handler, so never concurrently with itself.
  @inlinable func follow<Inner>(
    _ target: ReadOnlyProperty<Inner>?,
    missing: Value?,
    wrap: @escaping @Sendable (Inner) -> Value
  ) {
    let id = target.map { ObjectIdentifier($0.hub.storage) }
    let previous = links.withLock { state -> (SubscriptionCore?, (any Sendable)?)? in
      if state.isSwitched, state.targetID == id { return nil }
      let previous = (state.inner, state.target)
      state.inner = nil
      state.target = nil
      state.targetID = nil
      state.isSwitched = true
      return previous
    }
    guard let previous else { return }
    let current = generation.add(1, ordering: .acquiringAndReleasing).newValue
    // Detach first, so that the old target's observerCount has dropped before the new
    // target's value is delivered.
    previous.0?.endSwept()
    _ = previous.1
    guard let target else {
      if let missing { publish(missing, generation: current) }
      return
    }
    let lazyToken = target.viewed?.lazy?.token()  // counts this link as an observer of a lazy source
    let entry = OwnedEntry<AnyObject, Update<Inner>>(owner: self, target: nil) { owner, update in
      withExtendedLifetime(lazyToken) {
        unsafeDowncast(owner, to: DerivedProperty<Value>.self).publish(wrap(update.new), generation: current)
      }
    }
    links.withLock { state in
      state.inner = entry
      state.target = target
      state.targetID = id
    }
    target.hub.subscribe(entry, replay: replayCurrent)
  }
}
