// The subscriptions of one actor variant's stream of messages, kept in the actor's own
// isolated state: no lock of their own.
//
// A sink is either a sequence's buffer (`events`, `values`), held weakly so that
// dropping the sequence ends it, or a handler subscription, held strongly (its handle
// and owner decide when it ends). Ended sinks are dropped in three ways: by a send that
// finds them ended, by `observerCount` (a full sweep), and by every subscribe, which
// checks the next two sinks in turn (and sweeps fully when the list reaches a power of
// two from 32 on), so a dead owner is found within half as many subscribes as there
// are subscriptions, even without a send.
//
// The handler subscriptions share the source's `ActorBacklog` (made with the first
// one), where senders wait while one of them is at the limit (ActorBacklog.swift).

/// One subscription of an actor variant: a sequence's buffer or a handler.
@usableFromInline
struct ActorSink<Message: Sendable>: Sendable {
  /// The buffer of a sequence; nil for a handler, or once the sequence is dropped.
  weak let stream: AsyncBuffer<Message>?
  /// The handler subscription; nil for a sequence.
  @usableFromInline let handler: ActorHandler<Message>?

  init(stream: AsyncBuffer<Message>) {
    self.stream = stream
    self.handler = nil
  }

  @usableFromInline
  init(handler: ActorHandler<Message>) {
    self.stream = nil
    self.handler = handler
  }

  /// Passes `message` on.
  ///
  /// - Returns: false if the subscription is over and should be removed.
  @inlinable @inline(__always)
  func push(_ message: Message) -> Bool {
    if let handler { return handler.push(message) }
    return pushToStream(message)
  }

  @usableFromInline
  func pushToStream(_ message: Message) -> Bool {
    guard let stream else { return false }
    return stream.push(message)
  }

  /// Whether the subscription is live: a handler not ended and with its owner alive, a
  /// sequence still iterated.
  @usableFromInline
  var isOpen: Bool {
    if let handler { return handler.isLive }
    guard let stream else { return false }
    return stream.isOpen
  }

  /// Ends the subscription: a sequence's consumer gets nil, a handler is not started
  /// again, and what it captured is released.
  @usableFromInline
  func end() {
    if let handler {
      handler.endAndRelease()
    } else {
      stream?.end()
    }
  }

  /// Removed by `removeAllObservers()`: a handler ends as by ``end()``; a sequence
  /// takes nothing more but hands out what it buffered before it finishes, as a
  /// lock-based source's sequence does.
  func remove() {
    if let handler {
      handler.endAndRelease()
    } else {
      stream?.sourceEnded()
    }
  }

  /// Tells the subscription that its source is gone.
  func sourceEnded() {
    if let handler {
      handler.sourceEnded()
    } else {
      stream?.sourceEnded()
    }
  }
}

/// The subscriptions of one actor variant's stream of messages, in subscription order.
@usableFromInline
struct ActorSinks<Message: Sendable>: Sendable {
  @usableFromInline var items = ContiguousArray<ActorSink<Message>>()
  /// Where the incremental scan for ended subscriptions continues.
  @usableFromInline var cursor = 0
  /// The waiting senders and the limit. With the default limit, nil until the first
  /// handler subscription, so that an idle source pays one reference for the bound.
  @usableFromInline var backlog: ActorBacklog?

  /// - Parameter limit: The most undelivered messages a handler subscription holds
  ///   from senders that wait.
  init(limit: Int = defaultBacklogLimit) {
    if limit != defaultBacklogLimit { backlog = ActorBacklog(limit: limit) }
  }

  /// The waiting senders of this source, for a new handler subscription.
  @usableFromInline
  mutating func backlogForHandler() -> ActorBacklog {
    if let backlog { return backlog }
    let made = ActorBacklog(limit: defaultBacklogLimit)
    backlog = made
    return made
  }

  /// Whether a live handler subscription has `limit` undelivered messages or more
  /// (`times` the limit).
  ///
  /// `mutating` only so that the actor's list is read in place rather than copied (a
  /// retain and a release per send).
  ///
  /// - Complexity: O(n) in the number of subscriptions, once a handler subscribed
  ///   (from the start with a limit other than the default); O(1) before.
  @inlinable
  mutating func hasHandlerAtLimit(times: Int = 1) -> Bool {
    guard let limit = backlog.map({ $0.limit &* times }) else { return false }
    for index in items.indices {
      if let handler = items[index].handler, handler.isAtLimit(limit) { return true }
    }
    return false
  }

  /// A live handler subscription with `limit` undelivered messages or more, if any.
  ///
  /// - Complexity: O(n) in the number of subscriptions, once a handler subscribed.
  @inlinable
  func firstAtLimit() -> ActorHandler<Message>? {
    guard let limit = backlog?.limit else { return nil }
    for index in items.indices {
      if let handler = items[index].handler, handler.isAtLimit(limit) { return handler }
    }
    return nil
  }

  @inlinable var count: Int { items.count }

  /// Delivers `message` to every subscription, dropping those found ended.
  ///
  /// - Complexity: O(n) in the number of subscriptions.
  @inlinable
  mutating func push(_ message: Message) {
    // Sinks are used in place, not copied (a copy would retain the weak and the strong
    // reference); the ended ones move to the end and are removed there.
    var kept = 0
    let count = items.count
    for index in 0..<count {
      if items[index].push(message) {
        if kept != index { items.swapAt(kept, index) }
        kept &+= 1
      } else {
        items[index].end()
      }
    }
    if kept != count { items.removeLast(count &- kept) }
  }

  /// Adds a subscription at the end.
  @inlinable
  mutating func append(_ sink: ActorSink<Message>) {
    items.append(sink)
  }

  /// Checks the next two subscriptions from the cursor (wrapping around), removing and
  /// finishing those that ended, so that their handlers' captures are released.
  @inlinable
  mutating func scanNext() {
    for _ in 0..<2 {
      guard !items.isEmpty else { return }
      if cursor >= items.count { cursor = 0 }
      if items[cursor].isOpen {
        cursor += 1
      } else {
        items.remove(at: cursor).end()
      }
    }
  }

  /// Removes and finishes every subscription that ended.
  ///
  /// - Complexity: O(n).
  @usableFromInline
  mutating func sweep() {
    var kept = ContiguousArray<ActorSink<Message>>()
    kept.reserveCapacity(items.count)
    for sink in items {
      if sink.isOpen {
        kept.append(sink)
      } else {
        sink.end()
      }
    }
    items = kept
  }

  /// Ends every subscription.
  mutating func endAll() {
    let removed = items
    items = []
    cursor = 0
    for sink in removed { sink.remove() }
  }

  /// Tells every subscription that the source is gone.
  func sourceEnded() {
    for sink in items { sink.sourceEnded() }
  }

  /// Whether a subscription list of `count` should be swept in full before growing:
  /// at every power of two from 32 on, so that sweeping costs O(1) per subscription.
  @inlinable
  static func shouldSweep(count: Int) -> Bool {
    count >= 32 && count.nonzeroBitCount == 1
  }
}
