// The overload bound of the actor variants (Guarantees.md, "Overload"): a handler
// subscription holds at most `limit` undelivered messages from senders that may wait.
//
// Each handler subscription counts its undelivered messages (`ActorHandler.undelivered`):
// a push adds one, on the actor, before queueing; the draining task takes one off as it
// starts each delivery. A send or write from outside a handler first looks, on the actor,
// for a live handler subscription of its source at the limit. While there is one, it
// suspends in `wait(while:)` (which releases the actor, so handlers calling into it go
// on), and looks again once resumed. Then it commits synchronously, as it always did: the
// look and the commit run in one turn of the actor, so no waiting sender ever pushes a
// queue past the limit, and commit order and `modify`'s atomicity are unchanged. Both
// actors' `send` and `setValue` take this path through `ActorBoundedSource`, below.
//
// `waiters` (guarded by its lock) holds the suspended senders of one source, with the
// count of them mirrored in `waiterCount` (written only under that lock). They are all
// resumed, outside the lock, when a queue goes from the limit to one below it (by its
// draining task), and when a handler subscription ends; a cancelled waiter resumes
// itself. A resumed sender looks again, and may wait again.
//
// First come, first served: a sender that finds a queue full takes a ticket, and
// tickets commit in the order they were taken. While any ticket is out, a sender that
// may wait commits only as the oldest ticket's holder, so a running sender never takes
// the room a waiting one was woken for (it used to: one writer could commit tens of
// thousands of times while another waited for seconds). Tickets are taken and returned
// on the actor, in `commitWhenRoom`; the holder of the oldest waits for room, the others
// for their turn, and returning a ticket wakes the waiters.
//
// No lost wake-up: a sender registers, then re-checks its subscription; a waker lowers
// the count or ends the subscription, then looks for waiters. Each side puts a
// sequentially consistent fence between its write and its read, so at least one of them
// sees the other's write.
//
// Who never waits: a call made inside a handler's call (`call`, a task-local mark of the
// draining task's numbered calls, bound around each call: inherited by child tasks and
// by tasks the handler starts with `Task {}`, and void once that call returned), and a
// call from a cancelled task, up to twice the limit; past that a cancelled task's send
// is refused. So a handler never waits inside Evented, nor does a task it awaits, and no
// cycle of waits can form through it; a task a handler left running waits like any
// other sender.

import Synchronization

/// The senders of one actor variant waiting for room in its handlers' queues.
@usableFromInline
final class ActorBacklog: Sendable {
  /// The handler call the current task runs in, or was started from: a mark that stays
  /// with every task a handler starts, and that counts only while that call runs.
  @TaskLocal @usableFromInline static var call: HandlerCall?

  /// A mark of one handler call (see ``call``): the calls of one draining task and the
  /// number of this one.
  @usableFromInline
  struct HandlerCall: Sendable {
    @usableFromInline let calls: Calls
    @usableFromInline let number: UInt

    /// Whether the call is still running.
    var isRunning: Bool { calls.running.load(ordering: .acquiring) == number }
  }

  /// The handler calls of one draining task, numbered; `running` is the number of the
  /// call in progress, or 0 between calls.
  @usableFromInline
  final class Calls: Sendable {
    @usableFromInline let running = Atomic<UInt>(0)
    @usableFromInline let count = Atomic<UInt>(0)

    @usableFromInline init() {}

    /// Runs one handler call, marked as such for the sends made inside it.
    @usableFromInline
    func run(_ body: () async -> Void) async {
      // Only the draining task that owns this object counts and runs calls.
      let number = count.load(ordering: .relaxed) &+ 1
      count.store(number, ordering: .relaxed)
      running.store(number, ordering: .releasing)
      await ActorBacklog.$call.withValue(HandlerCall(calls: self, number: number)) { await body() }
      running.store(0, ordering: .releasing)
    }
  }

  /// The most undelivered messages a handler subscription holds from senders that wait.
  @usableFromInline let limit: Int
  /// How many senders wait; written only under the lock of `waiters`.
  let waiterCount = Atomic<Int>(0)
  /// How many tickets are out; written only under the lock of `waiters`, read on the
  /// actor, where tickets are taken and returned.
  @usableFromInline let ticketCount = Atomic<Int>(0)
  let waiters = Lock.make(ActorWaiters())

  @usableFromInline init(limit: Int) {
    self.limit = limit
  }

  /// Whether a send or write made now comes from a handler's call that is still
  /// running (directly, or from a task the call started): it never waits.
  static var isInHandlerCall: Bool {
    call?.isRunning ?? false
  }

  /// Suspends until woken, unless `isFull` is already false once registered, or the
  /// task is cancelled.
  ///
  /// - Parameter isFull: Whether the subscription waited for is still live and at the
  ///   limit; called once, after registering.
  func wait(while isFull: () -> Bool) async {
    let id = waiters.withLock { $0.makeID() }
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
        waiters.withLock { waiters in
          waiters.list.append((id, continuation))
          waiterCount.store(waiters.list.count, ordering: .relaxed)
        }
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        if !isFull() || Task.isCancelled { resume(id) }
      }
    } onCancel: {
      resume(id)
    }
  }

  /// Whether a sender holds a ticket: then a sender without one must take one.
  @inlinable var hasTickets: Bool { ticketCount.load(ordering: .relaxed) != 0 }

  /// Takes the next ticket.
  func takeTicket() -> UInt64 {
    waiters.withLock { waiters in
      let ticket = waiters.makeID()
      waiters.tickets.append(ticket)
      ticketCount.store(waiters.tickets.count, ordering: .relaxed)
      return ticket
    }
  }

  /// Whether `ticket` is the oldest one out.
  func isOldest(_ ticket: UInt64) -> Bool {
    waiters.withLock { $0.tickets.first == ticket }
  }

  /// Returns `ticket` and wakes the waiters, one of which may hold the next.
  func returnTicket(_ ticket: UInt64) {
    waiters.withLock { waiters in
      if let index = waiters.tickets.firstIndex(of: ticket) { waiters.tickets.remove(at: index) }
      ticketCount.store(waiters.tickets.count, ordering: .relaxed)
    }
    wake()
  }

  /// Suspends until `ticket` is the oldest (or the task is cancelled).
  func waitForTurn(_ ticket: UInt64) async {
    await wait { !isOldest(ticket) }
  }

  /// Resumes the waiter `id`, if it still waits.
  private func resume(_ id: UInt64) {
    let found = waiters.withLock { waiters in
      let found = waiters.remove(id)
      waiterCount.store(waiters.list.count, ordering: .relaxed)
      return found
    }
    found?.resume()
  }

  /// Resumes every waiter, after a queue went below the limit or a subscription ended.
  ///
  /// - Precondition: The caller has lowered the count or ended the subscription just
  ///   before.
  @usableFromInline
  func wake() {
    atomicMemoryFence(ordering: .sequentiallyConsistent)
    if waiterCount.load(ordering: .relaxed) == 0 { return }
    let woken = waiters.withLock { waiters in
      let woken = waiters.list
      waiters.list = []
      waiterCount.store(0, ordering: .relaxed)
      return woken
    }
    for (_, continuation) in woken { continuation.resume() }
  }
}

/// An actor variant whose sends or writes from outside a handler wait for room in its
/// handler subscriptions' queues: what ``ActorEventSource`` and ``ActorProperty`` share
/// of the overload bound. Each says where its handler subscriptions are and how a send
/// or write commits; the look, the wait and the commit are written here once.
@usableFromInline
protocol ActorBoundedSource: Actor {
  /// What a send or write carries: an event, or a new value.
  associatedtype Input: Sendable
  /// What a handler subscription receives: an event, or a property's update.
  associatedtype Delivered: Sendable

  /// Runs `body` with the handler subscriptions, in place (a copy of the list would
  /// retain and release it).
  func withHandlerSinks<Result>(_ body: (inout ActorSinks<Delivered>) -> Result) -> Result

  /// Commits `input` now, whatever the queues hold.
  func commit(_ input: Input)
}

extension ActorBoundedSource {
  /// Commits `input` once every handler subscription has room; at once for a call from
  /// a handler's call (or a task it started, while the call runs). A cancelled task
  /// does not wait either, up to twice the limit; past that its send is refused.
  ///
  /// - Returns: Whether it committed: false only for a cancelled task's send that found
  ///   a handler subscription holding twice the limit.
  @inlinable
  nonisolated(nonsending) func commitWithinBound(_ input: Input) async -> Bool {
    // One synchronous call to the actor unless a queue is full: an actor-isolated
    // async `send` cost about 90 instructions more per send (callgrind, W1), from
    // executor switching.
    if await commitUnlessFull(input) { return true }
    return await commitWhenRoom(input)
  }

  /// Commits `input` unless a handler subscription is at the limit.
  ///
  /// - Returns: Whether it committed.
  @inlinable
  func commitUnlessFull(_ input: Input) -> Bool {
    if withHandlerSinks({ $0.hasHandlerAtLimit() || $0.backlog?.hasTickets == true }) { return false }
    commit(input)
    return true
  }

  /// Commits `input` once every handler subscription has room, or refuses it (see
  /// ``commitWithinBound(_:)``).
  ///
  /// Senders that wait commit in the order they first found a queue full (a ticket
  /// each); a cancelled one leaves the line.
  @usableFromInline
  func commitWhenRoom(_ input: Input) async -> Bool {
    guard let backlog = withHandlerSinks({ $0.backlog }) else {
      commit(input)
      return true
    }
    var ticket: UInt64?
    while !ActorBacklog.isInHandlerCall {
      let full = withHandlerSinks { $0.firstAtLimit() }
      let isTurn = ticket.map { backlog.isOldest($0) } ?? !backlog.hasTickets
      if full == nil, isTurn { break }
      if Task.isCancelled {
        if let held = ticket.take() { backlog.returnTicket(held) }
        if withHandlerSinks({ $0.hasHandlerAtLimit(times: 2) }) { return false }
        break
      }
      let held = ticket ?? backlog.takeTicket()
      ticket = held
      if let full, isTurn || backlog.isOldest(held) {
        await full.waitForRoom()
      } else {
        await backlog.waitForTurn(held)
      }
    }
    commit(input)
    if let held = ticket { backlog.returnTicket(held) }
    return true
  }
}

/// The senders waiting for room, guarded by the lock of `ActorBacklog.waiters`.
struct ActorWaiters {
  var nextID: UInt64 = 0
  /// The tickets out, oldest first.
  var tickets: [UInt64] = []
  var list: [(id: UInt64, continuation: UnsafeContinuation<Void, Never>)] = []

  mutating func makeID() -> UInt64 {
    nextID &+= 1
    return nextID
  }

  /// - Returns: The continuation of waiter `id`, removed, or nil if it was resumed.
  mutating func remove(_ id: UInt64) -> UnsafeContinuation<Void, Never>? {
    guard let index = list.firstIndex(where: { $0.id == id }) else { return nil }
    return list.remove(at: index).continuation
  }
}
