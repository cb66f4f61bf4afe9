// A look inside the lock-based hub, for tests of its bookkeeping.

@testable import Evented

/// The number of slots (live, ended-but-listed and tombstones) of a lock-based hub.
func slotCount<M, S>(_ hub: Hub<M, S>) -> Int {
  hub.storage.withLock { $0.slots.count }
}
