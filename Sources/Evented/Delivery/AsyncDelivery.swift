// The buffer between a source and one asynchronous consumer (`for await`, or the task
// that runs an actor variant's handler).
//
// `AsyncBuffer` keeps the undelivered elements in a ring and at most one waiting
// continuation, both in `state`, guarded by its lock. Its phases:
//
//   open           the producer pushes; the consumer pops or waits
//   sourceEnded    the source is gone: pushes are refused; the consumer takes what is
//                  buffered, then nil
//   cancelled      the consumer is done (loop left, task cancelled, iterator dropped):
//                  pushes are refused, the buffer is emptied, the consumer gets nil
//
// A waiter exists only while the ring is empty, so a push either hands its element to
// the waiter or buffers it, never both. Every transition runs under the lock and
// returns what to do; continuations are resumed, subscriptions cancelled and dropped
// elements released after unlocking.
//
// For a lock-based source the buffer is the owner of an ordinary hub subscription
// (held weakly by the hub, so dropping the sequence ends it). The handler captures a
// `SourceLink` that only the hub's entry keeps alive: when the source is deinitialized,
// its hub releases the entry, the link's deinit runs and ends the buffer. The buffer
// knows its subscription only weakly for the same reason.

/// How many undelivered elements an asynchronous sequence keeps, and which it drops
/// when full. The vocabulary of `AsyncStream`.
///
/// ```swift
/// for await error in model.didFail.events(bufferingPolicy: .bufferingNewest(10)) { … }
/// ```
///
/// ## Concurrency
///
/// - **Thread safety:** A value type; `Sendable`.
/// - **Ordering:** Whatever is kept is delivered in commit order.
/// - **Reentrancy:** Not applicable.
/// - **Lifetime:** Dropped elements are released when they are dropped, outside every
///   internal lock.
public enum BufferingPolicy: Sendable, Hashable {
  /// Keeps every undelivered element: nothing is lost, memory grows with a slow
  /// consumer.
  case unbounded
  /// Keeps the oldest `limit` undelivered elements and drops newer ones when full.
  case bufferingOldest(Int)
  /// Keeps the newest `limit` undelivered elements and drops the oldest when full.
  /// `.bufferingNewest(1)` always ends on the latest element.
  case bufferingNewest(Int)
}

/// The elements waiting for one asynchronous consumer.
final class AsyncBuffer<Element: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is in `state`, guarded by its lock.
  private let state: Lock<AsyncBufferState<Element>>

  init(policy: BufferingPolicy) {
    switch policy {
    case .unbounded: break
    case .bufferingOldest(let limit), .bufferingNewest(let limit):
      precondition(limit >= 0, "Evented: a buffering limit must not be negative")
    }
    state = Lock.make(AsyncBufferState(policy: policy))
  }

  deinit {
    let core = state.withLock { $0.core }
    core?.cancel()
  }

  /// Remembers the hub subscription that feeds this buffer, to cancel it when the
  /// consumer is done.
  func attach(_ core: SubscriptionCore) {
    state.withLock { $0.core = core }
  }

  /// Hands `element` to the waiting consumer or buffers it.
  ///
  /// - Returns: false if the buffer no longer accepts elements.
  @inline(__always)
  @discardableResult
  func push(_ element: Element) -> Bool {
    var dropped: Element?
    let (accepted, waiter) = state.withLock { $0.push(element, dropping: &dropped) }
    waiter?.resume(returning: element)
    _ = dropped
    return accepted
  }

  /// No element will come any more: the consumer gets what is buffered, then nil.
  func sourceEnded() {
    let waiter = state.withLock { $0.endSource() }
    waiter?.resume(returning: nil)
  }

  /// The consumer is done: refuses further elements, drops the buffered ones, wakes a
  /// waiter with nil and cancels the subscription that fed the buffer.
  func finish() {
    let (waiter, core, dropped) = state.withLock { $0.cancel() }
    waiter?.resume(returning: nil)
    core?.cancel()
    _ = dropped
  }

  /// Whether elements are still accepted.
  var isOpen: Bool {
    state.withLock { $0.phase == .open }
  }

  /// The next element; waits for one if none is buffered. Nil once the source is gone
  /// and the buffer is empty, or once the calling task is cancelled.
  @inline(__always)
  func next(isolation actor: isolated (any Actor)?) async -> Element? {
    if !Task.isCancelled {
      switch state.withLock({ $0.poll() }) {
      case .element(let element): return element
      case .end: break
      case .empty: return await wait(isolation: actor)
      }
    }
    finish()
    return nil
  }

  private func wait(isolation actor: isolated (any Actor)?) async -> Element? {
    let element = await withTaskCancellationHandler {
      await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Element?, Never>) in
        switch state.withLock({ $0.wait(continuation) }) {
        case .element(let element): continuation.resume(returning: element)
        case .end: continuation.resume(returning: nil)
        case .empty: break
        }
      }
    } onCancel: {
      // Only wakes the waiter: the subscription is cancelled by the consumer's task
      // once it resumes, never from inside the cancellation handler.
      let waiter = state.withLock { $0.cancelWaiter() }
      waiter?.resume(returning: nil)
    }
    if element == nil { finish() }
    return element
  }
}

/// The outcome of asking the buffer for an element.
enum Poll<Element> {
  case element(Element)
  case empty
  case end
}

/// The state of one `AsyncBuffer`, guarded by its lock.
struct AsyncBufferState<Element> {
  enum Phase {
    case open, sourceEnded, cancelled
  }

  let policy: BufferingPolicy
  var phase = Phase.open
  var ring = Ring<Element>()
  var waiter: UnsafeContinuation<Element?, Never>?
  weak var core: SubscriptionCore?

  init(policy: BufferingPolicy) {
    self.policy = policy
  }

  /// - Returns: whether the element was taken, and the waiter to resume with it.
  mutating func push(
    _ element: Element, dropping dropped: inout Element?
  ) -> (Bool, UnsafeContinuation<Element?, Never>?) {
    guard phase == .open else { return (false, nil) }
    if let waiter = waiter.take() { return (true, waiter) }
    switch policy {
    case .unbounded:
      ring.append(element)
    case .bufferingOldest(let limit):
      if ring.count < limit { ring.append(element) } else { dropped = element }
    case .bufferingNewest(let limit):
      if limit == 0 {
        dropped = element
      } else {
        if ring.count == limit { dropped = ring.removeFirst() }
        ring.append(element)
      }
    }
    return (true, nil)
  }

  mutating func poll() -> Poll<Element> {
    if phase == .cancelled { return .end }
    if let element = ring.removeFirst() { return .element(element) }
    return phase == .open ? .empty : .end
  }

  /// Stores `continuation` unless an element or the end is ready.
  mutating func wait(_ continuation: UnsafeContinuation<Element?, Never>) -> Poll<Element> {
    let ready = poll()
    if case .empty = ready {
      precondition(
        waiter == nil,
        "Evented: two tasks awaited the same asynchronous sequence at once; iterate it from one task")
      waiter = continuation
    }
    return ready
  }

  mutating func endSource() -> UnsafeContinuation<Element?, Never>? {
    guard phase == .open else { return nil }
    phase = .sourceEnded
    return waiter.take()
  }

  mutating func cancelWaiter() -> UnsafeContinuation<Element?, Never>? {
    phase = .cancelled
    return waiter.take()
  }

  mutating func cancel() -> (UnsafeContinuation<Element?, Never>?, SubscriptionCore?, Ring<Element>) {
    phase = .cancelled
    let core = self.core
    self.core = nil
    return (waiter.take(), core, ring.take())
  }
}

/// A first-in first-out queue in a power-of-two ring.
struct Ring<Element> {
  private var storage = ContiguousArray<Element?>()
  private var head = 0
  private(set) var count = 0

  mutating func append(_ element: Element) {
    if count == storage.count { grow() }
    storage[(head &+ count) & (storage.count &- 1)] = element
    count &+= 1
  }

  mutating func removeFirst() -> Element? {
    guard count > 0 else { return nil }
    let element = storage[head].take()
    head = (head &+ 1) & (storage.count &- 1)
    count &-= 1
    return element
  }

  /// Empties the ring and returns what it held.
  mutating func take() -> Ring<Element> {
    let taken = self
    self = Ring()
    return taken
  }

  private mutating func grow() {
    let capacity = Swift.max(1, storage.count * 2)
    var fresh = ContiguousArray<Element?>(repeating: nil, count: capacity)
    for offset in 0..<count {
      fresh[offset] = storage[(head &+ offset) & (storage.count &- 1)].take()
    }
    storage = fresh
    head = 0
  }
}

/// Held by an iterator (a struct, as `AsyncStream`'s is) and its copies: ends the
/// consumer's side of the buffer when the last of them is dropped.
final class AsyncIteratorEnding<Element: Sendable> {
  let buffer: AsyncBuffer<Element>

  init(_ buffer: AsyncBuffer<Element>) {
    self.buffer = buffer
  }

  deinit {
    buffer.finish()
  }
}

/// Kept alive only by the hub's entry for one buffer: its deinit tells the buffer that
/// the source is gone.
final class SourceLink<Element: Sendable>: Sendable {
  weak let buffer: AsyncBuffer<Element>?

  init(_ buffer: AsyncBuffer<Element>) {
    self.buffer = buffer
  }

  deinit {
    buffer?.sourceEnded()
  }
}

extension Hub {
  /// Adds `entry`, whose owner is `buffer`, and remembers it in the buffer.
  ///
  /// The subscription is made under the hub's lock with `replay`, so nothing committed
  /// after this call is missed and nothing committed before it is delivered. Callers
  /// build the entry themselves so that a delivery costs one closure call.
  func subscribe<Element>(
    _ buffer: AsyncBuffer<Element>, with entry: Entry<Message>, replay: ((borrowing Stored) -> Message)?
  ) {
    buffer.attach(entry)
    subscribe(entry, replay: replay)
  }
}

// MARK: - Handler tasks of the actor variants

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
    return !core.isEnded && core.hasOwner
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

  /// The actor, held weakly, so that the handle knows when it is gone.
  weak var source: (any Detaching)?
  /// The owner, or the handle for a subscription it owns.
  weak var owner: AnyObject?

  init(isOnce: Bool, buffer: AsyncBuffer<Message>) {
    self.buffer = buffer
    super.init(isOnce: isOnce, target: nil)
  }

  override var isSourceAlive: Bool { source != nil }

  override var liveOwner: AnyObject? { owner }

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
