/// The handle of one observation: cancel it, ask whether it is active, or keep it in a
/// set.
///
/// ```swift
/// var subscriptions = Set<Subscription>()
/// source.observe { event in print(event) }.store(in: &subscriptions)
/// subscriptions.removeAll()   // ends them
/// ```
///
/// A subscription made without an owner (`observe { … }`) is owned by this handle: it
/// ends when the handle is deinitialized, so keep the handle. A subscription made with
/// `observe(with: owner)` is owned by `owner`; its handle may be discarded, and
/// dropping it does not end the subscription.
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member may be called from any thread.
/// - **Ordering:** ``cancel()`` is final: when it returns, the handler will not start
///   again on any thread. If the handler is running on another thread at that moment,
///   `cancel()` waits for that invocation to return; called from inside the handler
///   itself, it returns at once.
/// - **Reentrancy:** A handler may cancel its own subscription or any other. One
///   cancelled during a delivery pass is not called again, not even later in that pass.
/// - **Lifetime:** The handler and everything it captures are released when the
///   subscription ends (on `cancel()`, when the handle of an owner-less subscription is
///   deinitialized, or once the owner is gone, by the source's next send or sweep).
///
/// - Important: `cancel()` waits for a handler running on another thread. A handler that
///   itself waits for the thread calling `cancel()` (a lock that thread holds, a
///   semaphore it should signal, or a synchronous dispatch to it) deadlocks. This is
///   the one way cancellation can hang. Evented breaks the one cycle it can see: when
///   the running handler is itself blocked in `cancel()` waiting for a handler on the
///   calling thread, `cancel()` returns without waiting (the handler still never
///   starts again).
public final class Subscription: Hashable, Sendable {
  @usableFromInline let core: SubscriptionCore

  /// The handle of `core`; it ends the subscription on deinit if `core` is owned by
  /// its handle.
  @usableFromInline init(core: SubscriptionCore) {
    self.core = core
  }

  @usableFromInline init(core: SubscriptionCore, endsOnDeinit: Bool) {
    core.isOwnedByHandle = endsOnDeinit
    self.core = core
  }

  deinit {
    if core.isOwnedByHandle { core.cancel() }
  }

  /// Ends the subscription now. Idempotent; safe after the source is gone.
  ///
  /// - Important: Waits for an invocation of the handler that is running on another
  ///   thread; see the type's documentation for the one way this can deadlock.
  public func cancel() {
    core.cancel()
  }

  /// Whether the handler may still be called: not cancelled, not completed (for a
  /// once-only subscription), its owner alive and its source not deinitialized.
  public var isActive: Bool {
    !core.isEnded && core.hasOwner && core.isSourceAlive
  }

  /// Inserts this subscription into `set`, as Combine's `AnyCancellable` does.
  ///
  /// Only the handle is stored: for an owner-less subscription, the set becomes the
  /// owner, and removing the handle from the set ends the subscription.
  public func store(in set: inout Set<Subscription>) {
    set.insert(self)
  }

  /// Whether both handles are the same subscription (identity, not handler equality).
  public static func == (lhs: Subscription, rhs: Subscription) -> Bool {
    lhs === rhs
  }

  /// Hashes the handle's identity, so that it can be stored in a `Set<Subscription>`.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(ObjectIdentifier(self))
  }
}
