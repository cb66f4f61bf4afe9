// Observation and SwiftUI: a read inside a tracking scope (`withObservationTracking`,
// `Observations`, a SwiftUI body) registers with the source, and every commit that
// changes the value notifies the scope once, after the commit and outside every lock.
// A source that no scope has read since its last change pays one atomic load per write
// and, per read, Observation's own check of its thread-local scope.
//
// The site of a source (made by its first read, kept for its life) holds an
// `ObservationRegistrar` and the state of its probe. Observation offers no way to ask
// whether a read happens inside a scope, so the site asks its own question through the
// key path it registers: `probe` is a subscript key path whose index runs code of ours
// when hashed, and the registrar hashes it only when a scope records the access, or
// installs, cancels or notifies a tracking. A read that sees the hash count move is
// tracked, up to a few false alarms from other threads, which cost a wasted step.
//
// A tracked read then arms the source (the armed bit of the property's slot word, or,
// for a derived value or an array, one subscription that waits for the next change),
// notes the number of notifications made so far (`epoch`) for the reading thread, and
// only then reads the value, so a commit after the read finds the source armed. A
// commit that finds the source armed clears the bit, counts a notification and calls
// the registrar's `willSet` and `didSet`: at most once per commit, and not at all for
// an equal write, which commits nothing.
//
// The gap Observation leaves: a scope installs its tracking after its closure returns,
// so a notification between the read and the installation reaches nobody, and the
// scope waits for a change that already happened (this is how `Observations` over an
// `@Observable` class misses the final value). The installation hashes the probe under
// the registrar's lock, on the thread that read: the first hash on that thread after
// its read compares the epoch it noted with the current one, and if a notification
// was made in between, schedules one more on a global queue. (A nested scope's merge
// also hashes; an outer scope then relies on the inner one's check.) That repeat
// usually runs after the installation completes, but not always: Observation stores a
// tracking's tokens after registering it, and a notification that fires the scope in
// between leaves the tracking registered, so that it fires again at a later one
// (Observation's own race, which an `@Observable` class has too, more rarely).
//
// The site never runs user code and takes none of the source's locks; the registrar's
// callbacks (the scopes' `onChange`) run on the committing thread after the commit, or
// on a global queue for a repeated notification. The site runs one notification pass
// at a time (``ObservationSite/deliver()``): a scope's tracking is cancelled only after
// its `onChange` returns, so two passes at once would both fire it. A notification
// made while a pass runs is left to the thread running it, which runs one more pass.

import Dispatch
import Observation
import Synchronization

/// The Observation bookkeeping of one source: its registrar and its probe.
@usableFromInline
final class ObservationSite: Observable, Sendable {
  @usableFromInline let registrar = ObservationRegistrar()
  @usableFromInline let state: ProbeState
  /// The key path every tracked read registers, and every notification names.
  /// (`nonisolated(unsafe)`: a key path is immutable, and its index, `Probe`, is
  /// `Sendable`; `KeyPath` itself is not declared `Sendable`.)
  @usableFromInline nonisolated(unsafe) let probe: KeyPath<ObservationSite, Int>
  /// Observe mode only: the subscription that follows the source, and whether a scope
  /// waits for its next change.
  let waiting = Lock.make(Following())
  /// A lazy property's way to follow it (observe mode for a source that has no other
  /// need of it: a scope that reads it keeps it started); set once, before the site is
  /// shared.
  @usableFromInline nonisolated(unsafe) var follower: (@Sendable (ObservationSite) -> Subscription)?

  /// The subscription of observe mode, and its lease.
  struct Following {
    var subscription: Subscription?
    /// Whether a scope read the source since the last change notified.
    var isArmed = false
    /// Counts the notifications, so that a lease's end finds whether a scope read the
    /// source again since the one it follows.
    var generation: UInt64 = 0
  }

  /// How long a source followed for Observation stays followed after a change that no
  /// scope has read again: a scope re-registers by reading, as a SwiftUI view does
  /// when it renders the change, and a lazy source stays started meanwhile.
  static let lease = Atomic<UInt64>(1_000_000_000)
  /// The passes of ``deliver()`` asked for and not yet finished: nonzero while a
  /// thread runs passes.
  let passRequests = Atomic<Int>(0)

  init() {
    let state = ProbeState()
    self.state = state
    probe = \ObservationSite[probe: Probe(state: state)]
    state.site = self
  }

  /// The key path target; Observation never reads it.
  subscript(probe probe: Probe) -> Int { 0 }

  /// Registers a read with the scope tracking the calling thread, if any.
  ///
  /// - Parameter arm: Called when the read is tracked, before it returns: arms the
  ///   source so that its next commit notifies.
  @inlinable @inline(__always)
  func access(arm: () -> Void) {
    if state.pending.load(ordering: .relaxed) != 0 { return accessWithReadsNoted(arm: arm) }
    let before = state.hashes.load(ordering: .relaxed)
    registrar.access(self, keyPath: probe)
    if state.hashes.load(ordering: .relaxed) != before { tracked(arm: arm) }
  }

  /// ``access(arm:)`` while some thread has a read noted: the hash made by this
  /// access itself must not count as this thread's installation.
  @usableFromInline func accessWithReadsNoted(arm: () -> Void) {
    let marked = state.markAccess(true)
    let before = state.hashes.load(ordering: .relaxed)
    registrar.access(self, keyPath: probe)
    let isTracked = state.hashes.load(ordering: .relaxed) != before
    if marked { _ = state.markAccess(false) }
    if isTracked { tracked(arm: arm) }
  }

  /// The rest of a tracked read: arm, and note the epoch for this thread.
  @usableFromInline func tracked(arm: () -> Void) {
    let epoch = state.epoch.load(ordering: .acquiring)
    arm()
    state.noteRead(epoch: epoch)
  }

  /// Notifies the scopes that registered with this site, counting a notification.
  /// Called after a commit, outside every lock.
  @usableFromInline func notify() {
    state.epoch.add(1, ordering: .acquiringAndReleasing)
    deliver()
  }

  /// Notifies again, later, for a scope that installed its tracking after the
  /// notification it needed.
  func repeatNotification() {
    DispatchQueue.global().async { [self] in deliver() }
  }

  /// Calls the registrar's `willSet` and `didSet`, one pass at a time for this site.
  ///
  /// A scope's tracking fires from `willSet` and is cancelled only once its `onChange`
  /// returns, so two passes at once (a commit's and a repeated one, or two commits
  /// from two threads) could both collect it and fire it twice. A thread that finds a
  /// pass under way leaves its request to the thread running it, which runs one more
  /// pass, starting after the request, for all the requests made meanwhile. No lock is
  /// held while `onChange` runs: a write from inside it adds a request and returns.
  func deliver() {
    if passRequests.add(1, ordering: .acquiringAndReleasing).oldValue != 0 { return }
    var covered = 1
    while true {
      registrar.willSet(self, keyPath: probe)
      registrar.didSet(self, keyPath: probe)
      let left = passRequests.subtract(covered, ordering: .acquiringAndReleasing).newValue
      if left == 0 { return }
      covered = left
    }
  }

  // MARK: Observe mode (derived values and arrays)

  /// Arms a source that notifies through a subscription: makes one with `subscribe`
  /// unless one follows it already. The subscription's handler must call
  /// ``changed()``. A subscription that something else ended (`removeAllObservers()`
  /// on the source) is replaced.
  @usableFromInline func follow(_ subscribe: () -> Subscription) {
    let found = waiting.withLock { following -> Bool in
      guard following.subscription?.isActive == true else { return false }
      following.isArmed = true
      return true
    }
    if found { return }
    let made = subscribe()
    let (extra, ended) = waiting.withLock { following -> (Subscription?, Subscription?) in
      following.isArmed = true
      if let current = following.subscription, current.isActive { return (made, nil) }
      defer { following.subscription = made }
      return (nil, following.subscription)
    }
    extra?.cancel()
    _ = ended  // released after unlocking
  }

  /// The followed source changed: notifies if a scope read it since the last change,
  /// once the delivery this runs in (a root's pass, which delivers the derived value's
  /// commit inside it) and the thread's other delivery frames have ended, as a property
  /// notifies after its write's synchronous handlers. The subscription stays, so that a
  /// scope that reads the source again finds it followed (a lazy source stays started),
  /// until a lease passes with no scope reading it (``endLease(_:)``).
  @usableFromInline func changed() {
    let generation = waiting.withLock { following -> UInt64? in
      guard following.isArmed, following.subscription != nil else { return nil }
      following.isArmed = false
      following.generation &+= 1
      return following.generation
    }
    guard let generation else { return }
    DeliveringThread.notifyAfterFrame(self)
    let lease = Self.lease.load(ordering: .relaxed)
    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: lease))) { [weak self] in
      self?.endLease(generation)
    }
  }

  /// Ends the subscription if no scope read the source since the notification
  /// numbered `generation`.
  func endLease(_ generation: UInt64) {
    let ended = waiting.withLock { following -> Subscription? in
      guard !following.isArmed, following.generation == generation else { return nil }
      return following.subscription.take()
    }
    ended?.cancel()
  }
}

/// What a site's probe shares with the site: the hash count, the epoch, and the reads
/// whose scope has not installed its tracking yet.
@usableFromInline
final class ProbeState: @unchecked Sendable {
  // @unchecked Sendable: `site` is written once, by the site's initializer, before the
  // site is shared; `reads` is guarded by its own lock; the rest are atomics.
  /// How many times the probe was hashed.
  @usableFromInline let hashes = Atomic<UInt>(0)
  /// How many notifications have been made (repeated ones not counted).
  let epoch = Atomic<UInt>(0)
  /// How many threads have a read noted in `reads`.
  @usableFromInline let pending = Atomic<Int>(0)
  /// The epoch each thread saw at its tracked read, until that thread next hashes the
  /// probe (the oldest one if it read several times), and whether that thread is
  /// registering another read now.
  let reads = Lock.make([(thread: UInt, epoch: UInt, isAccessing: Bool)]())
  weak var site: ObservationSite?

  init() {}

  func noteRead(epoch: UInt) {
    let thread = currentThreadID()
    let added = reads.withLock { reads -> Bool in
      if reads.contains(where: { $0.thread == thread }) { return false }
      reads.append((thread, epoch, false))
      return true
    }
    if added { pending.add(1, ordering: .releasing) }
  }

  /// Marks this thread's noted read, if any, as registering another read.
  ///
  /// - Returns: whether this thread has a noted read.
  func markAccess(_ isAccessing: Bool) -> Bool {
    let thread = currentThreadID()
    return reads.withLock { reads in
      guard let index = reads.firstIndex(where: { $0.thread == thread }) else { return false }
      reads[index].isAccessing = isAccessing
      return true
    }
  }

  /// A hash of the probe: counts, and on a thread with a noted read, checks it.
  func hashed() {
    hashes.add(1, ordering: .relaxed)
    guard pending.load(ordering: .acquiring) > 0 else { return }
    let thread = currentThreadID()
    let noted = reads.withLock { reads -> UInt? in
      guard let index = reads.firstIndex(where: { $0.thread == thread }), !reads[index].isAccessing else {
        return nil
      }
      return reads.remove(at: index).epoch
    }
    guard let noted else { return }
    pending.subtract(1, ordering: .releasing)
    if epoch.load(ordering: .acquiring) != noted { site?.repeatNotification() }
  }
}

/// The index of a site's probe key path: hashing it runs ``ProbeState/hashed()``.
@usableFromInline
struct Probe: Hashable, Sendable {
  @usableFromInline let state: ProbeState

  @usableFromInline static func == (lhs: Probe, rhs: Probe) -> Bool { lhs.state === rhs.state }

  @usableFromInline func hash(into hasher: inout Hasher) {
    state.hashed()
    hasher.combine(ObjectIdentifier(state))
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

  /// The site, made now if there is none yet. The slot keeps it: `body` uses it
  /// without retaining it (a site weakly referenced pays a slow retain).
  @inlinable @inline(__always)
  func withSite<Result>(_ body: (ObservationSite) -> Result) -> Result {
    let word = word.load(ordering: .acquiring)
    if word != 0 { return Self.site(word)._withUnsafeGuaranteedRef(body) }
    return body(makeSite())
  }

  @usableFromInline func makeSite() -> ObservationSite {
    let made = Unmanaged.passRetained(ObservationSite())
    let (exchanged, found) = word.compareExchange(
      expected: 0, desired: UInt(bitPattern: made.toOpaque()), ordering: .acquiringAndReleasing)
    if exchanged { return made.takeUnretainedValue() }
    made.release()
    return Self.site(found).takeUnretainedValue()
  }

  /// A read of a property: registers with a tracking scope, if any, and arms the slot
  /// (a lazy property: follows it, so that the scope keeps it started).
  @usableFromInline @inline(never)
  func access() {
    withSite { site in
      site.access {
        if let follower = site.follower { return site.follow { follower(site) } }
        word.bitwiseOr(1, ordering: .acquiringAndReleasing)
      }
    }
  }

  /// Makes the site of a lazy property, which follows it for Observation.
  @usableFromInline func makeSite(following follower: @escaping @Sendable (ObservationSite) -> Subscription) {
    let made = ObservationSite()
    made.follower = follower
    let exchanged = word.compareExchange(
      expected: 0, desired: UInt(bitPattern: Unmanaged.passRetained(made).toOpaque()), ordering: .acquiringAndReleasing
    ).exchanged
    precondition(exchanged, "Evented: a lazy property's Observation site was made twice")
  }

  /// A read of a source that notifies through a subscription.
  @inlinable @inline(__always)
  func access(following subscribe: (ObservationSite) -> Subscription) {
    withSite { site in site.access { site.follow { subscribe(site) } } }
  }

  /// After a commit that changed the value, outside every lock: notifies if armed.
  @inlinable @inline(__always)
  func committed() {
    if word.load(ordering: .acquiring) & 1 != 0 { notifyArmed() }
  }

  /// After a transaction's commit that changed the value, outside every lock: notifies
  /// if armed, once the thread's outermost delivery frame (the transaction's) has ended.
  @usableFromInline func committedAfterFrame() {
    guard word.load(ordering: .acquiring) & 1 != 0 else { return }
    let old = word.bitwiseAnd(~1, ordering: .acquiringAndReleasing).oldValue
    guard old & 1 != 0 else { return }
    DeliveringThread.notifyAfterFrame(Self.site(old).takeUnretainedValue())
  }

  @usableFromInline func notifyArmed() {
    let old = word.bitwiseAnd(~1, ordering: .acquiringAndReleasing).oldValue
    guard old & 1 != 0 else { return }
    Self.site(old).takeUnretainedValue().notify()
  }
}
