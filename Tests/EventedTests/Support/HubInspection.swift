// A look inside the lock-based hub, for tests of its bookkeeping.

import Testing

@testable import Evented

/// The number of slots (live, ended-but-listed and tombstones) of a lock-based hub.
func slotCount<M, S>(_ hub: Hub<M, S>) -> Int {
  hub.storage.withLock { $0.subscribers.slots.count }
}

/// Checks the bookkeeping of a lock-based hub: `live` counts the listed subscriptions
/// (tombstones excluded), and a cached snapshot lists exactly them, in order.
func checkBookkeeping<M, S>(
  _ hub: Hub<M, S>, _ context: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
  let (live, listed, snapshotMatches) = hub.storage.withLock { state -> (Int, Int, Bool) in
    let listed = state.subscribers.slots.compactMap { $0 }
    let matches =
      state.subscribers.snapshot.map { snapshot in
        snapshot.count == listed.count && zip(snapshot, listed).allSatisfy { $0 === $1 }
      } ?? true
    return (state.subscribers.live, listed.count, matches)
  }
  #expect(live == listed, "live \(live) != listed \(listed): \(context())", sourceLocation: sourceLocation)
  #expect(snapshotMatches, "stale snapshot: \(context())", sourceLocation: sourceLocation)
}
