// Objects that count themselves, to show when owners and captures are released.

import Evented

/// The number of live objects of one kind.
final class LiveCount: Sendable {
  private let counter = Counter()

  init() {}

  var value: Int { counter.value }

  func born() { counter.increment() }
  func died() { counter.decrement() }

  /// Waits until exactly `target` objects are alive.
  @discardableResult
  func wait(for target: Int) -> Bool { counter.wait(for: target) }
}

/// An owner or a captured object that is counted while it lives.
final class Tracked: Sendable {
  let live: LiveCount
  let id: Int

  init(_ live: LiveCount, id: Int = 0) {
    self.live = live
    self.id = id
    live.born()
  }

  deinit { live.died() }
}

/// A plain owner for subscriptions. Its deinit signals `Changes`: a wait for a count of
/// subscriptions may be waiting for an owner to go.
final class Owner: Sendable {
  private let scope = Changes.currentScope

  init() {}

  deinit { Changes.signal(scope) }
}

/// An object that runs `onDeinit` when it is deinitialized.
final class DeinitProbe: Sendable {
  private let onDeinit: @Sendable () -> Void

  init(_ onDeinit: @escaping @Sendable () -> Void) {
    self.onDeinit = onDeinit
  }

  deinit { onDeinit() }
}

/// A late-bound subscription, for handlers that cancel themselves or each other.
final class SubscriptionBox: Sendable {
  private let stored = Monitor<Subscription?>(nil)

  init() {}

  var subscription: Subscription? {
    get { stored.current }
    set { stored.withLock { $0 = newValue } }
  }

  func cancel() { subscription?.cancel() }
}

/// A weak reference that closures can share, to see whether an object was freed.
final class WeakReference: @unchecked Sendable {
  // @unchecked Sendable: the runtime loads and stores a weak reference atomically.
  weak var value: AnyObject?
  init(_ value: AnyObject?) { self.value = value }
}
