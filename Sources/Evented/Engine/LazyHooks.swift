// Lazy sources: a source made with `onFirstObserver` and `onLastObserverGone` runs the
// first when its observer count rises from zero and the second when it falls back to
// zero. The hooks are user code: they run outside every lock, never concurrently with
// each other for one source, in the order the count crossed zero; an observer that
// arrives while the stop hook runs gets a start hook after it.
//
// A lazy property keeps its hooks in the `Property` object; a lazy event source in its
// hub's core, which it makes at once, in a storage of its own class, so that an idle
// event source that is not lazy stays as small as before and a subscribe to it pays a
// class check only (a lazy one reads its hooks under the lock).
//
// Counting rides on what every subscription already does. Each subscription of a lazy
// source captures a `LazyObserverToken` beside its handler (the source's `anchor`); the
// token counts up when it is made and down in its deinit, which runs when the
// subscription's handler is released: by `cancel()`, by the end of a once-only
// subscription or an async sequence, by `removeAllObservers()`, or, when its owner
// died, by the sweep that finds it. So the count never waits on the source's lock, and
// the engine's paths are untouched.
//
// Hooks may receive their source. The hooks object is made before the source it serves,
// which attaches itself once initialized; the hooks hold it weakly (a hook that held it
// would keep it alive for good). The runner loads it under the lock with the hook to
// run, and releases it after that hook returns, outside the lock. A hook that receives
// its source does not run once the source is gone, as when the source is deinitialized
// while observed: there is nothing to give it.
//
// A crossing appends its hook to `pending` under this object's lock. The thread that
// finds no hook running becomes the runner: it takes hooks one by one, running each
// with the lock released, until none is left. Crossings made meanwhile, by other
// threads or by a hook itself, are appended and run by that runner, in order.

/// The storage of a lazy event source's hub: its class says that the hooks are in its
/// core, so that a subscribe to any other event source learns it has none without the
/// lock.
@usableFromInline
final class LazyHubStorage<Message: Sendable, Stored>: HubStorage<Message, Stored> {}

extension Hub {
  /// Makes the hub of a lazy event source, with `hooks` in its core.
  static func makeLazy(_ stored: Stored, backlogLimit: Int, hooks: LazyHooks) -> Hub {
    if backlogLimit < 1 { fatalError("Evented: a backlog limit must be at least 1 (got \(backlogLimit))") }
    var state = HubState<Message, Stored>(stored: stored, backlogLimit: backlogLimit)
    state.existingCore().pointee.lazy = hooks
    return Hub(storage: .make(LazyHubStorage.self, state))
  }

  /// The hooks of a lazy event source or property; nil for any other source.
  @inlinable var lazyHooks: LazyHooks? {
    // Both classes are final: comparing the exact type costs a load, where `is` calls
    // the runtime's dynamic cast.
    let type = type(of: storage)
    guard type == LazyHubStorage<Message, Stored>.self || type == LazyPropertyHubStorage<Message, Stored>.self
    else { return nil }
    return lazySourceHooks()
  }

  /// The hooks in the core of a lazy source's hub, read under its lock.
  @usableFromInline func lazySourceHooks() -> LazyHooks? {
    storage.withLock { $0.core?.pointee.lazy }
  }
}

/// The hooks of a lazy source, and its count of observers.
@usableFromInline
final class LazyHooks: Sendable {
  @usableFromInline
  struct State {
    /// The live subscriptions, as counted by their tokens.
    var count = 0
    /// Crossings whose hook has not run yet: true for the first observer, false for
    /// the last one gone.
    var pending: [Bool] = []
    /// Whether a thread is running hooks.
    var isRunning = false
    /// The source, for hooks that receive it; nil for the others, and once it is gone.
    weak var source: AnyObject?

    /// Whether the caller should run the pending hooks (and now counts as running).
    mutating func claimRunner() -> Bool {
      guard !isRunning, !pending.isEmpty else { return false }
      isRunning = true
      return true
    }
  }

  /// The hooks, given the source while it exists (nil for hooks that do not take it).
  let onFirstObserver: @Sendable (AnyObject?) -> Void
  let onLastObserverGone: @Sendable (AnyObject?) -> Void
  let state = Lock.make(State())

  /// Hooks that do not receive their source.
  @usableFromInline init(
    onFirstObserver: @escaping @Sendable () -> Void, onLastObserverGone: @escaping @Sendable () -> Void
  ) {
    self.onFirstObserver = { _ in onFirstObserver() }
    self.onLastObserverGone = { _ in onLastObserverGone() }
  }

  /// Hooks that receive their source, which must ``attach(_:)`` itself before anyone
  /// can observe it. Each runs only while the source exists.
  init<Source: AnyObject>(
    receiving _: Source.Type, onFirstObserver: @escaping @Sendable (Source) -> Void,
    onLastObserverGone: @escaping @Sendable (Source) -> Void
  ) {
    self.onFirstObserver = { source in
      if let source { onFirstObserver(unsafeDowncast(source, to: Source.self)) }
    }
    self.onLastObserverGone = { source in
      if let source { onLastObserverGone(unsafeDowncast(source, to: Source.self)) }
    }
  }

  /// Gives the hooks their source, held weakly; called at the end of its initializer.
  func attach(_ source: AnyObject) {
    state.withLock { $0.source = source }
  }

  /// A token for a new subscription; runs the start hook if it is the first.
  @usableFromInline func token() -> LazyObserverToken {
    let run = state.withLock { state -> Bool in
      state.count += 1
      if state.count == 1 { state.pending.append(true) }
      return state.claimRunner()
    }
    if run { runPending() }
    return LazyObserverToken(hooks: self)
  }

  /// A subscription's token was released; runs the stop hook if it was the last.
  func released() {
    let run = state.withLock { state -> Bool in
      state.count -= 1
      if state.count == 0 { state.pending.append(false) }
      return state.claimRunner()
    }
    if run { runPending() }
  }

  /// Runs the pending hooks in order, each with the lock released, until none is left.
  private func runPending() {
    while true {
      // The source, if any, is held strongly until its hook returns, and released
      // outside the lock: its deinit may run here, and its crossing is run next.
      let next = state.withLock { state -> (isFirst: Bool, source: AnyObject?)? in
        if state.pending.isEmpty {
          state.isRunning = false
          return nil
        }
        return (state.pending.removeFirst(), state.source)
      }
      guard let next else { return }
      if next.isFirst { onFirstObserver(next.source) } else { onLastObserverGone(next.source) }
    }
  }
}

/// Counts one subscription of a lazy source while its handler is held.
@usableFromInline
final class LazyObserverToken: Sendable {
  let hooks: LazyHooks

  init(hooks: LazyHooks) {
    self.hooks = hooks
  }

  deinit {
    hooks.released()
  }
}
