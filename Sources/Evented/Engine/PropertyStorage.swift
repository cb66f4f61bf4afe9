// Memory of an idle property: a `Property`'s hub storage holds, after its lock word,
// the property's Observation slot (ObservationSite.swift). The storage object has a
// spare word in its allocator chunk (a 48-byte object in a 64-byte chunk for a
// `Property<Int>`), so the slot costs nothing there, and the property object, without
// it, fits the 48-byte chunk instead of the 64-byte one.
//
// A lazy property's hooks are in its hub's core, as a lazy event source's are
// (LazyHooks.swift): the storage's class says so.

/// The hub storage of a `Property`: one more tail word after the lock, the property's
/// Observation slot, initialized by ``Hub/makeProperty(_:backlogLimit:lazy:)``.
@usableFromInline
class PropertyHubStorage<Message: Sendable, Stored>: HubStorage<Message, Stored> {
  /// The Observation slot, in the tail word after the lock.
  @inlinable @inline(__always) final var observation: UnsafeMutablePointer<ObservationSlot> {
    withUnsafeMutablePointerToElements { Self.slot(after: $0) }
  }

  @inlinable @inline(__always)
  static func slot(after lock: UnsafeMutablePointer<LockCell>) -> UnsafeMutablePointer<ObservationSlot> {
    UnsafeMutableRawPointer(lock + 1).assumingMemoryBound(to: ObservationSlot.self)
  }

  deinit {
    _ = observation.deinitialize(count: 1)
  }
}

/// The hub storage of a lazy `Property`: its class says that the hooks are in its core.
@usableFromInline
final class LazyPropertyHubStorage<Message: Sendable, Stored>: PropertyHubStorage<Message, Stored> {}

extension Hub {
  /// Makes the hub of a property, with the property's Observation slot after its lock
  /// and, for a lazy property, `lazy` in its core.
  @usableFromInline static func makeProperty(_ stored: Stored, backlogLimit: Int, lazy: LazyHooks?) -> Hub {
    if backlogLimit < 1 { fatalError("Evented: a backlog limit must be at least 1 (got \(backlogLimit))") }
    var state = HubState<Message, Stored>(stored: stored, backlogLimit: backlogLimit)
    let storage: PropertyHubStorage<Message, Stored>
    if let lazy {
      state.existingCore().pointee.lazy = lazy
      storage = .make(LazyPropertyHubStorage.self, state, tailWords: 1)
    } else {
      storage = .make(PropertyHubStorage.self, state, tailWords: 1)
    }
    storage.withUnsafeMutablePointerToElements { lock in
      UnsafeMutableRawPointer(lock + 1).bindMemory(to: ObservationSlot.self, capacity: 1).initialize(
        to: ObservationSlot())
    }
    return Hub(storage: storage)
  }
}
