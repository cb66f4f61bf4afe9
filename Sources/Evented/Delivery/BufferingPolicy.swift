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

extension BufferingPolicy {
  /// The policy of a property's `values`: a limit of 0, for either policy, keeps no
  /// backlog but still the value current when the consumer next asks, as
  /// `.bufferingNewest(1)` does, so that the sequence ends on the property's value. (An
  /// `AsyncStream` with a limit of 0 drops every element that arrives while nobody
  /// waits, which for a property would leave the consumer on a stale value.)
  var forValues: BufferingPolicy {
    switch self {
    case .bufferingNewest(0), .bufferingOldest(0): .bufferingNewest(1)
    default: self
    }
  }
}
