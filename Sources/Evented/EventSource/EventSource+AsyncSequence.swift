/// The events of a source as an asynchronous sequence, from the moment it was made.
///
/// ```swift
/// for await error in model.didFail.events(bufferingPolicy: .unbounded) {
///   show(error)
/// }
/// ```
///
/// Made by ``EventSourceProtocol/events(bufferingPolicy:)`` and
/// ``ActorEventSource/events(bufferingPolicy:)``. The sequence subscribes when it is
/// made, not when iteration starts: events sent in between are buffered according to
/// its ``BufferingPolicy``.
///
/// A sequence is single-pass, like `AsyncStream`: iterate it once, from one task. The
/// subscription ends when iteration ends (leaving the loop, cancelling the task, or
/// dropping the iterator), or when the sequence is dropped without being iterated; a
/// later iterator of the same sequence finishes at once. Call `events` again to
/// observe anew.
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; it may be made on one thread and iterated on
///   another. Awaiting `next()` from two tasks at once stops the program with a
///   message.
/// - **Ordering:** Events arrive in commit order. Every event committed after the
///   sequence was made is delivered unless the buffering policy drops it; none
///   committed before is delivered.
/// - **Reentrancy:** Iterating never blocks the source: the sender only appends to the
///   buffer, and the waiting task is resumed after every lock is released.
/// - **Lifetime:** The sequence does not keep an ``EventSource`` alive. When the source
///   is deinitialized, the sequence delivers what it has buffered and then finishes.
///   The sequence of a derived source (`map`, `filter`, `compactMap`, `merge`) keeps
///   that source, and so the sources it derives from, alive until iteration ends.
public struct AsyncEvents<Event: Sendable>: AsyncSequence, Sendable {
  /// The events, in commit order.
  public typealias Element = Event
  /// Never fails: the sequence finishes when its source is gone or its loop ends.
  public typealias Failure = Never

  let buffer: AsyncBuffer<Event>

  /// The iterator. Dropping it ends the subscription.
  public func makeAsyncIterator() -> Iterator {
    Iterator(buffer: buffer)
  }

  /// Iterates an ``AsyncEvents``; ends its subscription when dropped.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** Not `Sendable`: use it from the task that iterates.
  /// - **Ordering:** As ``AsyncEvents``.
  /// - **Reentrancy:** Not applicable.
  /// - **Lifetime:** Ends the subscription when the iterator and its copies are
  ///   dropped, when `next()` returns nil, or when the awaiting task is cancelled.
  public struct Iterator: AsyncIteratorProtocol {
    let ending: AsyncIteratorEnding<Event>

    init(buffer: AsyncBuffer<Event>) {
      ending = AsyncIteratorEnding(buffer)
    }

    /// The next event, waiting for it if needed; nil when the source is gone and the
    /// buffer is empty, or when the task is cancelled.
    public mutating func next() async -> Event? {
      await ending.buffer.next(isolation: nil)
    }

    /// The next event, awaited without leaving the caller's actor.
    public mutating func next(isolation actor: isolated (any Actor)?) async -> Event? {
      await ending.buffer.next(isolation: actor)
    }
  }
}

@available(*, unavailable)
extension AsyncEvents.Iterator: Sendable {}

extension EventSourceProtocol {
  /// The events sent from now on, as an asynchronous sequence.
  ///
  /// ```swift
  /// let events = source.events(bufferingPolicy: .unbounded)   // subscribed here
  /// source.send(1)
  /// for await event in events { … }                          // receives 1
  /// ```
  ///
  /// - Parameter bufferingPolicy: What to keep while the consumer is busy. The default,
  ///   `.unbounded`, loses nothing.
  /// - Returns: A single-pass sequence that subscribed during this call: it receives
  ///   every event committed after the call and none committed before.
  public func events(bufferingPolicy: BufferingPolicy = .unbounded) -> AsyncEvents<Event> {
    let buffer = AsyncBuffer<Event>(policy: bufferingPolicy)
    let link = SourceLink(buffer)
    let anchor = anchor
    let entry = OwnedEntry<AnyObject, Event>(owner: buffer, target: nil) { owner, event in
      withExtendedLifetime((link, anchor)) { _ = unsafeDowncast(owner, to: AsyncBuffer<Event>.self).push(event) }
    }
    hub.subscribe(buffer, with: entry, replay: nil)
    return AsyncEvents(buffer: buffer)
  }
}
