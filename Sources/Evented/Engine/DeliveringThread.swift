// Promise 5 (reentrancy without deadlock) and the overload bound: a thread inside a
// delivery pass or a queued handler never waits for room in any backlog, so a handler
// can neither wait for its own source nor close a cycle of waits between sources.

/// How many delivery passes (or queued handler calls) the calling thread is inside, for
/// every source together.
///
/// The depth is a per-thread word, so entering and leaving cost one key lookup and two
/// plain writes to memory only the calling thread touches.
@usableFromInline
enum DeliveringThread {
  private static let depth = ThreadWord()

  /// Whether the calling thread is delivering for any source, or running a handler.
  @usableFromInline static var isDelivering: Bool {
    guard let depth = depth.existing else { return false }
    return depth.pointee > 0
  }

  /// Counts the calling thread as delivering until the matching ``exit(_:)``.
  ///
  /// - Returns: the counter to pass to `exit`.
  @usableFromInline static func enter() -> UnsafeMutablePointer<Int> {
    let word = depth.current
    word.pointee += 1
    return word
  }

  /// Ends what the matching ``enter()`` began.
  @inlinable @inline(__always)
  static func exit(_ depth: UnsafeMutablePointer<Int>) {
    depth.pointee -= 1
  }
}
