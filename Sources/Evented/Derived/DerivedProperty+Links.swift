// How a derived node links to its sources: the subscriptions it holds while it has
// observers, made and ended as observers come and go, and the switch of a following
// node (`flatMapLatest`) from one target to the next (DerivedProperty+Follow.swift
// says how it commits).
//
// Lifetimes:
//   observer's subscription --(handler captures the node as anchor)--> node
//   node --(strong: `body`, `compute`, `links`)--> its sources and transforms
//   root --(weak owner)--> node
// When the last reference and the last subscription go, the node deinitializes and
// ends its own subscriptions to its roots (their `observerCount` drops back).
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
  /// A computed node: whether it follows its roots (while it has observers).
  @usableFromInline var isLinked = false
  /// A computed node: observers announced by `willObserve` and not yet subscribed.
  @usableFromInline var arriving = 0
  /// `flatMapLatest` only: the subscription to the current target.
  @usableFromInline var inner: SubscriptionCore?
  /// `flatMapLatest` only: the current target, kept alive while it is followed.
  @usableFromInline var target: (any Sendable)?
  /// `flatMapLatest` only: the number of the switch that chose `target`.
  @usableFromInline var targetGeneration: UInt = 0
  /// `flatMapLatest` only: the versions of the outer source's roots at which `target`
  /// was chosen, or found chosen again; nil before the first choice.
  @usableFromInline var chosenAt: Versions?
  /// `flatMapLatest` only, with a computed `Equatable` outer source: its value at
  /// `chosenAt`, which an equal value chooses again (DerivedProperty+Follow.swift).
  @usableFromInline var chosenValue: (any Sendable)?
  /// `flatMapLatest` only: the identity of `target`'s hub; nil for a missing target.
  @usableFromInline var targetID: ObjectIdentifier?
  /// `flatMapLatest` only: the roots that `target` and the outer source both read, as
  /// pairs of positions in their roots (``DerivedProperty/sharedRoots(_:_:)``).
  @usableFromInline var sharedRoots: [(Int, Int)] = []
  /// `flatMapLatest` only: whether a target (or a missing one) has been chosen yet.
  @usableFromInline var isSwitched = false

  @usableFromInline init() {}
}

extension DerivedProperty {
  /// Subscribes a computed node to each of its roots, in place of any earlier
  /// subscriptions, then catches up with what was committed meanwhile.
  @usableFromInline func relink() {
    let onCommit = onCommit.unsafelyUnwrapped
    let cores = directLink.map { [$0(self)] } ?? roots.map { root in root.notify(self, onCommit) }
    let earlier = links.withLock { links in
      defer {
        links.sources = cores
        links.isLinked = true
      }
      return links.sources
    }
    for core in earlier { core.endSwept() }
    refreshing.unsafelyUnwrapped(self)
  }

  /// Ends a computed node's subscriptions to its roots; its next observer makes new ones.
  @usableFromInline func unlink() {
    let cores = links.withLock { links -> [SubscriptionCore] in
      links.isLinked = false
      defer { links.sources = [] }
      return links.sources
    }
    for core in cores { core.endSwept() }
  }

  /// Ends a computed node's subscriptions to its roots if it has no observers and none
  /// is arriving: nobody needs its updates until the next `willObserve`.
  ///
  /// - Returns: Whether the node does not follow its roots now.
  @usableFromInline func unlinkIfUnobserved() -> Bool {
    let (cores, unlinked) = links.withLock { links -> ([SubscriptionCore], Bool) in
      guard links.isLinked else { return ([], true) }
      guard links.arriving == 0, !hub.hasLiveSubscribers else { return ([], false) }
      links.isLinked = false
      defer { links.sources = [] }
      return (links.sources, true)
    }
    for core in cores { core.endSwept() }
    return unlinked
  }
}

extension DerivedProperty: FollowingNode {
  @usableFromInline var hasLiveObservers: Bool { hub.hasLiveSubscribers }
}

extension DerivedProperty: ObservedNode {
  @usableFromInline func willObserve() {
    guard body != nil else { return catchingUp.unsafelyUnwrapped(self) }
    let mustLink = links.withLock { links -> Bool in
      links.arriving += 1
      // A root that found the node unobserved dropped its subscription (keepsLinks).
      return !links.isLinked
    }
    if mustLink { relink() } else { refreshing.unsafelyUnwrapped(self) }
  }

  @usableFromInline func didObserve() {
    guard body != nil else { return }
    links.withLock { $0.arriving -= 1 }
  }

  @usableFromInline func keepsLinks() -> Bool {
    checkLinks.map { $0(self) } ?? true
  }

  @inlinable func keepsLinksNow() -> Bool {
    links.withLock { links in
      if links.arriving > 0 || hub.hasLiveSubscribers { return true }
      links.isLinked = false
      return false
    }
  }

  @usableFromInline func sweepObservers() {
    _ = hub.liveCount
  }

  @usableFromInline func observerEnded() {
    guard body != nil else { return }
    _ = unlinkIfUnobserved()
  }

  @usableFromInline func refreshLatest() {
    guard body != nil, links.withLock({ $0.isLinked }) else { return }
    refreshing.unsafelyUnwrapped(self)
  }
}
