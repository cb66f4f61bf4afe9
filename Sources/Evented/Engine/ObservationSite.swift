// Observation and SwiftUI: a read inside a tracking scope (`withObservationTracking`,
// `Observations`, a SwiftUI body) registers with the source, and every commit that
// changes the value notifies the scope once, after the commit and outside every lock.
// A source that no scope has read since its last change pays one atomic load per write
// and, per read, Observation's own check of its thread-local scope.
//
// The site of a source (made by its first read, kept for its life) holds an
// `ObservationRegistrar` and two counters. Observation offers no way to ask whether a
// read happens inside a scope, so the site asks its own question through the key path
// it registers: `probe` is a subscript key path whose index counts the calls of its
// `hash(into:)`, and the registrar hashes it only when a scope records the access (or
// installs, cancels or notifies a tracking). A read that sees the count move is
// tracked, up to a few false alarms from other threads, which cost a wasted step.
//
// A tracked read then
//   1. arms the source: the armed bit of the property's slot word, or, for a derived
//      value or an array, one subscription that waits for the next change;
//   2. registers a second key path whose index is a `Ticket` holding the number of
//      notifications made so far (`epoch`);
// and only then reads the value (so a commit after the read finds the source armed).
// A commit that finds the source armed clears the bit, counts a notification and calls
// the registrar's `willSet` and `didSet`: at most once per commit, and not at all for
// an equal write, which commits nothing.
//
// The gap Observation leaves: a scope installs its tracking after its closure returns,
// so a notification between the read and the installation reaches nobody, and the
// scope waits for a change that already happened (this is how `Observations` over an
// `@Observable` class misses the final value). The installation hashes each recorded
// key path under the registrar's lock, so the ticket's `hash(into:)` runs at that
// moment: if the epoch moved since the read, it schedules one more notification, on a
// global queue, which runs after the installation completes. Each ticket checks once,
// at its first hash after the read returned.
//
// The site never runs user code and takes none of the source's locks; the registrar's
// callbacks (the scopes' `onChange`) run on the committing thread after the commit,
// or on a global queue for a repeated notification.

import Dispatch
import Observation
import Synchronization

/// The Observation bookkeeping of one source: its registrar and its counters.
@usableFromInline
final class ObservationSite: Observable, Sendable {
  @usableFromInline let registrar = ObservationRegistrar()
  /// How many times the probe's index was hashed.
  @usableFromInline let probes: ProbeCount
  /// How many notifications have been made (repeated ones not counted).
  let epoch = Atomic<UInt>(0)
  /// The key path every tracked read registers, and every notification names.
  @usableFromInline nonisolated(unsafe) let probe: KeyPath<ObservationSite, Int>
  /// Observe mode only: the subscription waiting for the next change.
  let waiting = Lock.make(Subscription?.none)

  init() {
    let probes = ProbeCount()
    self.probes = probes
    probe = \ObservationSite[probe: Probe(count: probes)]
  }

  /// The key path targets; Observation never reads them.
  subscript(probe probe: Probe) -> Int { 0 }
  subscript(ticket ticket: TicketKey) -> Int { 0 }

  /// Registers a read with the scope tracking the calling thread, if any.
  ///
  /// - Parameter arm: Called when the read is tracked, before it returns: arms the
  ///   source so that its next commit notifies.
  /// - Returns: whether the read was tracked (or may have been).
  @inlinable @inline(__always)
  func access(arm: () -> Void) {
    let before = probes.count.load(ordering: .relaxed)
    registrar.access(self, keyPath: probe)
    if probes.count.load(ordering: .relaxed) != before { tracked(arm: arm) }
  }

  /// The rest of a tracked read: arm, then register a ticket.
  @usableFromInline func tracked(arm: () -> Void) {
    let ticket = Ticket(site: self, epoch: epoch.load(ordering: .acquiring))
    arm()
    registrar.access(self, keyPath: \ObservationSite[ticket: TicketKey(ticket: ticket)])
    ticket.open()
  }

  /// Notifies the scopes that registered with this site, counting a notification.
  /// Called after a commit, outside every lock.
  @usableFromInline func notify() {
    epoch.add(1, ordering: .acquiringAndReleasing)
    registrar.willSet(self, keyPath: probe)
    registrar.didSet(self, keyPath: probe)
  }

  /// Notifies again, later, for a scope that installed its tracking after the
  /// notification it needed.
  func repeatNotification() {
    DispatchQueue.global().async { [self] in
      registrar.willSet(self, keyPath: probe)
      registrar.didSet(self, keyPath: probe)
    }
  }

  // MARK: Observe mode (derived values and arrays)

  /// Arms a source that notifies through a subscription: makes one with `subscribe`
  /// unless one is waiting. The subscription's handler must call ``changed()``.
  @usableFromInline func follow(_ subscribe: () -> Subscription) {
    guard waiting.withLock({ $0 == nil }) else { return }
    let made = subscribe()
    let extra = waiting.withLock { waiting -> Subscription? in
      guard waiting == nil else { return made }
      waiting = made
      return nil
    }
    extra?.cancel()
  }

  /// The followed source changed: ends the waiting subscription and notifies.
  @usableFromInline func changed() {
    let ended = waiting.withLock { $0.take() }
    guard let ended else { return }
    ended.cancel()
    notify()
  }
}

/// The number of times a site's probe was hashed.
@usableFromInline
final class ProbeCount: Sendable {
  @usableFromInline let count = Atomic<UInt>(0)
  init() {}
}

/// The index of a site's probe key path: hashing it counts.
@usableFromInline
struct Probe: Hashable, Sendable {
  @usableFromInline let count: ProbeCount

  @usableFromInline static func == (lhs: Probe, rhs: Probe) -> Bool { lhs.count === rhs.count }

  @usableFromInline func hash(into hasher: inout Hasher) {
    count.count.add(1, ordering: .relaxed)
    hasher.combine(ObjectIdentifier(count))
  }
}

/// One tracked read: the epoch it saw, checked at the installation of its tracking.
final class Ticket: Sendable {
  weak let site: ObservationSite?
  let epoch: UInt
  /// 0 while the read is registering, 1 once it returned, 2 once checked.
  let stage = Atomic<UInt8>(0)

  init(site: ObservationSite, epoch: UInt) {
    self.site = site
    self.epoch = epoch
  }

  func open() { stage.store(1, ordering: .releasing) }

  /// At the first hash after the read: repeats the notification if one was made since.
  func check() {
    guard stage.compareExchange(expected: 1, desired: 2, ordering: .acquiringAndReleasing).exchanged,
      let site, site.epoch.load(ordering: .acquiring) != epoch
    else { return }
    site.repeatNotification()
  }
}

/// The index of a ticket's key path. Every ticket of one site is equal, so a scope that
/// reads a source many times records it once.
struct TicketKey: Hashable, Sendable {
  let ticket: Ticket
  let site: ObjectIdentifier

  init(ticket: Ticket) {
    self.ticket = ticket
    site = ObjectIdentifier(ticket.site!)
  }

  static func == (lhs: TicketKey, rhs: TicketKey) -> Bool { lhs.site == rhs.site }

  func hash(into hasher: inout Hasher) {
    ticket.check()
    hasher.combine(site)
  }
}

/// A source's reference to its site, with the armed bit: one word, so that a commit
/// to a source that nobody tracks costs one atomic load.
///
/// 0 before the first read; then the site's address (retained), with bit 0 set while
/// armed.
@usableFromInline
struct ObservationSlot: ~Copyable, Sendable {
  @usableFromInline let word = Atomic<UInt>(0)

  @usableFromInline init() {}

  deinit {
    let word = word.load(ordering: .acquiring)
    if word != 0 { Self.site(word).release() }
  }

  @inlinable static func site(_ word: UInt) -> Unmanaged<ObservationSite> {
    Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: word & ~1).unsafelyUnwrapped)
  }

  /// The site, made now if there is none yet.
  @inlinable var site: ObservationSite {
    let word = word.load(ordering: .acquiring)
    if word != 0 { return Self.site(word).takeUnretainedValue() }
    return makeSite()
  }

  @usableFromInline func makeSite() -> ObservationSite {
    let made = Unmanaged.passRetained(ObservationSite())
    let (exchanged, found) = word.compareExchange(
      expected: 0, desired: UInt(bitPattern: made.toOpaque()), ordering: .acquiringAndReleasing)
    if exchanged { return made.takeUnretainedValue() }
    made.release()
    return Self.site(found).takeUnretainedValue()
  }

  /// A read of a property: registers with a tracking scope, if any, and arms the slot.
  @inlinable @inline(__always)
  func access() {
    site.access { word.bitwiseOr(1, ordering: .acquiringAndReleasing) }
  }

  /// A read of a source that notifies through a subscription.
  @inlinable @inline(__always)
  func access(following subscribe: (ObservationSite) -> Subscription) {
    let site = site
    site.access { site.follow { subscribe(site) } }
  }

  /// After a commit that changed the value, outside every lock: notifies if armed.
  @inlinable @inline(__always)
  func committed() {
    if word.load(ordering: .acquiring) & 1 != 0 { notifyArmed() }
  }

  @usableFromInline func notifyArmed() {
    let old = word.bitwiseAnd(~1, ordering: .acquiringAndReleasing).oldValue
    guard old & 1 != 0 else { return }
    Self.site(old).takeUnretainedValue().notify()
  }
}
