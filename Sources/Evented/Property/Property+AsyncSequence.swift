/// The values of a property as an asynchronous sequence: the current value, then every
/// new value.
///
/// ```swift
/// for await name in model.name.values {
///   title = name
/// }
/// ```
///
/// Made by ``PropertyProtocol/values``, ``PropertyProtocol/values(bufferingPolicy:)``
/// and their ``ActorProperty`` counterparts. The sequence subscribes when it is made:
/// the value current at that instant is its first element, and every later write is
/// buffered according to its ``BufferingPolicy``. With the default
/// `.bufferingNewest(1)` a slow consumer skips intermediate values and always ends on
/// the latest.
///
/// A sequence is single-pass, like `AsyncStream`: iterate it once, from one task. The
/// subscription ends when iteration ends (leaving the loop, cancelling the task, or
/// dropping the iterator), or when the sequence is dropped without being iterated; a
/// later iterator of the same sequence finishes at once. Read `values` again to
/// observe anew.
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; it may be made on one thread and iterated on
///   another. Awaiting `next()` from two tasks at once stops the program with a
///   message.
/// - **Ordering:** Values arrive in commit order, starting with the value current when
///   the sequence was made; none committed before that appears. Unless the buffering
///   policy drops newer values (`.bufferingOldest`), the last value received when
///   writers stop is the property's `value`.
/// - **Reentrancy:** Iterating never blocks writers: a write only appends to the
///   buffer, and the waiting task is resumed after every lock is released.
/// - **Lifetime:** The sequence does not keep a ``Property`` alive. When the property is
///   deinitialized, the sequence delivers what it has buffered and then finishes. The
///   sequence of a derived value (`map`, `combineLatest`, `flatMapLatest`) keeps that
///   value, and so its sources, alive until iteration ends.
public struct AsyncValues<Value: Sendable>: AsyncSequence, Sendable {
  /// The values: the one current at the call, then each new one in commit order.
  public typealias Element = Value
  /// Never fails: the sequence finishes when its property is gone or its loop ends.
  public typealias Failure = Never

  let buffer: AsyncBuffer<Value>

  /// The iterator. Dropping it ends the subscription.
  public func makeAsyncIterator() -> Iterator {
    Iterator(buffer: buffer)
  }

  /// Iterates an ``AsyncValues``; ends its subscription when dropped.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** Not `Sendable`: use it from the task that iterates.
  /// - **Ordering:** As ``AsyncValues``.
  /// - **Reentrancy:** Not applicable.
  /// - **Lifetime:** Ends the subscription when the iterator and its copies are
  ///   dropped, when `next()` returns nil, or when the awaiting task is cancelled.
  public struct Iterator: AsyncIteratorProtocol {
    let ending: AsyncIteratorEnding<Value>

    init(buffer: AsyncBuffer<Value>) {
      ending = AsyncIteratorEnding(buffer)
    }

    /// The next value, waiting for it if needed; nil when the property is gone and the
    /// buffer is empty, or when the task is cancelled.
    public mutating func next() async -> Value? {
      await ending.buffer.next(isolation: nil)
    }

    /// The next value, awaited without leaving the caller's actor.
    public mutating func next(isolation actor: isolated (any Actor)?) async -> Value? {
      await ending.buffer.next(isolation: actor)
    }
  }
}

@available(*, unavailable)
extension AsyncValues.Iterator: Sendable {}

extension PropertyProtocol {
  /// The current value, then every new value, keeping only the newest undelivered one.
  ///
  /// ```swift
  /// for await name in model.name.values { title = name }
  /// ```
  ///
  /// A slow consumer never falls behind: it skips to the latest value, and when writers
  /// stop, the last value it receives equals ``value``.
  public var values: AsyncValues<Value> {
    values(bufferingPolicy: .bufferingNewest(1))
  }

  /// The current value, then every new value, with the given buffering.
  ///
  /// - Parameter bufferingPolicy: What to keep while the consumer is busy;
  ///   `.unbounded` delivers every committed value. A limit of 0 keeps no backlog: the
  ///   consumer gets the value current when it next asks, if it changed, as with
  ///   `.bufferingNewest(1)`, so the sequence still ends on ``value``. A negative limit
  ///   stops the program with a message.
  /// - Returns: A single-pass sequence that subscribed during this call, together with
  ///   reading the current value, so no later write is missed.
  public func values(bufferingPolicy: BufferingPolicy) -> AsyncValues<Value> {
    let buffer = AsyncBuffer<Value>(policy: bufferingPolicy.forValues)
    let link = SourceLink(buffer)
    let kept = anchor  // read once: a lazy property's anchor is a new token each time
    let node = kept as? any ObservedNode
    // A derived value's sequence keeps the node through an `ObserverAnchor`, as an
    // observer does: when the loop ends, its subscription's handler is released and the
    // node stops following its roots if nobody else observes it.
    let anchor: (any AnyObject & Sendable)? = node.map { ObserverAnchor($0) } ?? kept
    let entry = OwnedEntry<AnyObject, Update<Value>>(owner: buffer, target: nil) { owner, update in
      withExtendedLifetime((link, anchor)) { _ = unsafeDowncast(owner, to: AsyncBuffer<Value>.self).push(update.new) }
    }
    node?.willObserve()
    hub.subscribe(buffer, with: entry, replay: replayCurrent)
    node?.didObserve()
    return AsyncValues(buffer: buffer)
  }
}

/// A property is the sequence of its values: `for await x in property` iterates
/// ``PropertyProtocol/values``.
///
/// ```swift
/// for await level in volume { show(level) }   // the current level, then each new one
/// ```
///
/// Each loop subscribes when it starts (when its iterator is made), with the current
/// value as its first element, and keeps only the newest undelivered value, so a slow
/// consumer ends on the latest. For another buffering, iterate
/// ``PropertyProtocol/values(bufferingPolicy:)``. `map` with a synchronous transform
/// still makes a derived ``ReadOnlyProperty``; `AsyncSequence`'s other operators
/// (`filter`, `first(where:)`, …) apply to the property itself, and its `map` to
/// ``PropertyProtocol/values`` (or to a transform marked `async`).
extension Property: AsyncSequence {
  /// The values: the one current when iteration starts, then each new one.
  public typealias Element = Value
  /// Never fails: iteration finishes when the property is gone or the loop ends.
  public typealias Failure = Never

  /// Subscribes as ``PropertyProtocol/values`` does, keeping the newest value.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** May be called from any thread; the iterator is not
  ///   `Sendable`.
  /// - **Ordering:** The value current at this call, then each new one in commit
  ///   order; when writers stop, the last one received is ``value``.
  /// - **Reentrancy:** Iterating never blocks writers.
  /// - **Lifetime:** The subscription ends with the iterator; it does not keep the
  ///   property alive.
  public func makeAsyncIterator() -> AsyncValues<Value>.Iterator {
    values.makeAsyncIterator()
  }
}

/// A read-only property (a view, a derived value, a constant) is the sequence of its
/// values: `for await x in property` iterates ``PropertyProtocol/values``.
///
/// ```swift
/// for await label in volume.map({ "Volume \($0)" }) { show(label) }
/// ```
///
/// As for ``Property``: each loop subscribes when it starts, with the current value
/// first, and keeps only the newest undelivered value.
extension ReadOnlyProperty: AsyncSequence {
  /// The values: the one current when iteration starts, then each new one.
  public typealias Element = Value
  /// Never fails: iteration finishes when the source is gone or the loop ends.
  public typealias Failure = Never

  /// Subscribes as ``PropertyProtocol/values`` does, keeping the newest value.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** May be called from any thread; the iterator is not
  ///   `Sendable`.
  /// - **Ordering:** The value current at this call, then each new one in commit
  ///   order; when writers stop, the last one received is ``value``.
  /// - **Reentrancy:** Iterating never blocks writers.
  /// - **Lifetime:** The subscription ends with the iterator. A view's does not keep
  ///   its property alive; a derived value's keeps the derived value, and so its
  ///   sources, until it ends. A constant's finishes when the last copy of the
  ///   constant is gone.
  public func makeAsyncIterator() -> AsyncValues<Value>.Iterator {
    values.makeAsyncIterator()
  }
}
