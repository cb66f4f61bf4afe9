// Handler subscriptions of the actor variants.
//
// Each subscription keeps its undelivered messages in a queue of its own and runs its
// handler in a task that drains that queue. The task exists only while there is
// something to deliver: the push that finds the subscription idle starts it, and it
// ends when it finds the queue empty. An idle subscription therefore holds no task.
//
// `state` (guarded by its lock) holds the queue, the handler and the phase:
//
//   idle       no task; a push queues its message, becomes `draining` and starts one
//   draining   one task runs: it takes the whole queue (swapping in its own emptied
//              one, so that steady delivery allocates nothing), delivers it message by
//              message, and takes again; finding the queue empty it goes back to idle.
//              A push only queues.
//   closed     ended (cancel, owner gone, once-delivery, sweep): pushes are refused;
//              the queue and the handler were taken out and released after unlocking
//
// There is at most one task per subscription at any time (only the push that leaves
// `idle` starts one, and a task leaves `draining` only in its last locked step, after
// its last delivery has returned), so one subscription's deliveries keep their order
// and never overlap. Before each delivery the task marks the handler as started in the
// subscription's state word, an atomic step that fails once `cancel()` has ended the
// subscription: no delivery starts after `cancel()` returns.
//
// When the source is deinitialized, a draining task delivers what is queued and then
// releases the handler; an idle subscription releases it at once.
//
// `undelivered` counts the messages queued and not yet started, for the overload bound
// (ActorBacklog.swift): a push adds one before queueing, the task takes one off before
// each delivery and wakes the source's waiting senders when that leaves the count
// just below the limit; ending the subscription wakes them too.

import Synchronization

/// An actor variant's handler subscription: its queue, its handler, and the task that
/// drains the queue while it has messages.
@usableFromInline
final class ActorHandler<Message: Sendable>: SubscriptionCore, @unchecked Sendable {
  // @unchecked Sendable: the queue, the handler and the phase are in `state`, guarded
  // by its lock; `isClosed` and `undelivered` are atomic; `source` and `owner` are
  // written once, before the subscription is published; `priority` and `backlog` are
  // immutable; the rest as SubscriptionCore.
  @usableFromInline typealias Handler = ActorHandlerBody<Message>

  @usableFromInline let state: Lock<ActorHandlerState<Message>>
  /// The priority of the task that subscribed, given to every draining task.
  @usableFromInline let priority: TaskPriority
  /// Set by the first ``endAndRelease()``: later calls have nothing to release.
  @usableFromInline let isClosed = Atomic<Bool>(false)
  /// Messages pushed and not yet started: the backlog the overload bound limits.
  @usableFromInline let undelivered = Atomic<Int>(0)
  /// The source's waiting senders, woken when this queue has room again or ends.
  @usableFromInline let backlog: ActorBacklog
  /// For a subscription to state, how messages merge: the queue then holds at most one
  /// undelivered message. Nil for events, which queue.
  @usableFromInline let coalescing: Coalescing<Message>?
  /// The actor, held weakly, so that the handle knows when it is gone. Written once
  /// before the subscription is published.
  @usableFromInline weak var source: AnyObject?
  /// The owner; nil for a subscription its handle owns (whose handle's deinit cancels
  /// it, so that it needs no weak reference to the handle). Written once before the
  /// subscription is published.
  @usableFromInline weak var owner: AnyObject?

  /// Makes a handler subscription and its handle.
  ///
  /// - Parameters:
  ///   - source: The actor, held weakly, so that the handle knows when it is gone.
  ///   - owner: Held weakly; nil makes the returned handle the owner.
  @inlinable
  static func make(
    source: AnyObject,
    owner: (any AnyObject & Sendable)?,
    isOnce: Bool,
    backlog: ActorBacklog,
    coalescing: Coalescing<Message>? = nil,
    _ handler: Handler
  ) -> (ActorHandler<Message>, Subscription) {
    if case .plain = handler { precondition(owner == nil, "Evented: a plain handler is owned by its handle") }
    let core = ActorHandler(isOnce: isOnce, backlog: backlog, coalescing: coalescing, handler: handler)
    core.source = source
    let subscription = Subscription(core: core, endsOnDeinit: owner == nil)
    core.owner = owner
    return (core, subscription)
  }

  @inlinable init(
    isOnce: Bool, backlog: ActorBacklog, coalescing: Coalescing<Message>?, handler: Handler
  ) {
    state = Lock.make(ActorHandlerState(handler: handler))
    self.backlog = backlog
    self.coalescing = coalescing
    priority = Task.currentPriority
    super.init(isOnce: isOnce, target: nil)
  }

  @usableFromInline override var isSourceAlive: Bool { source != nil }

  @usableFromInline override var liveOwner: AnyObject? { isOwnedByHandle ? self : owner }

  /// Whether the subscription was not ended and its owner is alive.
  var isLive: Bool {
    !isEnded && hasOwner
  }

  /// Whether a sender that may wait must wait for this subscription: it has `limit`
  /// undelivered messages or more, and has not ended.
  @inlinable @inline(__always)
  func isAtLimit(_ limit: Int) -> Bool {
    undelivered.load(ordering: .relaxed) >= limit && !isEnded
  }

  /// Suspends until this subscription has room or ends (or is found so at once), or
  /// until the task is cancelled.
  func waitForRoom() async {
    let limit = backlog.limit
    await backlog.wait { isAtLimit(limit) }
  }

  /// Queues `message` and starts the draining task if none runs.
  ///
  /// A dead owner is not looked for here (a weak load per message): the draining task
  /// finds it before delivering and ends the subscription, and a sweep finds it too.
  ///
  /// - Returns: false if the subscription is over and should be removed.
  @inlinable @inline(__always)
  func push(_ message: Message) -> Bool {
    if isEnded { return false }
    if let coalescing { return pushMerging(message, coalescing.merge) }
    // Counted before it can be taken, so that the count never drops below zero.
    undelivered.wrappingAdd(1, ordering: .relaxed)
    return carryOut(state.withLock { $0.push(message) })
  }

  /// Carries out what a push decided, after unlocking.
  ///
  /// - Returns: false if the subscription is over and should be removed.
  @inlinable @inline(__always)
  func carryOut(_ push: ActorPush) -> Bool {
    switch push {
    case .queued: return true
    case .refused: return false
    case .start:
      startDraining()
      return true
    }
  }

  /// Queues `message`, merged into the message waiting, if any, and starts the draining
  /// task if none runs. The message it replaces is released after unlocking.
  @usableFromInline
  func pushMerging(_ message: Message, _ merge: (Message, Message) -> Message) -> Bool {
    undelivered.wrappingAdd(1, ordering: .relaxed)
    let (push, replaced) = state.withLock { $0.push(message, merging: merge) }
    if replaced != nil { undelivered.wrappingSubtract(1, ordering: .relaxed) }
    return carryOut(push)
  }

  @usableFromInline
  func startDraining() {
    Task.detached(priority: priority) {
      #if FaultInjection
        if Planted.threadIDAcrossAwait {
          await StaleThread.$id.withValue(currentThreadID()) { await self.drain() }
          return
        }
      #endif
      await self.drain()
    }
  }

  /// Queues the replay of a new subscription, whose first delivery the source's
  /// replaying task makes (``drain(firstBatchOnly:)``), so that a subscription needs no
  /// task of its own until then.
  ///
  /// - Returns: Whether the caller must hand the subscription to the replaying task
  ///   (it was idle); false if it is already draining, or over.
  @usableFromInline
  func pushReplay(_ message: Message) -> Bool {
    undelivered.wrappingAdd(1, ordering: .relaxed)
    return state.withLock { $0.push(message) } == .start
  }

  /// Delivers the queue until it is empty or the subscription ends; with
  /// `firstBatchOnly`, only what is queued now, after which a task of the subscription's
  /// own takes over if more is queued.
  ///
  /// Each handler call runs marked as a call of a handler (``ActorBacklog/HandlerCall``):
  /// its sends never wait, nor those of a task it starts, until it returns. A call that
  /// leaves its task cancelled (a handler may cancel the task it runs in) hands the rest
  /// of the queue to a new task, so that the next call starts uncancelled.
  @inlinable
  func drain(firstBatchOnly: Bool = false) async {
    var batch = Ring<Message>()
    let calls = ActorBacklog.Calls()
    var isFirstBatch = true
    while true {
      if firstBatchOnly && !isFirstBatch {
        let (continues, released) = state.withLock { $0.afterFirstBatch() }
        _ = released
        if continues { startDraining() }
        return
      }
      isFirstBatch = false
      let handler: Handler
      switch state.withLock({ $0.take(into: &batch) }) {
      case .deliver(let taken): handler = taken
      case .stop(let released):
        _ = released
        return
      }
      while let message = batch.removeFirst() {
        guard markStarted() else {
          endAndRelease()
          return
        }
        if undelivered.wrappingSubtract(1, ordering: .relaxed).oldValue == backlog.limit { backlog.wake() }
        if let skips = coalescing?.skips, skips(message) {
          markReturned()
          continue
        }
        switch handler {
        case .plain(let body):
          // Owned by its handle, whose deinit cancels: the ended bit says it all.
          if isOnce { end() }
          await calls.run { await body(message) }
        case .owned(let body):
          guard let owner else {
            markReturned()
            endAndRelease()
            return
          }
          if isOnce { end() }
          await calls.run { await body(owner, message) }
        }
        markReturned()
        if isOnce {
          endAndRelease()
          return
        }
        if Task.isCancelled {
          state.withLock { $0.putBack(&batch) }
          startDraining()
          return
        }
      }
    }
  }

  /// Marks the handler as started, unless the subscription has ended.
  ///
  /// - Returns: false if it has ended: the handler must not start.
  @usableFromInline
  func markStarted() -> Bool {
    startAsync()
  }

  /// Marks the handler started by ``markStarted()`` as returned.
  @usableFromInline
  func markReturned() {
    finishAsync()
  }

  /// Ends the subscription: refuses further messages and releases the queue and the
  /// handler (outside the lock). A delivery already started may still be running.
  @usableFromInline
  func endAndRelease() {
    end()
    guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
    let released = state.withLock { $0.close() }
    _ = released
    backlog.wake()
  }

  override func cancel() {
    endAndRelease()
  }

  /// The source is gone: an idle subscription releases its handler now, a draining one
  /// after delivering what is queued.
  func sourceEnded() {
    if isClosed.load(ordering: .acquiring) { return }
    let released = state.withLock { $0.endSource() }
    _ = released
  }
}

/// How a subscription to state merges its messages, shared by a source's subscriptions
/// (one reference each, no allocation per subscription).
@usableFromInline
final class Coalescing<Message: Sendable>: Sendable {
  /// Merges a message into the one waiting before it.
  @usableFromInline let merge: @Sendable (_ waiting: Message, _ newer: Message) -> Message
  /// Which messages need no call (a merged update back to an equal value), if any.
  @usableFromInline let skips: (@Sendable (Message) -> Bool)?

  init(merge: @escaping @Sendable (Message, Message) -> Message, skips: (@Sendable (Message) -> Bool)?) {
    self.merge = merge
    self.skips = skips
  }
}

/// A handler as the user gave it (no wrapping closure, hence one allocation and one
/// call fewer).
@usableFromInline
enum ActorHandlerBody<Message: Sendable>: Sendable {
  /// Called with the owner, which the draining task loads before each delivery.
  case owned(@Sendable (AnyObject, Message) async -> Void)
  /// Called with the message alone. Only for a subscription owned by its handle: the
  /// handle's deinit cancels it, so the ended bit is the whole liveness check.
  case plain(@Sendable (Message) async -> Void)

  /// A handler of the owner, as its own type, and the message.
  static func owned<Owner: AnyObject>(
    by _: Owner.Type, _ handler: @escaping @Sendable (Owner, Message) async -> Void
  ) -> Self {
    .owned { owner, message in await handler(unsafeDowncast(owner, to: Owner.self), message) }
  }
}

/// What a push did.
@usableFromInline
enum ActorPush {
  /// Queued for the task that is draining.
  case queued
  /// Queued; the caller must start a draining task.
  case start
  /// The subscription is closed.
  case refused
}

/// What a draining task does next.
@usableFromInline
enum ActorTake<Handler> {
  /// Delivers the batch it took with this handler.
  case deliver(Handler)
  /// Ends; releases `release` (if any) after unlocking.
  case stop(release: Handler?)
}

/// The state of one `ActorHandler`, guarded by its lock.
@usableFromInline
struct ActorHandlerState<Message: Sendable> {
  @usableFromInline typealias Handler = ActorHandler<Message>.Handler

  @usableFromInline var queue = Ring<Message>()
  /// Nil once closed, or once the source is gone and the queue delivered.
  @usableFromInline var handler: Handler?
  @usableFromInline var isDraining = false
  @usableFromInline var isSourceEnded = false

  @inlinable init(handler: Handler) {
    self.handler = handler
  }

  @inlinable
  mutating func push(_ message: Message) -> ActorPush {
    guard handler != nil else { return .refused }
    queue.append(message)
    if isDraining { return .queued }
    isDraining = true
    return .start
  }

  /// Queues `message`, merged into the one waiting if there is one (a subscription to
  /// state holds at most one).
  ///
  /// - Returns: What the push did, and the waiting message it replaced.
  @usableFromInline
  mutating func push(_ message: Message, merging merge: (Message, Message) -> Message) -> (ActorPush, Message?) {
    guard handler != nil else { return (.refused, nil) }
    if let waiting = queue.removeFirst() {
      queue.append(merge(waiting, message))
      return (.queued, waiting)
    }
    return (push(message), nil)
  }

  /// Swaps the queue with the draining task's empty `batch`.
  ///
  /// - Returns: The handler to deliver the batch with; or, if there is nothing to
  ///   deliver, that the task ends (the state is idle again, or closed), with the
  ///   handler to release after unlocking if the source is gone.
  @inlinable
  mutating func take(into batch: inout Ring<Message>) -> ActorTake<Handler> {
    guard let handler, queue.count > 0 else {
      isDraining = false
      // Both are empty: keep the larger storage for the next pushes.
      if handler != nil, batch.capacity > queue.capacity { swap(&queue, &batch) }
      return .stop(release: isSourceEnded ? self.handler.take() : nil)
    }
    swap(&queue, &batch)
    return .deliver(handler)
  }

  /// After a replaying task's one batch: whether messages wait, for a task of the
  /// subscription's own to deliver (the state stays draining); if none, the state is
  /// idle again, and the handler is released after unlocking if the source is gone.
  @usableFromInline
  mutating func afterFirstBatch() -> (continues: Bool, release: Handler?) {
    if handler != nil, queue.count > 0 { return (true, nil) }
    isDraining = false
    return (false, isSourceEnded ? handler.take() : nil)
  }

  /// Puts the messages the draining task took and did not deliver back at the front of
  /// the queue, for the task that takes over from it. The state stays draining.
  @usableFromInline
  mutating func putBack(_ batch: inout Ring<Message>) {
    while let message = queue.removeFirst() { batch.append(message) }
    swap(&queue, &batch)
  }

  /// - Returns: What to release after unlocking.
  mutating func close() -> (Handler?, Ring<Message>) {
    (handler.take(), queue.take())
  }

  /// - Returns: What to release after unlocking.
  mutating func endSource() -> Handler? {
    isSourceEnded = true
    return isDraining ? nil : handler.take()
  }
}
