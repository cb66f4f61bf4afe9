// How a following node (`flatMapLatest`) commits. The state it delivers is a target,
// numbered by the switch that chose it (`generation`), read at some versions of the
// target's roots (`FollowedState`); it commits a state only if it is later than the
// one it delivered last: a later switch, or later versions of the same target.
//
// Its links deliver each state of a source with its versions (`link(to:roots:keep:_:)`),
// in the source's commit order. An observer that arrives while a delivery of the
// current target waits for another thread is given the target's current state first
// (`catchUp(...)`: the value `value` reads, so the subscribing thread reads its own
// writes through the replay too), and the waiting deliveries of older states commit
// nothing after it. The catch-up never switches: while a change of the outer source
// that picks another target waits for its delivery, the new observer starts from the
// state delivered last, and the switch follows in the outer source's commit order.

import Synchronization

/// The state a following node delivered last: which switch chose its target, and at
/// which versions of the target's roots it was read.
@usableFromInline
struct FollowedState: Sendable {
  /// The number of the switch that chose the target (``DerivedProperty/generation``).
  @usableFromInline var generation: UInt
  /// The versions of the target's roots at which its value was read; empty for a
  /// missing target.
  @usableFromInline var versions: Versions

  @inlinable init(generation: UInt, versions: Versions) {
    self.generation = generation
    self.versions = versions
  }

  /// Takes `candidate` if it is a later state: of a later switch, or of the same switch
  /// at later versions of its target.
  ///
  /// - Returns: Whether `candidate` was taken, and must be committed.
  @inlinable mutating func take(_ candidate: FollowedState) -> Bool {
    if candidate.generation != generation {
      guard candidate.generation > generation else { return false }
      self = candidate
      return true
    }
    guard candidate.versions.isLater(than: versions) else { return false }
    versions.assign(candidate.versions)
    return true
  }
}

extension ReadOnlyProperty {
  /// The value now and the versions of `roots` (this value's ``roots``, made once by the
  /// caller) it was read at, as `reader` sees them.
  @inlinable func pinned(roots: [any Root], as reader: Snapshot.Reader) -> (Value, Versions) {
    Snapshot.consistent(of: roots, as: reader) { evaluate(in: $0) }
  }

  /// What a link to this derived value reads at each of its deliveries: a computed
  /// value's state committed last, with the versions of its roots it was computed at.
  /// Not the roots' latest state: a value of several roots refreshes from their latest
  /// state, and a change back to the state it committed is no commit, so a link that
  /// had read ahead of it would never be delivered that change. A following value's
  /// one root is its hub, read as ``pinned(roots:as:)``.
  @inlinable func committedState(roots: [any Root], as reader: Snapshot.Reader) -> (Value, Versions) {
    guard let node = derived, node.body != nil else { return pinned(roots: roots, as: reader) }
    return node.hub.storage.withLock { ($0.stored, node.delivered) }
  }
}

extension DerivedProperty {
  /// Whose view of the sources a following node reads: inside a transaction, the state
  /// other threads see (its observers never hold part of a transaction).
  @inlinable static var followReader: Snapshot.Reader { isInTransaction ? .outsider : .calling }

  /// Commits `value`, the state `state`, if it is later than the state delivered last
  /// and, for a target's update, `generation` still names the current target; unless
  /// it equals the stored value.
  @inlinable func publish(_ value: Value, at state: FollowedState, generation expected: UInt?) {
    let token = hub.lockForCommit()
    if let expected, generation.load(ordering: .acquiring) != expected { return token.unlock() }
    if followed == nil {
      followed = state
    } else if !followed!.take(state) {
      return token.unlock()
    }
    // As a computed node's commit: merged into the newest waiting update while another
    // thread delivers the earlier ones, so that the node holds O(1) undelivered states
    // however fast its sources change (values built on this one read its version with
    // its value, never count its updates); a full queue observer makes the delivering
    // thread wait for room once its delivery frame ends.
    commitState(token, value, inPass: false)
  }

  /// The pairs of positions (in the target's roots, in the outer source's roots) of the
  /// roots that both read: a target state is consistent with the choice of its target
  /// only if it read none of them at a later version than the choice did.
  @inlinable static func sharedRoots(_ target: [any Root], _ outer: [ObjectIdentifier]) -> [(Int, Int)] {
    var shared: [(Int, Int)] = []
    for (position, root) in target.enumerated() {
      if let other = outer.firstIndex(of: root.identity) { shared.append((position, other)) }
    }
    return shared
  }

  /// Whether the target state at `versions` read each root of `shared` at no later
  /// version than the choice of the target did (``LinkState/chosenAt``), or with
  /// `exactly`, at the same version: if not, the outer source committed since, and its
  /// delivery, still to come, decides whether the target stays (then it publishes the
  /// target's state again) or another one follows.
  ///
  /// A property outer source's link receives every commit of its one root, so a state
  /// read before the choice was read while the target was chosen. A computed outer
  /// source's link reads its latest state and skips a commit that leaves it equal: it
  /// may have picked another target in between (a target's delivery can lag behind
  /// it), and a later commit may never reach it as a choice. Its updates are published
  /// only at the choice's versions; others are checked again at once
  /// (``recheckHeld(generation:roots:recheck:wrap:)``).
  @inlinable func agreesWithChoice(_ versions: Versions, shared: [(Int, Int)], exactly: Bool) -> Bool {
    links.withLock { state in
      guard let chosen = state.chosenAt else { return true }
      if exactly { return shared.allSatisfy { versions.version(at: $0.0) == chosen.version(at: $0.1) } }
      return !shared.contains { versions.version(at: $0.0) > chosen.version(at: $0.1) }
    }
  }

  /// Subscribes the node to `source`, starting with its current state: `receive` gets
  /// each state with the versions of `roots` (the source's ``ReadOnlyProperty/roots``,
  /// made once) it is at. `keep` records the subscription before it is made.
  ///
  /// A property delivers every commit, each with its version, counted from the
  /// replay's. A derived source's link reads its state committed last instead
  /// (``ReadOnlyProperty/committedState(roots:as:)``): its own states merge when its
  /// deliveries back up, so its commits cannot be counted.
  ///
  /// `receive` runs for every update of `source`, one at a time, in commit order, on
  /// the thread that delivers for `source`, with no lock held.
  @inlinable func link<Source>(
    to source: ReadOnlyProperty<Source>, roots: [any Root], keep: (SubscriptionCore) -> Void,
    _ receive: @escaping @Sendable (DerivedProperty<Value>, Source, Versions) -> Void
  ) {
    let lazyToken = source.hub.lazyHooks?.token()  // counts this link as an observer of a lazy source
    if let derived = source.derived {
      // Released with the link's handler when the link ends (a switch away from this
      // target, or this node's end): the source then stops following its roots if
      // nobody else observes it, as it does at an observer's `cancel()`.
      let anchor = ObserverAnchor(derived)
      let entry = FollowerEntry<Update<Source>>(node: self) { owner, _ in
        withExtendedLifetime((lazyToken, anchor)) {
          let (value, versions) = source.committedState(roots: roots, as: Self.followReader)
          receive(unsafeDowncast(owner, to: DerivedProperty<Value>.self), value, versions)
        }
      }
      keep(entry)
      source.derived?.willObserve()
      source.hub.subscribe(entry, replay: replayCurrent)
      source.derived?.didObserve()
      return
    }
    // Every commit after the replay bumps the version by one and reaches this link, in
    // commit order.
    let version = Atomic<UInt64>(0)
    let entry = FollowerEntry<Update<Source>>(node: self) { owner, update in
      withExtendedLifetime(lazyToken) {
        let committed =
          update.isInitial ? version.load(ordering: .relaxed) : version.add(1, ordering: .relaxed).newValue
        receive(unsafeDowncast(owner, to: DerivedProperty<Value>.self), update.new, Versions(single: committed))
      }
    }
    keep(entry)
    source.derived?.willObserve()
    source.hub.subscribe(entry, replay: replayCurrent) { version.store($0.version, ordering: .relaxed) }
    source.derived?.didObserve()
  }

  /// Follows `target` from now on (`flatMapLatest`): detaches from the previous target,
  /// then attaches to this one and commits its current value, transformed by `wrap`.
  /// A nil target commits `missing`. `outer` are the versions of the outer source's
  /// roots at which `target` was chosen, `outerRoots` the identities of those roots.
  /// `recheck`, given for a computed outer source, reads a target's state in one
  /// snapshot with the outer source if the outer source still makes the same choice
  /// there (``pinned(_:roots:chosenAt:pickedBy:roots:picks:)``); `chosenValue` is the
  /// outer value that chose `target`, kept for it when the outer value is `Equatable`.
  ///
  /// Called only from the outer source's handler, so never concurrently with itself.
  @inlinable func follow<Inner>(
    _ target: ReadOnlyProperty<Inner>?,
    chosenAt outer: Versions,
    chosenValue: (any Sendable)?,
    outerRoots: [ObjectIdentifier],
    missing: Value?,
    recheck: Recheck<Inner>?,
    wrap: @escaping @Sendable (Inner) -> Value
  ) {
    let id = target.map { ObjectIdentifier($0.hub.storage) }
    // The outer value that chose the previous target, swapped out under the lock and
    // released after it: its deinit may run user code.
    var replacedValue = chosenValue
    let previous = links.withLock { state -> (SubscriptionCore?, (any Sendable)?)? in
      if state.isSwitched, state.targetID == id {
        state.chosenAt = outer
        swap(&state.chosenValue, &replacedValue)
        return nil
      }
      let previous = (state.inner, state.target)
      state.inner = nil
      state.target = nil
      state.targetID = nil
      state.sharedRoots = []
      state.isSwitched = true
      replacedValue = state.chosenValue.take()
      return previous
    }
    replacedValue = nil
    guard let previous else {
      // The same target, chosen again: if it reads a root of the outer source, its
      // updates of this commit may have been held back until now (agreesWithChoice).
      if let target { republish(target, wrap: wrap) }
      return
    }
    let current = generation.add(1, ordering: .acquiringAndReleasing).newValue
    // Detach first, so that the old target's observerCount has dropped before the new
    // target's value is delivered.
    previous.0?.endSwept()
    _ = previous.1
    guard let target else {
      if let missing {
        publish(missing, at: FollowedState(generation: current, versions: Versions([])), generation: current)
      }
      return
    }
    let roots = target.roots
    let shared = Self.sharedRoots(roots, outerRoots)
    let keep = { (entry: SubscriptionCore) in
      self.links.withLock { state in
        state.inner = entry
        state.target = target
        state.targetID = id
        state.targetGeneration = current
        state.chosenAt = outer
        state.chosenValue = chosenValue
        state.sharedRoots = shared
      }
    }
    link(to: target, roots: roots, keep: keep) { node, value, versions in
      if !shared.isEmpty, !node.agreesWithChoice(versions, shared: shared, exactly: recheck != nil) {
        // A property outer source delivers this commit too, and its delivery decides
        // (`republish`). A computed one may skip it, or have skipped past it: read the
        // outer source and the target together now instead.
        guard let recheck else { return }
        return node.recheckHeld(generation: current, roots: roots, recheck: recheck, wrap: wrap)
      }
      node.publish(wrap(value), at: FollowedState(generation: current, versions: versions), generation: current)
    }
  }

  /// A computed outer source's check of a held-back target update: the target's value
  /// and the versions of its roots (given), read in one snapshot with the outer source,
  /// if the outer source makes the same choice there as at the versions given (its
  /// value then, if kept); nil if it does not.
  @usableFromInline typealias Recheck<Inner> =
    @Sendable (ReadOnlyProperty<Inner>, [any Root], Versions, (any Sendable)?) -> (Inner, Versions)?

  /// For a target's update held back by ``agreesWithChoice(_:shared:exactly:)`` under a computed
  /// outer source: publishes the target's state read in one snapshot with the outer
  /// source, if the outer source still makes the choice of switch `current` there. If
  /// not, the outer value differs from the one its link read last, so the link has a
  /// delivery still to come, which switches or publishes the target again.
  @inlinable func recheckHeld<Inner>(
    generation current: UInt, roots: [any Root], recheck: Recheck<Inner>, wrap: (Inner) -> Value
  ) {
    let held = links.withLock { state -> (ReadOnlyProperty<Inner>, Versions, (any Sendable)?)? in
      guard state.targetGeneration == current, let target = state.target as? ReadOnlyProperty<Inner>,
        let chosenAt = state.chosenAt
      else { return nil }
      return (target, chosenAt, state.chosenValue)
    }
    guard let (target, chosenAt, chosenValue) = held,
      let (value, versions) = recheck(target, roots, chosenAt, chosenValue)
    else { return }
    publish(wrap(value), at: FollowedState(generation: current, versions: versions), generation: current)
  }

  /// Publishes the current state of `target`, chosen again by a commit of the outer
  /// source, if the target reads a root of the outer source and its state agrees with
  /// that choice. Called only from the outer source's handler.
  @inlinable func republish<Inner>(_ target: ReadOnlyProperty<Inner>, wrap: (Inner) -> Value) {
    let (shared, current) = links.withLock { ($0.sharedRoots, $0.targetGeneration) }
    guard !shared.isEmpty else { return }
    let (value, versions) = target.pinned(roots: target.roots, as: Self.followReader)
    // Read after the choice: no earlier than it, so "no later" means "the same".
    guard agreesWithChoice(versions, shared: shared, exactly: false) else { return }
    publish(wrap(value), at: FollowedState(generation: current, versions: versions), generation: current)
  }

  /// Commits the current state of the target that a following node follows, the one
  /// ``value`` reads, before an observer subscribes (``willObserve()``), so that its
  /// replay is current even while the target's deliveries wait for another thread.
  /// `outerRoots` are the outer source's roots, made once.
  ///
  /// Never switches: if the outer source has moved since the links chose their target
  /// and now picks another one, the switch is the outer source's delivery's to make,
  /// in its commit order (detaching the old target first), and this commits nothing.
  @inlinable func catchUp<Outer, Inner>(
    outer: ReadOnlyProperty<Outer>, roots outerRoots: [any Root],
    select: (Outer) -> ReadOnlyProperty<Inner>?, wrap: (Inner) -> Value
  ) {
    let followed = links.withLock { state -> (ReadOnlyProperty<Inner>, UInt, Versions)? in
      guard let target = state.target as? ReadOnlyProperty<Inner>, let chosenAt = state.chosenAt else { return nil }
      return (target, state.targetGeneration, chosenAt)
    }
    guard let (target, current, chosenAt) = followed else { return }
    // A following source is read from its hub: bring those up to date first.
    outer.derived?.catchingUp?(outer.derived.unsafelyUnwrapped)
    target.derived?.catchingUp?(target.derived.unsafelyUnwrapped)
    let found = Self.pinned(target, roots: target.roots, chosenAt: chosenAt, pickedBy: outer, roots: outerRoots) {
      select($0)?.hub.storage === target.hub.storage
    }
    guard let (value, versions) = found else { return }
    publish(wrap(value), at: FollowedState(generation: current, versions: versions), generation: current)
  }

  /// The value of `target` and the versions of its roots `targetRoots`, read in one
  /// consistent snapshot with the outer source (they may share roots), if the outer
  /// source still picks `target` there: unchanged since `chosenAt` (the versions of its
  /// roots `outerRoots` at which it chose `target`), or its value there `picks` it.
  @inlinable static func pinned<Outer, Inner>(
    _ target: ReadOnlyProperty<Inner>, roots targetRoots: [any Root], chosenAt: Versions,
    pickedBy outer: ReadOnlyProperty<Outer>, roots outerRoots: [any Root],
    picks: (Outer) -> Bool
  ) -> (Inner, Versions)? {
    Snapshot.consistent(of: outerRoots, as: followReader) { snapshot -> (Inner, Versions)? in
      let outerValue = outer.evaluate(in: snapshot)
      if snapshot.versions(of: outerRoots) != chosenAt, !picks(outerValue) { return nil }
      let value = target.evaluate(in: snapshot)
      return (value, snapshot.versions(of: targetRoots))
    }.0
  }
}
