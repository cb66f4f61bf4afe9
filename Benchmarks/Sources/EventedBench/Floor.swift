// The floor: the least a thread-safe broadcaster can do. A `Mutex`-guarded array of
// closures; a send copies the array under the lock and calls the closures outside it.

import Synchronization

/// An event broadcaster with nothing but a lock and an array of closures.
final class FloorSource<Value: Sendable>: Sendable {
  typealias Handler = @Sendable (Value) -> Void

  struct Slot {
    let id: Int
    let handler: Handler
  }

  struct State {
    var slots: [Slot] = []
    var nextID = 0
  }

  let state = Mutex(State())

  /// Adds `handler`; returns the identifier that cancels it.
  func subscribe(_ handler: @escaping Handler) -> Int {
    state.withLock { state in
      state.nextID += 1
      state.slots.append(Slot(id: state.nextID, handler: handler))
      return state.nextID
    }
  }

  /// Removes the handler added with `id` (searching from the newest).
  func cancel(_ id: Int) {
    let removed: Slot? = state.withLock { state in
      guard let index = state.slots.lastIndex(where: { $0.id == id }) else { return nil }
      return state.slots.remove(at: index)
    }
    _ = removed
  }

  func send(_ value: Value) {
    let snapshot = state.withLock { $0.slots }
    for slot in snapshot { slot.handler(value) }
  }
}

/// A value with subscribers: the floor's property. Skips writes equal to the current
/// value, as Evented's `Property` does for `Equatable` values.
final class FloorProperty<Value: Sendable & Equatable>: Sendable {
  typealias Handler = @Sendable (Value) -> Void

  struct State {
    var value: Value
    var handlers: [Handler] = []
  }

  let state: Mutex<State>

  init(_ value: Value) {
    state = Mutex(State(value: value))
  }

  func subscribe(_ handler: @escaping Handler) {
    state.withLock { $0.handlers.append(handler) }
  }

  var value: Value {
    get { state.withLock { $0.value } }
    set {
      let snapshot: [Handler]? = state.withLock { state in
        if state.value == newValue { return nil }
        state.value = newValue
        return state.handlers
      }
      guard let snapshot else { return }
      for handler in snapshot { handler(newValue) }
    }
  }
}
