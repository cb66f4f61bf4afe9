// How the public `observe` variants become entries in a hub: one builder, which every
// public overload of the lock-based types calls in one line.
//
// An overload says three things: who owns the subscription and what the handler takes
// (`Observer`: an owner passed to the handler, or the returned handle), which part of
// each message the handler receives (`Reading`: the message itself, a property's new
// value, or a part computed from the message), and the options (where it runs, once
// only, the replay of the current value, the anchor of a derived source).
//
// The ownership rule: a subscription lives as long as its owner. With an owner, the
// entry holds it weakly and passes it strongly to the handler; without one, the
// returned `Subscription` handle owns it: the entry is alive until it ends, and the
// handle's deinit ends it. A handler never runs once its owner's deinit has begun.
//
// A derived source (a `map`, a `combineLatest`, …) is kept alive by its observers: its
// node is passed as `anchor`, which the handler captures, so the node lives as long as
// one of its subscriptions does (and the node keeps its own sources alive in turn).
//
// Speed: for the message itself and for a property's new value, the builder stores the
// user's closure as given (`OwnedEntry`, `HandleEntry`, `OwnedValueEntry`,
// `HandleValueEntry`), so a delivery calls it directly; only a computed part, an anchor
// or a main-actor handler adds a closure around it. These paths are inlinable, so that
// subscribing is specialized for the message type in the caller's module, where the
// choice of entry folds away.

/// Who owns a new subscription, and the handler it calls with each input.
@usableFromInline
enum Observer<Owner: AnyObject & Sendable, Input: Sendable>: Sendable {
  /// Owned by `owner`, held weakly and passed strongly to the handler.
  case owned(Owner, @Sendable (Owner, Input) -> Void)
  /// Owned by the returned handle (`Owner` is unused); the handler takes the input
  /// alone. Made with `handle(_:)`.
  case ownedByHandle(@Sendable (Input) -> Void)

  /// The same observer, keeping `anchor` alive as long as its handler.
  @inlinable
  func anchored(to anchor: (any AnyObject & Sendable)?) -> Self {
    guard let anchor else { return self }
    switch self {
    case .owned(let owner, let handler):
      return .owned(owner) { owner, input in withExtendedLifetime(anchor) { handler(owner, input) } }
    case .ownedByHandle(let handler):
      return .ownedByHandle { input in withExtendedLifetime(anchor) { handler(input) } }
    }
  }
}

extension Observer where Owner == Subscription {
  /// Owned by the returned handle; the handler takes the input alone.
  @inlinable
  static func handle(_ handler: @escaping @Sendable (Input) -> Void) -> Self {
    .ownedByHandle(handler)
  }
}

extension Observer {
  /// An observer that runs a main-actor handler owned by `owner`; deliver it on the main
  /// queue.
  static func onMain(_ owner: Owner, _ handler: @escaping @MainActor @Sendable (Owner, Input) -> Void) -> Self {
    // The handler runs on the main queue, so the main actor is the current isolation.
    .owned(owner) { owner, input in MainActor.assumeIsolated { handler(owner, input) } }
  }
}

extension Observer where Owner == Subscription {
  /// An observer that runs a main-actor handler owned by the returned handle; deliver it
  /// on the main queue.
  static func onMain(_ handler: @escaping @MainActor @Sendable (Input) -> Void) -> Self {
    .ownedByHandle { input in MainActor.assumeIsolated { handler(input) } }
  }
}

/// Which part of each message a handler receives.
@usableFromInline
struct Reading<Message, Input>: Sendable {
  @usableFromInline
  enum Kind: Sendable {
    /// The message itself (`Input == Message`).
    case message
    /// A property's new value (`Message == Update<Input>`).
    case newValue
    /// A part computed from the message; nil skips the message.
    case part(@Sendable (Message) -> Input?)
  }

  @usableFromInline let kind: Kind

  @inlinable init(_ kind: Kind) {
    self.kind = kind
  }

  /// A part computed from each message; a message for which `read` returns nil is not
  /// delivered.
  @inlinable
  static func part(_ read: @escaping @Sendable (Message) -> Input?) -> Self {
    Self(.part(read))
  }
}

extension Reading where Input == Message {
  /// The message itself.
  @inlinable static var message: Self { Self(.message) }
}

extension Reading where Message == Update<Input> {
  /// A property's new value.
  @inlinable static var newValue: Self { Self(.newValue) }
}

extension Hub {
  /// Subscribes `observer` to the part of each message that `reading` selects, and
  /// returns the handle of the subscription.
  ///
  /// - Parameters:
  ///   - observer: The owner and the handler.
  ///   - reading: What the handler receives of each message.
  ///   - target: Where the handler runs; nil runs it inline on the delivering thread.
  ///   - isOnce: Whether the subscription ends just before its first invocation.
  ///   - replay: Builds the first message from the current value, for a replay.
  ///   - anchor: What the handler keeps alive (a derived source's node), or nil.
  @inlinable
  func observe<Owner: AnyObject & Sendable, Input: Sendable>(
    _ observer: Observer<Owner, Input>,
    reading: Reading<Message, Input>,
    on target: DeliveryTarget?,
    isOnce: Bool = false,
    replay: ((borrowing Stored) -> Message)? = nil,
    anchor: (any AnyObject & Sendable)? = nil
  ) -> Subscription {
    let entry: Entry<Message>
    switch (observer.anchored(to: anchor), reading.kind) {
    case (.owned(let owner, let handler), .message):
      // `Input == Message`, so the closure's type is the entry's, as given.
      let handler = unsafeBitCast(handler, to: (@Sendable (Owner, Message) -> Void).self)
      entry = OwnedEntry(owner: owner, isOnce: isOnce, target: target, handler: handler)
    case (.ownedByHandle(let handler), .message):
      let handler = unsafeBitCast(handler, to: (@Sendable (Message) -> Void).self)
      entry = HandleEntry(isOnce: isOnce, target: target, handler: handler)
    case (.owned(let owner, let handler), .newValue):
      // `Message == Update<Input>`, so the value entry is an `Entry<Message>`.
      let valueEntry = OwnedValueEntry(owner: owner, isOnce: isOnce, target: target, handler: handler)
      entry = unsafeDowncast(valueEntry, to: Entry<Message>.self)
    case (.ownedByHandle(let handler), .newValue):
      let valueEntry = HandleValueEntry(isOnce: isOnce, target: target, handler: handler)
      entry = unsafeDowncast(valueEntry, to: Entry<Message>.self)
    case (.owned(let owner, let handler), .part(let read)):
      entry = OwnedEntry(owner: owner, isOnce: isOnce, target: target) { owner, message in
        if let input = read(message) { handler(owner, input) }
      }
    case (.ownedByHandle(let handler), .part(let read)):
      entry = HandleEntry(isOnce: isOnce, target: target) { message in
        if let input = read(message) { handler(input) }
      }
    }
    let subscription = Subscription(core: entry)
    subscribe(entry, replay: replay)
    return subscription
  }
}
