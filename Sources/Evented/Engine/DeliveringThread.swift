// Promise 5 (reentrancy without deadlock), the overload bound, and deliveries that never
// nest:
//
// - A thread inside a delivery pass, a queued handler or a transaction never waits for
//   room in any backlog, so a handler can neither wait for its own source nor close a
//   cycle of waits between sources.
// - A commit that would make such a thread the deliverer of another source does not
//   deliver there and then, inside the handler that wrote: the delivery is postponed
//   (`postpone`) to the thread's outermost delivery frame, which runs postponed
//   deliveries one after the other once the handler has returned (`runPostponed`). So
//   a write made in a handler is delivered after that handler returns, and the stack
//   does not grow with the length of a chain of sources whose handlers write to the
//   next one: at most two passes are on the stack, the outermost and a postponed one.
//   The one commit delivered at once is a derived value's, made by the outermost pass
//   itself with nothing postponed (`Hub.deliverInsideFrame`): no handler is running
//   then, and the stack holds the same two passes.
// - A transaction (Transaction.swift) counts as a delivery frame: its commits are
//   delivered when it ends.
// - A derived event source's handler that forwards an event to the derived source's
//   full backlog (`Hub.forward`) does not wait either: the thread owes the room, and
//   waits for it at the next boundary of its outermost frame (`settle`), after its
//   postponed deliveries, holding no delivering role but that frame's own. No wait can
//   close a cycle there: the derived source's deliverer is some thread's postponed
//   delivery, which never waits, so the backlog always drains.

import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// What the engine keeps per thread: how many delivery frames it is inside, and the
/// deliveries postponed to the outermost one.
@usableFromInline
struct DeliveringState {
  /// Delivery passes, queued handler calls and transactions the thread is inside.
  @usableFromInline var depth = 0
  /// Deliveries postponed to the outermost frame, in the order they were committed: a
  /// list from `firstPostponed` to `lastPostponed`, which the list holds (each by the
  /// one before it), so the last is not retained here; nil when the list is empty.
  @usableFromInline var firstPostponed: PostponedDelivery?
  @usableFromInline var lastPostponed: Unmanaged<PostponedDelivery>?
  /// Sources that a forward from a handler on this thread filled beyond their backlog
  /// limit, whose room the thread waits for at the outermost frame's next boundary.
  @usableFromInline var owedRoom: [any OwedRoom] = []
  /// A postponed drain that has run, kept for the next one of its type (Hub.swift).
  @usableFromInline var spareDrain: PostponedDelivery?
  /// The transaction the thread is inside, if any (Transaction.swift).
  @usableFromInline var transaction: RunningTransaction?
  /// The bookkeeping of the thread's last transaction, kept for its next one.
  @usableFromInline var spareTransaction: RunningTransaction?
  /// Derived values and derived event sources whose release a deinit on this thread
  /// postponed (``DeliveringThread/tearDown(_:)``).
  @usableFromInline var teardown: [AnyObject] = []
  @usableFromInline var isTearingDown = false
  /// An empty snapshot kept for the next evaluation of a derived value on this thread
  /// (Snapshot.swift), so that evaluating allocates nothing.
  @usableFromInline var spareSnapshot: Snapshot?
  /// Observation sites of derived values and arrays that changed during the thread's
  /// delivery frames, notified once the outermost frame has ended
  /// (ObservationSite.swift), after the synchronous handlers of the write.
  @usableFromInline var changedSites: [ObservationSite] = []
  /// The identity of the thread, which made the state (`currentThreadID()`).
  @usableFromInline let ownThreadID = freshThreadID()

  @usableFromInline init() {}

  /// `currentThreadID()` on the thread of this state, without a call. Read from the
  /// thread itself with the FaultInjection trait, where a planted bug may make that
  /// stale.
  @inlinable var threadID: UInt {
    #if FaultInjection
      currentThreadID()
    #else
      ownThreadID
    #endif
  }

  /// Whether the outermost frame has postponed deliveries to run or room to wait for.
  @inlinable var hasWorkAtBoundary: Bool { firstPostponed != nil || !owedRoom.isEmpty }

  /// Whether the outermost frame has work at its end: ``hasWorkAtBoundary``, or
  /// Observation sites to notify.
  @inlinable var hasWorkAtEnd: Bool { hasWorkAtBoundary || !changedSites.isEmpty }
}

/// The calling thread's ``DeliveringState``.
@usableFromInline
enum DeliveringThread {
  /// The thread-specific key plus one, once made; 0 before. An atomic with a constant
  /// initial value is initialized statically: reading it is a load, where a `static let`
  /// made by a closure would check its one-time initialization on every lookup.
  @usableFromInline static let keyWord = Atomic<UInt>(0)

  /// The thread-specific key of the states, made if needed.
  @usableFromInline static var key: pthread_key_t {
    let word = keyWord.load(ordering: .acquiring)
    if word != 0 { return pthread_key_t(truncatingIfNeeded: word &- 1) }
    return makeKey()
  }

  /// Makes the key, or returns the one another thread made first.
  @usableFromInline static func makeKey() -> pthread_key_t {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { raw in
      guard let state = raw?.assumingMemoryBound(to: DeliveringState.self) else { return }
      state.deinitialize(count: 1)
      state.deallocate()
    }
    if status != 0 { fatalError("Evented: pthread_key_create failed with error \(status)") }
    let (exchanged, found) = keyWord.compareExchange(
      expected: 0, desired: UInt(key) &+ 1, ordering: .acquiringAndReleasing)
    if exchanged { return key }
    pthread_key_delete(key)
    return pthread_key_t(truncatingIfNeeded: found &- 1)
  }

  /// The calling thread's state, or nil if it never made one.
  @usableFromInline static var existing: UnsafeMutablePointer<DeliveringState>? {
    let word = keyWord.load(ordering: .acquiring)
    if word == 0 { return nil }  // No thread has made one yet.
    return pthread_getspecific(pthread_key_t(truncatingIfNeeded: word &- 1))?.assumingMemoryBound(
      to: DeliveringState.self)
  }

  /// The calling thread's state, made if needed.
  @inlinable static var current: UnsafeMutablePointer<DeliveringState> {
    if let existing { return existing }
    return make()
  }

  /// Makes the calling thread's state.
  @usableFromInline @inline(never) static func make() -> UnsafeMutablePointer<DeliveringState> {
    let state = UnsafeMutablePointer<DeliveringState>.allocate(capacity: 1)
    state.initialize(to: DeliveringState())
    pthread_setspecific(key, state)
    return state
  }

  /// Whether the calling thread is delivering for any source, running a handler or
  /// inside a transaction.
  @inlinable static var isDelivering: Bool {
    guard let state = existing else { return false }
    return state.pointee.depth > 0
  }

  /// The calling thread's state if it is inside a delivery frame.
  @inlinable static var ifDelivering: UnsafeMutablePointer<DeliveringState>? {
    guard let state = existing, state.pointee.depth > 0 else { return nil }
    return state
  }

  /// Counts the calling thread as delivering until the matching ``exit(_:)``.
  ///
  /// - Returns: the state to pass to `exit`.
  @inlinable static func enter() -> UnsafeMutablePointer<DeliveringState> {
    let state = current
    state.pointee.depth += 1
    return state
  }

  /// Ends what the matching ``enter()`` began; the outermost frame first runs what was
  /// postponed to it.
  @inlinable @inline(__always)
  static func exit(_ state: UnsafeMutablePointer<DeliveringState>) {
    if state.pointee.depth == 1, state.pointee.hasWorkAtEnd { return exitOutermost(state) }
    state.pointee.depth -= 1
  }

  /// The end of the outermost frame, with work at its boundary: settles, leaves the
  /// frame, then notifies the Observation sites that changed, outside every frame (their
  /// scopes' `onChange` may write, and those writes are delivered at once, as outside
  /// any handler).
  @usableFromInline @inline(never)
  static func exitOutermost(_ state: UnsafeMutablePointer<DeliveringState>) {
    settle(state)
    state.pointee.depth -= 1
    while !state.pointee.changedSites.isEmpty {
      let sites = state.pointee.changedSites
      state.pointee.changedSites = []
      for site in sites { site.notify() }
    }
  }

  /// Notifies `site` once the calling thread's outermost delivery frame has ended, or
  /// now outside any frame.
  @usableFromInline static func notifyAfterFrame(_ site: ObservationSite) {
    guard let state = ifDelivering else { return site.notify() }
    if !state.pointee.changedSites.contains(where: { $0 === site }) { state.pointee.changedSites.append(site) }
  }

  /// At a boundary of the outermost frame: runs the postponed deliveries, then waits for
  /// the room that forwards made on this thread owe.
  @usableFromInline @inline(never)
  static func settle(_ state: UnsafeMutablePointer<DeliveringState>) {
    while true {
      if state.pointee.firstPostponed != nil { runPostponed(state) }
      // Taking a role over delivers, and may postpone more or owe again.
      guard let owed = state.pointee.owedRoom.popLast() else { return }
      owed.waitForOwedRoom()
    }
  }

  /// Records that the calling thread, inside a delivery frame, filled `source` beyond its
  /// backlog limit (see `Hub.forward`). Outside any frame, there is nothing to owe.
  @usableFromInline @inline(never)
  static func owe(_ source: any OwedRoom) {
    guard let state = ifDelivering else { return }
    if !state.pointee.owedRoom.contains(where: { $0 === source }) { state.pointee.owedRoom.append(source) }
  }

  /// Postpones `delivery` to the outermost delivery frame of the calling thread, which
  /// must be inside one.
  @inlinable static func postpone(_ state: UnsafeMutablePointer<DeliveringState>, _ delivery: PostponedDelivery) {
    if let last = state.pointee.lastPostponed {
      last._withUnsafeGuaranteedRef { $0.next = delivery }
    } else {
      state.pointee.firstPostponed = delivery
    }
    state.pointee.lastPostponed = Unmanaged.passUnretained(delivery)
  }

  /// Runs the postponed deliveries, including those they postpone in turn, in order.
  /// Called by the outermost frame (depth 1) between two of its own deliveries.
  @usableFromInline @inline(never)
  static func runPostponed(_ state: UnsafeMutablePointer<DeliveringState>) {
    // Each reference moved, not copied: the list's own, then the delivery's next.
    while let delivery = state.pointee.firstPostponed.take() {
      state.pointee.firstPostponed = delivery.next.take()
      if state.pointee.firstPostponed == nil { state.pointee.lastPostponed = nil }
      delivery.run(state)
    }
  }
}

/// A source whose room a thread owes (see `DeliveringThread.owe`).
@usableFromInline
protocol OwedRoom: AnyObject {
  /// Waits until the source's backlog has room (see `Hub.waitForOwedRoom`).
  func waitForOwedRoom()
}

/// A delivery postponed to the outermost delivery frame of its thread.
@usableFromInline
class PostponedDelivery {
  /// The next one in the thread's list; touched only by that thread.
  @usableFromInline @exclusivity(unchecked) final var next: PostponedDelivery?

  @usableFromInline init() {}

  /// Delivers, on the thread that postponed it.
  @usableFromInline func run(_ thread: UnsafeMutablePointer<DeliveringState>) {}
}

extension DeliveringThread {
  /// Releases `below`, the nodes that a node being freed held (the last references to
  /// them), one at a time from the outermost such deinit of the thread, not by each
  /// other's deinit in turn: freeing a chain of derived values or derived event sources
  /// does not recurse as deep as the chain.
  @usableFromInline static func tearDown(_ below: consuming [AnyObject]) {
    let thread = current
    if thread.pointee.isTearingDown { return thread.pointee.teardown.append(contentsOf: below) }
    thread.pointee.isTearingDown = true
    var held = below
    swap(&thread.pointee.teardown, &held)  // moved, so that no second array holds them
    while let node = thread.pointee.teardown.popLast() { _ = node }
    thread.pointee.isTearingDown = false
  }
}
