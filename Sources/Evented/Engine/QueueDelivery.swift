// The overload bound for `.queue` and `.main` delivery of events: a subscription that
// runs its handler on a dispatch queue holds at most its source's backlog limit of
// submitted messages that have not run yet, and a thread that may wait waits, before
// committing, while one of its source's queue subscriptions is at that limit. A state
// observer's target (a property's, an array's, a derived value's) has a mailbox
// instead (Mailbox.swift): it holds one waiting state, so it is never full and nobody
// waits for it.
//
// Each such subscription has a `DeliveryTarget`: its serial queue and the count of
// submissions that have not finished. The source keeps one `QueuePressure`, the set
// of its targets that are full. A target becomes full when its count reaches the limit
// and stops being full when it is down to half the limit, so that waiters do not wake
// for every handler call. Both crossings re-evaluate the target under the pressure's
// mutex from the count as it is then; every crossing re-evaluates, so the last one
// always leaves the set right.
//
// Who waits: a thread that may wait for room (not delivering, not in a handler), and
// only for targets whose queue is not the one it runs on: a block running on `q` (or
// on a queue that targets `q`), or the main thread for `.main`, never waits for `q`'s
// subscriptions, which could not run before it returns. Queues are recognized by
// dispatch-specific values set on each queue handlers are submitted to: its mark under
// one key shared by all (the nearest marked queue: is this thread on any?), and under a
// key of its own (is this thread on this queue, or on a queue that targets it, even
// when a queue between them is marked too?).

import Dispatch
import Synchronization

/// Where one subscription's handler is submitted, and how many of its submissions have
/// not finished.
@usableFromInline
final class DeliveryTarget: Sendable {
  /// The subscription's serial queue.
  @usableFromInline let queue: DispatchQueue
  /// Identifies the queue given to `.queue(_:)` (``QueuePressure/mark(_:)``, see
  /// ``QueuePressure/currentQueue``).
  let base: UInt
  /// Submissions not finished yet.
  @usableFromInline let pending = Atomic<Int>(0)
  /// The pressure of the source, attached when the subscription is added.
  @usableFromInline let pressure = AtomicLazyReference<QueuePressure>()
  /// A state observer's one waiting state (a `Mailbox<Message>` of the subscription's
  /// message type), or nil for an event observer, whose every message is submitted.
  @usableFromInline let mailbox: (any AnyObject & Sendable)?

  /// A serial target for `delivery`, or nil to run inline.
  @inlinable convenience init?(_ delivery: Delivery) {
    guard let base = delivery.queue else { return nil }
    self.init(base: base)
  }

  /// A serial queue that targets `base` (the main queue itself for the main queue).
  @usableFromInline init(base: DispatchQueue) {
    queue = base === DispatchQueue.main ? base : DispatchQueue(label: "Evented.delivery", target: base)
    self.base = QueuePressure.mark(base)
    mailbox = nil
  }

  /// The same queue as `target`, for a state observer: its messages wait in `mailbox`,
  /// merged there while its queue is behind, and never count toward the backlog limit.
  @usableFromInline init(coalescing target: DeliveryTarget, into mailbox: any AnyObject & Sendable) {
    queue = target.queue
    base = target.base
    self.mailbox = mailbox
  }

  /// A target on the main queue, for one subscription.
  @usableFromInline static var main: DeliveryTarget { DeliveryTarget(base: .main) }

  /// Submits `work`, counting it until it returns.
  @inlinable func submit(_ work: @escaping @Sendable () -> Void) {
    let count = pending.wrappingAdd(1, ordering: .relaxed).newValue
    if let pressure = pressure.load(), count == pressure.limit { pressure.reevaluate(self) }
    queue.async {
      work()
      self.finished()
    }
  }

  @usableFromInline func finished() {
    let count = pending.wrappingSubtract(1, ordering: .relaxed).newValue
    if let pressure = pressure.load(), count == pressure.limit / 2 { pressure.reevaluate(self) }
  }
}

/// The queue subscriptions of one source that are at the backlog limit, and the threads
/// waiting for them.
@usableFromInline
final class QueuePressure: @unchecked Sendable {
  // @unchecked Sendable: `mutex` guards `full` and the wait; `fullCount` (atomic,
  // written only under `mutex`) mirrors `full.count` for the check that committing
  // threads make without `mutex`.
  /// The source's backlog limit.
  @usableFromInline let limit: Int
  @usableFromInline let fullCount = Atomic<Int>(0)
  private let mutex = RawMutex()
  /// The full targets and the queue each one runs on.
  private var full: [(target: ObjectIdentifier, base: UInt)] = []

  init(limit: Int) {
    self.limit = limit
  }

  /// Whether some queue subscription of the source is full.
  @inlinable var isFull: Bool { fullCount.load(ordering: .relaxed) > 0 }

  /// Records whether `target` is full, from its count now.
  @usableFromInline func reevaluate(_ target: DeliveryTarget) {
    let id = ObjectIdentifier(target)
    mutex.withLock {
      let count = target.pending.load(ordering: .relaxed)
      let index = full.firstIndex { $0.target == id }
      if index == nil, count >= limit {
        full.append((id, target.base))
        fullCount.store(full.count, ordering: .relaxed)
      } else if let index, count <= limit / 2 {
        full.remove(at: index)
        fullCount.store(full.count, ordering: .relaxed)
        mutex.broadcast()
      }
    }
  }

  /// Waits until no full target is one this thread may wait for: it never waits for a
  /// target whose queue it runs a block on, directly or through a queue that targets
  /// it (whichever of those queues carry marks of their own).
  @usableFromInline func waitForRoom() {
    var runsOnBase: [UInt: Bool] = [:]  // asked once per queue: this thread's queue does not change
    func mayWait(for base: UInt) -> Bool {
      if let runs = runsOnBase[base] { return !runs }
      let runs = Self.runsOn(base)
      runsOnBase[base] = runs
      return !runs
    }
    mutex.withLock {
      while full.contains(where: { mayWait(for: $0.base) }) { mutex.wait() }
    }
  }

  // MARK: Recognizing queues

  private static let key = DispatchSpecificKey<UInt>()

  /// The key of each marked queue's own specific value, by its mark less one: the
  /// nearest marked queue answers ``key``, but each queue answers its own key also in a
  /// block of a queue that targets it. Marks are given under this lock; the keys are
  /// kept for the life of the process (one per queue ever used for delivery).
  private static let queueKeys = Lock<[DispatchSpecificKey<UInt>]>.make([])

  /// Marks `queue` so that blocks running on it, or on queues that target it, are
  /// recognized; returns its mark.
  ///
  /// A queue is marked once, and its mark never replaced: replacing a queue's specific
  /// value releases the old one while other threads may be reading it, which crashed
  /// when threads subscribed on `.global()` at once (each call returns a new
  /// `DispatchQueue` of the same queue, which the mark must not depend on). So a mark is
  /// a number given under a lock to the first subscription on its queue, and found by
  /// every later one.
  static func mark(_ queue: DispatchQueue) -> UInt {
    if let mark = queue.getSpecific(key: key) { return mark }
    return queueKeys.withLock { keys in
      if let mark = queue.getSpecific(key: key) { return mark }
      let own = DispatchSpecificKey<UInt>()
      keys.append(own)
      let mark = UInt(keys.count)
      queue.setSpecific(key: own, value: mark)
      queue.setSpecific(key: key, value: mark)
      return mark
    }
  }

  /// Whether the calling thread runs a block on the queue marked `mark`, or on a queue
  /// that targets it (the main thread counts as running on the main queue).
  static func runsOn(_ mark: UInt) -> Bool {
    let own = queueKeys.withLock { $0[Int(mark) - 1] }
    return DispatchQueue.getSpecific(key: own) == mark
  }

  /// The mark of the nearest marked queue the calling thread runs a block on (the main
  /// thread counts as running on the main queue); 0 if none.
  static var currentQueue: UInt { DispatchQueue.getSpecific(key: key) ?? 0 }
}
