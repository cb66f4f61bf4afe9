// How an observed derived value links to the roots it read: one subscription per root
// (`RootEntry`, Root.swift), made and ended as its reads change and as observers come
// and go.
//
// Lifetimes:
//   observer's subscription --(handler captures the node as anchor)--> node
//   node --(strong: `body`)--> its sources and transforms
//   root --(weak owner)--> node
// When the last reference and the last subscription go, the node deinitializes and
// ends its links (their roots' `observerCount` drops back).
//
// Relinking is serial without a lock held while subscribing (a subscription may sweep
// garbage, and a sweep may reach this node): a run asks for the links of its reads,
// numbered so that a later state's links win; the thread that finds nobody relinking
// applies the newest request, then any that arrived meanwhile (EffectState.swift).

import Synchronization

extension DerivedProperty {
  /// Links the node to the roots of `reads` and ends its links to any other root, unless
  /// a request numbered higher came first. A run asks before it commits a state, with an
  /// odd number (twice the commit's number, minus one), and after, with an even one, so
  /// that a state committed later always wins.
  ///
  /// With `ending`, a caller whose request another thread applies ends, itself, the
  /// links that `reads` no longer name: a switch delivers its state after its old links
  /// ended, without waiting for the applier (which may be running a lazy source's hooks,
  /// user code that may wait for this thread).
  @usableFromInline func relink(to reads: Reads, at number: UInt64, ending: Bool = false) {
    let unread = links.withLock { state -> [SubscriptionCore]? in
      if state.request(reads, number: number) { return nil }
      return ending ? state.takeUnread(reads) : []
    }
    if let unread {
      for core in unread { core.endSwept() }
      return
    }
    var moved = false
    while let step = links.withLock({ $0.nextStep() }) {
      for core in step.ended { core.endSwept() }
      if step.added.isEmpty { continue }
      var made: [EffectState.Link] = []
      for root in step.added {
        let core = root.notify(self, onCommit, mapped: onMappedCommit)
        made.append(EffectState.Link(identity: root.identity, root: root, core: core))
        // A commit made between the read and the link reached no link: run again.
        if let version = step.reads.version(of: root.identity), root.versionNow != version { moved = true }
      }
      for core in links.withLock({ $0.attach(made) }) { core.endSwept() }
    }
    if moved { refresh() }
  }

  /// Starts following the roots: links to what the latest state reads, and commits it
  /// if it is later than the one delivered last.
  @usableFromInline func link() {
    for core in links.withLock({ $0.link() }) { core.endSwept() }
    refresh(relinking: true)
  }

  /// Ends the node's links; its next observer makes new ones.
  @usableFromInline func unlink() {
    for core in links.withLock({ $0.unlink() }) { core.endSwept() }
  }

  /// Ends the node's links if it has no observers and none is arriving.
  @usableFromInline func unlinkIfUnobserved() {
    let cores = links.withLock { state -> [SubscriptionCore] in
      // Also when a root found the node unobserved first (`dropped()`): it dropped only
      // its own link, and the others are ended here.
      guard state.arriving == 0, !hub.hasLiveSubscribers else { return [] }
      return state.unlink()
    }
    // Not waiting for a root's delivery running through a link on another thread: it
    // runs user code (transforms, this value's handlers, deinits) that may wait for
    // this thread. That delivery releases the link's lazy token when it returns.
    for core in cores { core.endSwept() }
  }
}

extension DerivedProperty: ObservedNode {
  @usableFromInline func willObserve() {
    let mustLink = links.withLock { state -> Bool in
      state.arriving += 1
      // A root that found the node unobserved dropped its link (keepsLinks).
      return !state.isLinked
    }
    if mustLink { link() } else { refreshing(self) }
  }

  @usableFromInline func didObserve() {
    links.withLock { $0.arriving -= 1 }
  }

  @usableFromInline func keepsLinks() -> Bool {
    checkLinks(self)
  }

  @inlinable func keepsLinksNow() -> Bool {
    links.withLock { state in
      if state.arriving > 0 || hub.hasLiveSubscribers { return true }
      state.dropped()
      return false
    }
  }

  @usableFromInline func sweepObservers() {
    _ = hub.liveCount
  }

  @usableFromInline var deliveredCheck: @Sendable (AnyObject, ObjectIdentifier, UInt64) -> Bool { checkDelivered }

  /// Whether the state delivered last read the root `identity` at `version` or later.
  @inlinable func hasDelivered(_ identity: ObjectIdentifier, at version: UInt64) -> Bool {
    hub.storage.withLock { _ in delivered.entries.contains { $0.identity == identity && $0.version >= version } }
  }

  @usableFromInline func observerEnded() {
    unlinkIfUnobserved()
  }
}
