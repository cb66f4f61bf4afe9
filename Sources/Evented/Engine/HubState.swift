// Promise 1 (thread safety): everything a lock-based source keeps under its one lock,
// as a plain value: the stored value, the subscribers (SubscriberList.swift) and the
// delivery queue (DeliveryQueue.swift). The hub (Hub.swift) locks, calls a transition
// here, unlocks, then carries out what the transition returned.

/// The state of one source, guarded by its hub's lock.
@usableFromInline
struct HubState<Message: Sendable, Stored> {
  /// The source's value (`Void` for an event source).
  @usableFromInline var stored: Stored
  /// The subscriptions, in subscription order.
  @usableFromInline var subscribers = SubscriberList<Message>()
  /// The delivering role and the deliveries that wait for it.
  @usableFromInline var queue: DeliveryQueue<Message>

  @usableFromInline init(stored: Stored, backlogLimit: Int) {
    self.stored = stored
    queue = DeliveryQueue(backlogLimit: backlogLimit)
  }

  /// The recipients of a commit now: every current subscription; nil if there is none.
  @inlinable mutating func recipientsOfCommit() -> Recipients<Message>? {
    guard subscribers.live > 0 else { return nil }
    return .all(subscribers.currentSnapshot())
  }

  /// Adds `entry`.
  @inlinable mutating func subscribe(
    _ entry: Entry<Message>, into garbage: inout Garbage<Message>, keepingDeadOwners: Bool
  ) {
    subscribers.add(entry, into: &garbage, keepingDeadOwners: keepingDeadOwners)
  }

  /// The next queued delivery; nil after stopping or handing the role over.
  ///
  /// - Returns: the delivery, and the room to wake, if any.
  @inlinable @inline(__always)
  mutating func takeNext(newestFirst: Bool) -> (Parcel<Message>?, wake: Condition?) {
    let next = queue.next(newestFirst: newestFirst)
    return (next, queue.roomToWake)
  }

  /// ``takeNext(newestFirst:)`` after a delivery that met an ended or ownerless
  /// subscription: first removes the subscriptions that ended.
  @inlinable mutating func sweepAndTakeNext(
    into garbage: inout Garbage<Message>, newestFirst: Bool
  ) -> (Parcel<Message>?, wake: Condition?) {
    subscribers.removeEnded(into: &garbage)
    return takeNext(newestFirst: newestFirst)
  }
}
