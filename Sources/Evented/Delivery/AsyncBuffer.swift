// The buffer between a source and one asynchronous consumer (`for await` over a
// sequence of a lock-based source or of an actor variant).
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

/// The elements waiting for one asynchronous consumer.
final class AsyncBuffer<Element: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is in `state`, guarded by its lock.
  private let state: Lock<AsyncBufferState<Element>>

  init(policy: BufferingPolicy) {
    switch policy {
    case .unbounded: break
    case .bufferingOldest(let limit), .bufferingNewest(let limit):
      if limit < 0 { fatalError("Evented: a buffering limit must not be negative (got \(limit))") }
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
  func end() {
    let (waiter, core, dropped) = state.withLock { $0.end() }
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
    end()
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
    if element == nil { end() }
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
      if waiter != nil {
        fatalError("Evented: two tasks awaited the same asynchronous sequence at once; iterate it from one task")
      }
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

  mutating func end() -> (UnsafeContinuation<Element?, Never>?, SubscriptionCore?, Ring<Element>) {
    phase = .cancelled
    let core = self.core
    self.core = nil
    return (waiter.take(), core, ring.take())
  }
}

/// A first-in first-out queue in a power-of-two ring.
@usableFromInline
struct Ring<Element> {
  @usableFromInline var storage = ContiguousArray<Element?>()
  @usableFromInline var head = 0
  @usableFromInline var count = 0

  @inlinable init() {}

  /// How many elements fit before the storage grows.
  @inlinable var capacity: Int { storage.count }

  @inlinable
  mutating func append(_ element: Element) {
    if count == storage.count { grow() }
    storage[(head &+ count) & (storage.count &- 1)] = element
    count &+= 1
  }

  @inlinable
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

  @inlinable
  mutating func grow() {
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
    buffer.end()
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
