// Lifetime of the nodes that follow their sources whether observed or not (derived
// event sources): freed by a sweep of a source once their last observer's owner died.
//
// Such a node is kept alive by its observers (their handlers capture it) and by the
// code that references it; its sources hold it weakly, through the node's links. When
// the owner of its last observer dies, that observer's subscription still holds the
// node until the node's own hub meets it (its next delivery). So that the node is
// freed by its source's next sweep instead (the scan of a subscribe, `observerCount`),
// as a computed node is (`RootEntry`), each link checks, when a sweep of its source
// meets it, whether the node still has a live observer. If not, the link stays (the
// node may still be referenced, and then keeps following), and the sweep is handed a
// `SweepRequest`, which `Garbage.dispose()` acts on after unlocking: it sweeps the
// node's own observers, releasing the dead ones. If they held the last references, the
// node deinitializes and ends its links; `Hub.liveCount` then counts once more, so
// that the `observerCount` that freed a node does not count it.

/// A node that follows its sources observed or not, seen from a sweep of a source.
@usableFromInline
protocol FollowingNode: AnyObject, Sendable {
  /// Whether the node has a subscription that has not ended and whose owner is alive.
  /// Releases nothing, so it may be called under a source's lock.
  var hasLiveObservers: Bool { get }
  /// Removes the node's subscriptions that ended or whose owner died, and releases
  /// them. Call with no lock held.
  func sweepObservers()
}

/// Handed to a sweep by the link of a node without live observers: after unlocking,
/// the node's observers are swept (``Garbage/dispose()``). Dropped anywhere else (a
/// check that releases nothing), it does nothing.
///
/// It holds the node strongly, so that no reference the sweep took under the source's
/// lock is the node's last one when it is released there; ``serve(_:)`` takes the
/// reference out, so that the node can be freed by the sweep of its observers while
/// the request stays with the rest of the sweep's garbage. Touched by one thread only.
@usableFromInline
final class SweepRequest {
  @usableFromInline var node: (any FollowingNode)?

  @usableFromInline init(_ node: any FollowingNode) {
    self.node = node
  }

  /// Sweeps the node's observers if `owner` is a request. Call with no lock held.
  ///
  /// - Returns: Whether `owner` was a request.
  @inlinable static func serve(_ owner: AnyObject?) -> Bool {
    // The class is final: comparing the exact type costs a load, where `as?` calls the
    // runtime's dynamic cast.
    guard let owner, type(of: owner) == SweepRequest.self else { return false }
    let node = unsafeDowncast(owner, to: SweepRequest.self).node.take()
    node?.sweepObservers()
    return true  // `node` is released here, outside every lock: it may free the node.
  }
}

/// A following node's subscription to one of its sources, with the node as its owner,
/// held weakly.
@usableFromInline
final class FollowerEntry<Message>: Entry<Message>, @unchecked Sendable {
  // @unchecked Sendable: owns no lock; `handler` is ordered by `word` (see
  // SubscriptionCore); `node` is written once, before the subscription is published.
  @usableFromInline typealias Handler = @Sendable (AnyObject, Message) -> Void

  /// Set to nil when released.
  @usableFromInline @exclusivity(unchecked) var handler: Handler?
  /// Written once before the subscription is published.
  @usableFromInline @exclusivity(unchecked) weak var node: (any FollowingNode)?

  @inlinable init(node: any FollowingNode, handler: @escaping Handler) {
    self.handler = handler
    super.init(isOnce: false, target: nil)
    self.node = node
    outlivesRemoveAll = true  // a link, not an observer: `removeAllObservers()` leaves it
  }

  @usableFromInline override var liveOwner: AnyObject? { node }

  @usableFromInline override var checkedOwner: AnyObject? { node }

  /// The node, if it has a live observer; else a request to sweep its observers once
  /// the source is unlocked (the subscription stays: the node follows its sources for
  /// as long as it lives).
  @usableFromInline override var sweptOwner: AnyObject? {
    guard let node else { return nil }
    return node.hasLiveObservers ? node : SweepRequest(node)
  }

  @usableFromInline override func invoke(_ owner: AnyObject, _ message: Message) {
    if let handler { handler(owner, message) }
  }

  @usableFromInline override func releaseHandler() {
    handler = nil
  }
}
