// How the public `observe` variants become entries in a hub.
//
// The ownership rule: a subscription lives as long as its owner. With an owner, the
// entry holds it weakly and passes it strongly to the handler; without one, the
// returned `Subscription` handle owns it: the entry is alive until it ends, and the
// handle's deinit ends it. A handler never runs once its owner's deinit has begun.
//
// A derived source (a `map`, a `combineLatest`, …) is kept alive by its observers: its
// node is passed as `anchor`, which the handler captures, so the node lives as long as
// one of its subscriptions does (and the node keeps its own sources alive in turn).
// Without an anchor the user's closure is stored as given, and nothing but its own
// captures is retained.
//
// These paths are inlinable, so that subscribing is specialized for the message type
// in the caller's module.

extension Hub {
  /// Adds `entry`, replaying the current value first if `replay` is given, and returns
  /// its handle.
  @inlinable
  func attach(_ entry: Entry<Message>, replay: ((borrowing Stored) -> Message)?) -> Subscription {
    let subscription = Subscription(core: entry)
    subscribe(entry, replay: replay)
    return subscription
  }

  /// Subscribes a handler owned by `owner`.
  @inlinable
  func observe<Owner: AnyObject & Sendable>(
    owner: Owner,
    target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil,
    _ handler: @escaping @Sendable (Owner, Message) -> Void
  ) -> Subscription {
    let entry: OwnedEntry<Owner, Message>
    if let anchor {
      entry = OwnedEntry(owner: owner, isOnce: isOnce, target: target) { owner, message in
        withExtendedLifetime(anchor) { handler(owner, message) }
      }
    } else {
      entry = OwnedEntry(owner: owner, isOnce: isOnce, target: target, handler: handler)
    }
    return attach(entry, replay: replay)
  }

  /// Subscribes a handler owned by the returned handle.
  @inlinable
  func observe(
    target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil,
    _ handler: @escaping @Sendable (Message) -> Void
  ) -> Subscription {
    let entry: HandleEntry<Message>
    if let anchor {
      entry = HandleEntry(isOnce: isOnce, target: target) { message in
        withExtendedLifetime(anchor) { handler(message) }
      }
    } else {
      entry = HandleEntry(isOnce: isOnce, target: target, handler: handler)
    }
    return attach(entry, replay: replay)
  }

  /// Subscribes a handler of a property's new values, owned by `owner`.
  @inlinable
  func observeValues<Owner: AnyObject & Sendable, Value: Sendable>(
    owner: Owner,
    target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil,
    _ handler: @escaping @Sendable (Owner, Value) -> Void
  ) -> Subscription where Message == Update<Value> {
    let entry: OwnedValueEntry<Owner, Value>
    if let anchor {
      entry = OwnedValueEntry(owner: owner, isOnce: isOnce, target: target) { owner, value in
        withExtendedLifetime(anchor) { handler(owner, value) }
      }
    } else {
      entry = OwnedValueEntry(owner: owner, isOnce: isOnce, target: target, handler: handler)
    }
    return attach(entry, replay: replay)
  }

  /// Subscribes a handler of a property's new values, owned by the returned handle.
  @inlinable
  func observeValues<Value: Sendable>(
    target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil,
    _ handler: @escaping @Sendable (Value) -> Void
  ) -> Subscription where Message == Update<Value> {
    let entry: HandleValueEntry<Value>
    if let anchor {
      entry = HandleValueEntry(isOnce: isOnce, target: target) { value in
        withExtendedLifetime(anchor) { handler(value) }
      }
    } else {
      entry = HandleValueEntry(isOnce: isOnce, target: target, handler: handler)
    }
    return attach(entry, replay: replay)
  }

  /// Subscribes a main-actor handler owned by `owner`, delivered on the main queue.
  func observeOnMain<Owner: AnyObject & Sendable>(
    owner: Owner,
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil,
    _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
  ) -> Subscription {
    observe(owner: owner, target: .main, isOnce: isOnce, replay: replay, anchor: anchor) { owner, message in
      // The handler runs on the main queue, so the main actor is the current isolation.
      MainActor.assumeIsolated { handler(owner, message) }
    }
  }

  /// Subscribes a main-actor handler owned by the returned handle.
  func observeOnMain(
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil,
    _ handler: @escaping @MainActor @Sendable (Message) -> Void
  ) -> Subscription {
    observe(target: .main, isOnce: isOnce, replay: replay, anchor: anchor) { message in
      MainActor.assumeIsolated { handler(message) }
    }
  }
}
