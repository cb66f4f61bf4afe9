// What wakes `settles`: a signal that every change a test may wait for raises.
//
// The support types raise it after each write: `Monitor.withLock` (and so `Recorder`,
// `Counter`, `Gate`, `LiveCount`, `SubscriptionBox`, `AsyncGate`), `Flag.set`, the
// writes of `Number`, and the deinit of an `Owner`. A test-local type that a test waits
// on raises it itself (`didSet { Changes.signal() }`). State inside Evented raises
// nothing: a test waits for it through something that follows it and does signal (a
// task it awaits, a handler that records, a capture or an owner that is released), or,
// for a task's own progress (being suspended in a wait of the library), runs that task
// on `SignallingExecutor`.
//
// Scopes: the tests run in parallel, and a wait that every other test's changes woke
// would re-check all the time. So a support object belongs to the test whose task made
// it, and its changes wake only that test's waits (and waits made outside any test). An
// object made outside a test's tasks (on a thread, in a detached task), and a plain
// `signal()`, wake every wait. Share support objects between tests only if they are
// made outside them.
//
// No lost wake-up: a waiter registers its `WakeUps` (and its scope's bit), then
// re-checks its condition; a signaller changes its state, then looks for waiters. Each
// side puts a sequentially consistent fence between its write and its read, so at least
// one of them sees the other's write: either the check sees the change, or the signal
// finds the waiter and wakes it (a wake that comes while the waiter is checking ends its
// next wait at once). With no waiter in its scope, a signal costs a fence and a load.

import Synchronization
import Testing

/// The waits under way, with the scope of each.
private let watchers = Monitor<[ObjectIdentifier: (wakeUps: WakeUps, scope: Int?)]>([:], signalsChanges: false)
/// The scopes that have waits under way, as bits (``scopeBit(_:)``), so that a signal
/// that can wake nobody costs no lock; written only under the lock of `watchers`.
private let watchedScopes = Atomic<UInt64>(0)

/// The bit of `scope` in `watchedScopes`: one of 63 for a test (two tests may share
/// one, which only costs a look), the top one for waits made outside any test.
private func scopeBit(_ scope: Int?) -> UInt64 {
  guard let scope else { return 1 << 63 }
  return 1 << (UInt64(bitPattern: Int64(scope)) % 63)
}

/// Stores the bits of the scopes in `watchers`.
///
/// - Precondition: Called inside the lock of `watchers`.
private func storeWatchedScopes(_ watchers: [ObjectIdentifier: (wakeUps: WakeUps, scope: Int?)]) {
  watchedScopes.store(watchers.values.reduce(0) { $0 | scopeBit($1.scope) }, ordering: .relaxed)
}

/// The signal that wakes the `settles` under way to re-check their conditions.
enum Changes {
  /// Set while a waiter checks its condition: a read that signals must not wake it.
  @TaskLocal private static var isChecking = false

  /// The scope of what is made or waited for now: the running test, if any (nil for
  /// none, which every signal reaches and which reaches every wait).
  static var currentScope: Int? { Test.current?.id.hashValue }

  /// Wakes the waits of `scope` and those made outside any test; with nil, every wait.
  /// Call it after the change, never before.
  static func signal(_ scope: Int? = nil) {
    atomicMemoryFence(ordering: .sequentiallyConsistent)
    let watched = watchedScopes.load(ordering: .relaxed)
    if watched == 0 { return }
    if scope != nil, watched & (scopeBit(scope) | scopeBit(nil)) == 0 { return }
    if isChecking { return }
    watchers.read { watchers in
      for watcher in watchers.values where scope == nil || watcher.scope == nil || watcher.scope == scope {
        watcher.wakeUps.wake()
      }
    }
  }

  /// Runs `body` with `wakeUps` woken by the signals of the current scope.
  static func watch<Result>(
    isolation: isolated (any Actor)? = #isolation, with wakeUps: WakeUps, _ body: () async -> Result
  ) async -> Result {
    let key = ObjectIdentifier(wakeUps)
    let scope = currentScope
    watchers.withLock { watchers in
      watchers[key] = (wakeUps, scope)
      storeWatchedScopes(watchers)
    }
    defer {
      watchers.withLock { watchers in
        watchers[key] = nil
        storeWatchedScopes(watchers)
      }
    }
    return await body()
  }

  /// Evaluates a waiter's condition, after registering it with ``watch(isolation:with:_:)``.
  static func check(isolation: isolated (any Actor)? = #isolation, _ isDone: () async -> Bool) async -> Bool {
    atomicMemoryFence(ordering: .sequentiallyConsistent)
    return await $isChecking.withValue(true) { await isDone() }
  }
}
