// Handler subscriptions of the actor variants: each runs its handler in a task that
// takes messages from the subscription's buffer one at a time.

/// One subscription of an actor variant: its buffer, held weakly so that dropping a
/// sequence ends it, and, for a handler subscription, the core that its `Subscription`
/// handle cancels (the core keeps the buffer alive for the handler's task).
struct ActorSink<Message: Sendable>: Sendable {
  weak let buffer: AsyncBuffer<Message>?
  let core: SubscriptionCore?

  init(buffer: AsyncBuffer<Message>, core: SubscriptionCore?) {
    self.buffer = buffer
    self.core = core
  }

  /// Passes `message` on, or finishes the buffer of a subscription that has ended.
  ///
  /// - Returns: false if the subscription is over and should be removed.
  @inline(__always)
  func push(_ message: Message) -> Bool {
    guard let buffer else { return false }
    if !isLive {
      buffer.finish()
      return false
    }
    return buffer.push(message)
  }

  /// Whether the subscription's owner is alive and it was not cancelled.
  var isLive: Bool {
    guard let core else { return true }
    return !core.isEnded && core.owner != nil
  }

  /// Whether the subscription is still live and its consumer still listens.
  var isOpen: Bool {
    guard let buffer else { return false }
    return isLive && buffer.isOpen
  }

  /// Ends the subscription: the consumer gets nil, a handler is not started again.
  func finish() {
    core?.end()
    buffer?.finish()
  }

  /// Tells the consumer that the source is gone.
  func sourceEnded() {
    buffer?.sourceEnded()
  }
}

extension ContiguousArray {
  /// Checks the next two sinks from `cursor` (wrapping around) and removes those whose
  /// subscription ended or whose owner is gone, finishing them so that their handler
  /// tasks end and release what the handlers captured. Every subscribe of an actor
  /// variant calls it, so a dead owner's subscription is found within half as many
  /// subscribes as there are subscriptions, even without a send.
  mutating func scanNext<Message>(from cursor: inout Int) where Element == ActorSink<Message> {
    for _ in 0..<2 {
      guard !isEmpty else { return }
      if cursor >= count { cursor = 0 }
      if self[cursor].isOpen {
        cursor += 1
      } else {
        remove(at: cursor).finish()
      }
    }
  }
}

/// The core of an actor variant's handler subscription: `cancel()` ends the buffer,
/// which ends the task that runs the handler.
final class ActorSubscriptionCore<Message: Sendable>: SubscriptionCore, @unchecked Sendable {
  // @unchecked Sendable: as SubscriptionCore; `buffer` is immutable and guarded by its
  // own lock.
  let buffer: AsyncBuffer<Message>

  init(isOnce: Bool, buffer: AsyncBuffer<Message>) {
    self.buffer = buffer
    super.init(isOnce: isOnce, target: nil)
  }

  override func cancel() {
    end()
    buffer.finish()
  }
}

/// Makes a handler subscription for an actor variant: a task that takes each message
/// from a new unbounded buffer and awaits `handler` with it, one at a time.
///
/// - Parameters:
///   - source: The actor, held weakly, so that the handle knows when it is gone.
///   - owner: Held weakly; nil makes the returned handle the owner.
/// - Returns: The sink to register with the source (after any replay is pushed into
///   it) and the handle.
func makeHandlerSubscription<Message: Sendable>(
  source: any Detaching,
  owner: (any AnyObject & Sendable)?,
  isOnce: Bool = false,
  _ handler: @escaping @Sendable (AnyObject, Message) async -> Void
) -> (ActorSink<Message>, Subscription) {
  let buffer = AsyncBuffer<Message>(policy: .unbounded)
  let core = ActorSubscriptionCore(isOnce: isOnce, buffer: buffer)
  core.source = source
  let subscription = Subscription(core: core, endsOnDeinit: owner == nil)
  core.owner = owner ?? subscription
  Task { await runHandler(core, handler) }
  return (ActorSink(buffer: buffer, core: core), subscription)
}

private func runHandler<Message: Sendable>(
  _ core: ActorSubscriptionCore<Message>,
  _ handler: @Sendable (AnyObject, Message) async -> Void
) async {
  while let message = await core.buffer.next(isolation: nil) {
    // Starting is one atomic step with respect to cancel(): once cancel() has returned,
    // this fails, so no handler starts after it.
    guard core.startAsync() else { break }
    guard let owner = core.owner else {
      core.finishAsync()
      break
    }
    if core.isOnce { core.end() }
    await handler(owner, message)
    core.finishAsync()
    if core.isOnce { break }
  }
  core.buffer.finish()
}
