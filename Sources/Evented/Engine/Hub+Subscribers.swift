// Promises 3 and 4 on the subscribers' side: adding a subscription (with its replay
// taken from the stored value at the same instant as the commits it follows), ending
// every subscription, and counting the live ones while sweeping out those whose owner
// died. Each is "lock, transition, unlock, release": the entries a step drops are
// released after unlocking (Garbage.swift).

extension Hub {
  /// Adds `entry`; if `replay` is given, first delivers its message to `entry` alone,
  /// taken from the stored value at the same instant. Inside the calling thread's
  /// transaction, a source it wrote replays the state from before the transaction,
  /// the one every other thread reads, which the transaction's commit follows: so the
  /// subscription receives the transaction's change once.
  @inlinable
  func subscribe(_ entry: Entry<Message>, replay: ((borrowing Stored) -> Message)? = nil) {
    var garbage = Garbage()
    let token = replay == nil ? storage.lock() : lockForCommit()
    token.state.pointee.subscribe(entry, into: &garbage, keepingDeadOwners: Self.plantedKeepDeadOwners)
    if let replay {
      if let earlier = token.state.pointee.earlierOfOwnTransaction() {
        commit(token, to: .one(entry)) { _ in replay(earlier) }
      } else {
        commit(token, to: .one(entry)) { replay($0) }
      }
    } else {
      token.unlock()
    }
    garbage.dispose()
  }

  /// ``subscribe(_:replay:)`` with a replay, passing `start` the state at the instant
  /// of the replay, under the lock: for reading the version of the replayed state.
  @usableFromInline func subscribe(
    _ entry: Entry<Message>, replay: (borrowing Stored) -> Message,
    startingAt start: (inout HubState<Message, Stored>) -> Void
  ) {
    var garbage = Garbage()
    let token = lockForCommit()
    token.state.pointee.subscribe(entry, into: &garbage, keepingDeadOwners: Self.plantedKeepDeadOwners)
    start(&token.state.pointee)
    if let earlier = token.state.pointee.earlierOfOwnTransaction() {
      commit(token, to: .one(entry)) { _ in replay(earlier) }
    } else {
      commit(token, to: .one(entry)) { replay($0) }
    }
    garbage.dispose()
  }

  /// Adds `entry` and passes `start` the state at that instant, under the lock, before
  /// any delivery can reach `entry`: for reading the version the first commit that
  /// `entry` receives follows.
  @usableFromInline func subscribe(_ entry: Entry<Message>, startingAt start: (inout HubState<Message, Stored>) -> Void)
  {
    var garbage = Garbage()
    let token = storage.lock()
    token.state.pointee.subscribe(entry, into: &garbage, keepingDeadOwners: Self.plantedKeepDeadOwners)
    start(&token.state.pointee)
    token.unlock()
    garbage.dispose()
  }

  /// Ends and removes every subscription (but, if `keepingTracking`, the ones no user
  /// made: Observation's and the links of derived values, `outlivesRemoveAll`);
  /// also ends, and waits for, those that a concurrent call removed and has not
  /// finished ending.
  func removeAll(keepingTracking: Bool = true) {
    var garbage = Garbage()
    let ticket = storage.withLock { $0.subscribers.removeAll(into: &garbage, keepingTracking: keepingTracking) }
    garbage.dispose()
    var finished = Garbage()
    storage.withLock { $0.subscribers.finishRemoval(ticket, into: &finished) }
    _ = finished
  }

  /// Moves the incremental scan for dead owners on by two slots. A derived value calls
  /// it when it skips an update (a duplicate, a filtered-out event), so that observers
  /// whose owner died are found, and the derived value freed, even when it never
  /// delivers again.
  @usableFromInline func scanForDeadOwners() {
    var garbage = Garbage()
    storage.withLock { state in
      guard let core = state.core, !core.pointee.subscribers.slots.isEmpty else { return }
      core.pointee.subscribers.scanNext(into: &garbage, keepingDeadOwners: Self.plantedKeepDeadOwners)
    }
    garbage.dispose()
  }

  /// Whether the source has a subscription that has not ended and whose owner is
  /// alive. Releases nothing, so it may be called under another source's lock.
  ///
  /// - Complexity: O(n) in the number of subscriptions, stopping at the first live one.
  @inlinable var hasLiveSubscribers: Bool {
    // Asked by a sweep of another source from inside this one's locked section (its
    // `==` counting the observers of a value of the same root): taken as yes, so the
    // sweep keeps what it cannot look at.
    if storage.isHeldByCurrentThread { return true }
    // The owner found alive is returned, so that the reference this takes to it is
    // dropped after unlocking (it may be the last one by then).
    let (found, owner) = storage.withLock { state -> (Bool, AnyObject?) in
      guard let core = state.core else { return (false, nil) }
      for case let entry? in core.pointee.subscribers.slots where !entry.isEnded {
        if entry.isOwnedByHandle { return (true, nil) }
        if let owner = entry.checkedOwner { return (true, owner) }
      }
      return (false, nil)
    }
    _ = owner
    return found
  }

  /// The number of subscriptions whose owner is alive, after sweeping the others out.
  ///
  /// - Complexity: O(n) in the number of subscriptions.
  var liveCount: Int {
    // A sweep that frees a following node (FollowerEntry.swift) ends its subscription
    // only after unlocking: then the count is taken once more, without it.
    var garbage = Garbage()
    let count = sweptCount(into: &garbage)
    guard garbage.dispose() else { return count }
    var more = Garbage()
    let recount = sweptCount(into: &more)
    more.dispose()
    return recount
  }

  /// Sweeps out the subscriptions that ended or whose owner is gone, into `garbage`,
  /// and counts the others.
  func sweptCount(into garbage: inout Garbage) -> Int {
    storage.withLock { state -> Int in
      guard let core = state.core else { return 0 }
      let endedAndRunning = core.pointee.subscribers.sweep(
        into: &garbage, keepingDeadOwners: Self.plantedKeepDeadOwners)
      return core.pointee.subscribers.live - endedAndRunning
    }
  }

  // MARK: Planted bugs (none unless built with the FaultInjection trait)

  @inlinable static var plantedKeepDeadOwners: Bool {
    #if FaultInjection
      Planted.keepDeadOwners
    #else
      false
    #endif
  }
}
