// Promises 2–5 and the overload bound: the engine behind every lock-based source. Every
// operation is "lock, transition, unlock, act": it locks the source's one lock, calls a
// transition of `HubState`, unlocks, and then carries out what the transition returned
// (delivering, waiting, releasing garbage), never calling user code under the lock.
//
// The path of a message, read down once and up once:
//
//   send / change / subscribe with replay   lock (waiting for room if the backlog is
//     → commit                              full), pick the recipients, pack the message
//     → proceed                             unlock; deliver now, or leave it queued for
//     → drain                               the deliverer, or wait to take the role over;
//     → takeNext                            deliver, then each queued delivery
//
// If no thread is delivering for the source, the committing thread becomes the
// deliverer: it delivers its own commit outside the lock, then takes queued commits
// one by one until the queue is empty. Commits made meanwhile, by other threads or by
// handlers on this one, are queued with the snapshot of their commit time. This gives
// every subscription its deliveries one at a time, in commit order, without nesting.

import Synchronization

/// The backlog limit of a source created without one.
@usableFromInline let defaultBacklogLimit = 1_024

/// One source's subscriptions, its stored value and its delivery queue: a handle to
/// one heap object (`HubStorage`) holding `HubState` and the lock that guards it.
@usableFromInline
struct Hub<Message: Sendable, Stored>: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is in the state, guarded by the lock the
  // storage holds. The state's waiting room (`Condition`) relies on that lock too: its
  // tickets are touched and its broadcasts made only while it is held.
  @usableFromInline let storage: HubStorage<Message, Stored>

  @usableFromInline typealias Token = LockToken<HubState<Message, Stored>>

  /// Makes a hub holding `stored`.
  @usableFromInline static func make(_ stored: Stored, backlogLimit: Int = defaultBacklogLimit) -> Hub {
    if backlogLimit < 1 { fatalError("Evented: a backlog limit must be at least 1 (got \(backlogLimit))") }
    return Hub(storage: .make(HubStorage.self, HubState(stored: stored, backlogLimit: backlogLimit)))
  }

  /// The most undelivered messages a subscription holds before a writer waits for room
  /// (``make(_:backlogLimit:)``).
  @usableFromInline var backlogLimit: Int {
    storage.withLock { $0.core?.pointee.queue.backlogLimit ?? defaultBacklogLimit }
  }

  @usableFromInline init(storage: HubStorage<Message, Stored>) {
    self.storage = storage
  }

  /// Whether messages travel in a `Parcel` (see Parcel.swift). A constant in
  /// specialized code: the one place that decides how a message is packed.
  @inlinable static var usesParcels: Bool { MemoryLayout<Message>.size > largeMessageSize }

  // MARK: Locking

  /// Locks for a commit; first waits, if the backlog or a queue subscription is full
  /// and this thread may wait, until there is room.
  @inlinable @inline(__always)
  func lockForCommit() -> Token {
    let token = storage.lock()
    if token.state.pointee.mayHaveToWait() { return waitForRoom(token) }
    return token
  }

  /// Locks for sending an event: ``lockForCommit()`` without asking which thread's
  /// transaction holds the source, as none holds an event source.
  @inlinable @inline(__always)
  func lockForSend() -> Token {
    // Performance: "Instructions per operation" (W1). That question, a call for the
    // thread's identity, was enough to keep the compiler from inlining a send, with its
    // commit, into the caller's loop.
    let token = storage.lock()
    if token.state.pointee.mayHaveToWaitForRoom() { return waitForRoom(token) }
    return token
  }

  // MARK: The path of a message

  /// Commits `message` to every current subscription of an event source and delivers
  /// it. Always inlined: a plain send's whole path, commit included, then runs in the
  /// caller's own specialized code.
  @inlinable @inline(__always)
  func send(_ message: Message) {
    let token = lockForSend()
    guard let recipients = token.state.pointee.recipientsOfCommit() else { return token.unlock() }
    commit(token, to: consume recipients) { _ in message }
  }

  /// Sends `message` from a handler of a derived event source's source, on the thread
  /// that delivers for that source. A handler never waits for room, so when the backlog
  /// is full the message is queued beyond the limit, and the thread owes the room: it
  /// waits for it at the next boundary of its outermost delivery frame, before it
  /// delivers anything more of its own source (`DeliveringThread.settle`). So a busy
  /// source paces its writers by the derived source's backlog too. Likewise, when
  /// another thread delivers the derived source past its turn, this thread takes the
  /// role over there, so that no thread delivers other threads' events for good.
  @inlinable
  func forward(_ message: Message) {
    var token = storage.lock()
    var owesRoom = false
    if token.state.pointee.mayHaveToWait() {
      if DeliveringThread.isDelivering { owesRoom = true } else { token = waitForRoom(token) }
    }
    if token.state.pointee.core?.pointee.queue.isPastTurn == true { owesRoom = true }
    if let recipients = token.state.pointee.recipientsOfCommit() {
      commit(token, to: consume recipients) { _ in message }
    } else {
      token.unlock()
    }
    if owesRoom { DeliveringThread.owe(storage) }
  }

  /// Packs the message `build` makes from the stored value for `recipients`, then
  /// commits and delivers it. Takes over the caller's lock.
  ///
  /// - Parameter inPass: A derived value's commit, made by the delivery of one of its
  ///   roots: see ``deliverInsideFrame(_:core:thread:inPass:)``.
  @inlinable @inline(__always)
  func commit(
    _ token: consuming Token, to recipients: consuming Recipients<Message>, inPass: Bool = false,
    _ build: (inout Stored) -> Message
  ) {
    if Self.usesParcels {
      commit(token, to: consume recipients, as: Parcel<Message>.self, inPass: inPass, build)
    } else {
      commit(token, to: consume recipients, as: Inline<Message>.self, inPass: inPass, build)
    }
  }

  /// ``commit(_:to:inPass:_:)`` with the package type chosen.
  @inlinable
  func commit<P: Package<Message>>(
    _ token: consuming Token, to recipients: consuming Recipients<Message>, as _: P.Type, inPass: Bool,
    _ build: (inout Stored) -> Message
  ) {
    let stored = token.state
    // The recipients move into the package: no second reference to retain and release.
    let package = P.make(for: consume recipients) { build(&stored.pointee.stored) }
    let start = token.state.pointee.queue.start(package) { !DeliveringThread.isDelivering }
    proceed(token, start, package, inPass: inPass)
  }

  /// Carries out `start` after the commit of `first`: unlocks, then delivers, or waits
  /// to take the delivering role over.
  ///
  /// - Parameter inPass: A derived value's commit, made by the delivery of one of its
  ///   roots (see ``deliverInsideFrame(_:core:thread:inPass:)``).
  @inlinable @inline(__always)
  func proceed<P: Package<Message>>(
    _ token: consuming Token, _ start: Start, _ first: consuming P, inPass: Bool = false
  ) {
    switch start {
    case .queued:
      token.unlock()
    case .deliver:
      let core = token.state.pointee.core.unsafelyUnwrapped
      let thread = DeliveringThread.current
      token.unlock()
      if thread.pointee.depth > 0 {
        deliverInsideFrame(consume first, core: core, thread: thread, inPass: inPass)
      } else {
        drain(consume first, core: core, thread: thread)
      }
    case .heir(let ticket):
      waitForTurn(token, ticket)
    }
  }

  /// Delivers `first`, and the queue after it, for a thread that became the deliverer
  /// inside a delivery frame: postponed to the thread's outermost frame, except a
  /// derived value's commit made by the outermost pass itself (`inPass`) while nothing
  /// else waits there. That one is delivered at once, from the engine, inside the
  /// root's pass: it is no handler's write, and the stack holds the same two passes as
  /// a postponed delivery would. Out of line, so that a plain write's path stays small.
  @inlinable @inline(never)
  func deliverInsideFrame<P: Package<Message>>(
    _ first: consuming P, core: UnsafeMutablePointer<HubCore<Message>>,
    thread: UnsafeMutablePointer<DeliveringState>, inPass: Bool
  ) {
    if inPass, thread.pointee.depth == 1, thread.pointee.firstPostponed == nil {
      return drain(first, core: core, thread: thread)
    }
    typealias Drain = PostponedDrain<Message, Stored, P>
    // The thread's spare drain, if it has this type, serves again: no allocation.
    if let spare = thread.pointee.spareDrain, ObjectIdentifier(type(of: spare)) == ObjectIdentifier(Drain.self) {
      let postponed = unsafeDowncast(spare, to: Drain.self)
      thread.pointee.spareDrain = nil
      postponed.hub = self
      postponed.first = consume first
      postponed.core = core
      return DeliveringThread.postpone(thread, postponed)
    }
    // The closure captures nothing: it is made here, in specialized code, so that the
    // postponed drain runs specialized too.
    let postponed = Drain(self, first, core: core) { postponed, thread in
      guard let hub = postponed.hub.take(), let first = postponed.first.take() else { return }
      hub.drain(first, core: postponed.core, thread: thread)
      // Holding nothing of the source now, it is kept for the thread's next one.
      if thread.pointee.spareDrain == nil { thread.pointee.spareDrain = postponed }
    }
    DeliveringThread.postpone(thread, postponed)
  }

  /// Delivers `first`, then every delivery queued meanwhile, then stops delivering.
  ///
  /// The thread counts as delivering meanwhile (it never waits for room in any
  /// backlog), and hands the role over between two deliveries when its turn is over and
  /// another thread waits for it. When nothing is queued after a delivery, it stops
  /// without taking the lock (`tryStop`). `core` is the source's core, which every
  /// source that delivers has, and which outlives the source's deliveries.
  ///
  /// - Parameter thread: The calling thread's ``DeliveringState``.
  @inlinable
  func drain<P: Package<Message>>(
    _ first: consuming P, core: UnsafeMutablePointer<HubCore<Message>>,
    thread: UnsafeMutablePointer<DeliveringState>
  ) {
    let me = thread.pointee.threadID
    thread.pointee.depth += 1
    // Each delivery is released only after the step that follows it (under the lock, or
    // the stop's releasing exchange), which orders its handlers' reads of a lent array
    // before the array's next change in place (ArrayStore.swift).
    guard var delivered = step(after: first.deliver(me: me), core: core, thread: thread) else {
      withExtendedLifetime(first) {}
      return DeliveringThread.exit(thread)
    }
    _ = consume first
    while let next = step(after: delivered.deliver(me: me), core: core, thread: thread) {
      delivered = next
    }
    // Not in a `defer`: the compiler kept that out of line, as a call on every drain.
    DeliveringThread.exit(thread)
  }

  /// The next delivery after one that met only `live` subscriptions (if not, removes
  /// the ended ones first); nil once the thread stopped delivering or handed over.
  @inlinable @inline(__always)
  func step(
    after live: Bool, core: UnsafeMutablePointer<HubCore<Message>>, thread: UnsafeMutablePointer<DeliveringState>
  ) -> Parcel<Message>? {
    // The outermost pass delivers what its handlers' writes postponed, and waits for the
    // room its handlers' forwards owe, before going on.
    if thread.pointee.depth == 1, thread.pointee.hasWorkAtBoundary { DeliveringThread.settle(thread) }
    guard !live || !core.pointee.queue.tryStop() else { return nil }
    return takeNext(sweeping: !live)
  }

  /// Takes the next queued delivery, or stops delivering (or hands the role over).
  /// After a delivery that met an ended or ownerless subscription (`sweeping`), first
  /// removes the ended subscriptions, and releases them after unlocking.
  @inlinable @inline(__always)
  func takeNext(sweeping: Bool) -> Parcel<Message>? {
    guard sweeping else {
      let token = storage.lock()
      let (next, wake) = token.state.pointee.takeNext(newestFirst: Self.plantedNewestFirst)
      wake?.broadcast()
      token.unlock()
      return next
    }
    return sweepAndTakeNext()
  }

  @inlinable @inline(never)
  func sweepAndTakeNext() -> Parcel<Message>? {
    var garbage = Garbage()
    let token = storage.lock()
    let (next, wake) = token.state.pointee.sweepAndTakeNext(into: &garbage, newestFirst: Self.plantedNewestFirst)
    wake?.broadcast()
    token.unlock()
    garbage.dispose()
    return next
  }

  // MARK: Stored values

  /// Reads the stored value under the lock.
  @inlinable @inline(__always)
  func read<Result>(_ body: (borrowing Stored) -> Result) -> Result {
    storage.withLock { body($0.stored) }
  }

  /// The address of the state's version, to load atomically without the lock: valid
  /// while the storage lives. What it holds is `HubState.versionBits`: a thread that
  /// finds `HubState.mayHideBit` set reads the version under the lock instead
  /// (Transaction.swift).
  @inlinable var versionWord: UnsafePointer<Atomic<UInt64>> {
    storage.withUnsafeMutablePointerToHeader { HubState.versionWord(of: $0) }
  }

  /// Runs `body` on the stored value under the lock; commits the message it returns,
  /// if any, to every current subscription, and delivers it.
  ///
  /// `body` is user code run under the lock (an `==`); it must not touch this source.
  /// What it returns is released after unlocking.
  @inlinable
  func commit<Result, Failure: Error>(
    _ body: (inout Stored) throws(Failure) -> (Result, Message?)
  ) throws(Failure) -> Result {
    let token = lockForCommit()
    let outcome: (Result, Message?)
    do throws(Failure) {
      outcome = try body(&token.state.pointee.stored)
    } catch {
      token.unlock()
      throw error
    }
    if outcome.1 != nil { HubState.countCommit(token.state) }
    guard outcome.1 != nil, let recipients = token.state.pointee.recipientsOfCommit() else {
      token.unlock()
      return outcome.0
    }
    commit(token, to: consume recipients) { _ in outcome.1.unsafelyUnwrapped }
    return outcome.0
  }

  // MARK: Planted bugs (none unless built with the FaultInjection trait)

  @inlinable static var plantedNewestFirst: Bool {
    #if FaultInjection
      Planted.deliverOutOfOrder
    #else
      false
    #endif
  }
}

/// The heap object of a `Hub`: its state, with the lock as the tail element.
@usableFromInline
class HubStorage<Message: Sendable, Stored>: LockStorage<HubState<Message, Stored>> {
  /// Ends every subscription without waiting, so that deliveries already submitted to
  /// a queue and not started never run: a source that is gone delivers nothing more.
  /// A handler running on another thread finishes and then releases itself.
  deinit {
    guard let core = withLock({ $0.core.take() }) else { return }
    var entries: [SubscriptionCore] = []
    for case let entry? in core.pointee.subscribers.slots { entries.append(entry) }
    for removal in core.pointee.subscribers.removals.values { entries.append(contentsOf: removal.lazy.map { $0 }) }
    core.deinitialize(count: 1)
    core.deallocate()
    // Ended from the outermost such release of the thread: a handler released here may
    // hold the last reference to another source (a chain of sources forwarding from
    // handlers), which ends its own subscriptions in turn, one after the other.
    DeliveringThread.tearDown([EndingSubscriptions(entries)])
  }
}

/// Subscriptions of a source that is gone, ended when this is released.
@usableFromInline
final class EndingSubscriptions {
  @usableFromInline let entries: [SubscriptionCore]

  @usableFromInline init(_ entries: [SubscriptionCore]) {
    self.entries = entries
  }

  deinit {
    for entry in entries { entry.endSwept() }
  }
}

/// A source's delivery of `first`, and of its queue after it, postponed to the outermost
/// delivery frame of the thread, which holds the source's delivering role meanwhile.
/// Once run, it holds nothing of the source, and waits as the thread's spare
/// (`DeliveringState.spareDrain`) for the next delivery of its type postponed there.
/// Touched only by its thread.
@usableFromInline
final class PostponedDrain<Message: Sendable, Stored, P: Package<Message>>: PostponedDelivery {
  @usableFromInline @exclusivity(unchecked) var hub: Hub<Message, Stored>?
  @usableFromInline @exclusivity(unchecked) var first: P?
  @usableFromInline @exclusivity(unchecked) var core: UnsafeMutablePointer<HubCore<Message>>
  @usableFromInline let body: (PostponedDrain, UnsafeMutablePointer<DeliveringState>) -> Void

  @inlinable init(
    _ hub: Hub<Message, Stored>, _ first: consuming P, core: UnsafeMutablePointer<HubCore<Message>>,
    body: @escaping (PostponedDrain, UnsafeMutablePointer<DeliveringState>) -> Void
  ) {
    self.hub = hub
    self.first = first
    self.core = core
    self.body = body
  }

  /// Delivers `first`, then the queue.
  @inlinable override func run(_ thread: UnsafeMutablePointer<DeliveringState>) {
    body(self, thread)
  }
}
