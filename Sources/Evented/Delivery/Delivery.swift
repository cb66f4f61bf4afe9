import Dispatch

/// Where a subscription's handler runs.
///
/// ```swift
/// source.observe(with: self) { owner, event in … }                      // .synchronous
/// source.observe(with: self, on: .queue(worker)) { owner, event in … }
/// source.observe(with: self, on: .main) { owner, event in owner.show(event) }  // @MainActor
/// ```
///
/// `.main` is spelled through ``MainActorDelivery``, so that the handler given with it
/// is `@MainActor` and may call main-actor-isolated code directly.
///
/// ## Concurrency
///
/// - **Thread safety:** A value type; `Sendable`.
/// - **Ordering:** With `.synchronous`, handlers run on the thread that commits, before
///   `send` returns, unless another thread is already delivering for the same source:
///   then that thread delivers the event, in order, and `send` returns at once. With
///   `.queue(q)`, the handler is submitted to `q` in commit order and runs there one
///   invocation at a time, even if `q` is concurrent.
/// - **Reentrancy:** Delivery never nests: an event sent from inside a handler is
///   delivered after the current delivery pass.
/// - **Overload:** State coalesces, events push back. A `.queue` or `.main` observer of
///   a property, an array or a derived value holds at most one undelivered state,
///   replaced by the newest while its queue is behind, so no writer ever waits for it.
///   A `.queue` or `.main` subscription of an event source holds at most its source's
///   backlog limit of submitted events; at the limit a sender that may wait waits
///   (never from a handler, and never for the queue it runs on). See Guarantees.md,
///   "Overload".
/// - **Lifetime:** A queue given to `.queue(_:)` is retained until the subscription
///   ends.
public struct Delivery: Sendable {
  @usableFromInline let queue: DispatchQueue?

  /// Runs handlers on the committing thread before `send` or the write returns,
  /// unless another thread is delivering for the source already.
  public static let synchronous = Delivery(queue: nil)

  /// Submits handlers to `queue`, in commit order, one invocation at a time.
  ///
  /// - Parameter queue: The queue to run handlers on. A concurrent queue is fine:
  ///   each subscription gets a serial queue that targets it.
  public static func queue(_ queue: DispatchQueue) -> Delivery {
    Delivery(queue: queue)
  }
}

/// Delivery on the main queue to a `@MainActor` handler: write `on: .main`.
///
/// ## Concurrency
///
/// - **Thread safety:** A value type; `Sendable`.
/// - **Ordering:** Handlers are submitted to the main queue in commit order.
/// - **Reentrancy:** As ``Delivery``.
/// - **Lifetime:** As ``Delivery``.
public struct MainActorDelivery: Sendable {
  /// The main queue; the handler is isolated to the main actor.
  public static let main = MainActorDelivery()
}
