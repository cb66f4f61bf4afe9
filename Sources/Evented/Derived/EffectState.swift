// The state of an observed derived value's effect: its links to the roots it read, and
// the requests to change them. Guarded by the node's `links` lock; the node carries out
// the actions outside it (DerivedProperty+Links.swift).
//
// States: unlinked (no observer: no links, no request), or linked, with at most one
// request waiting (the reads of the newest state asked for) and at most one thread
// applying requests (`isRelinking`). Transitions:
// - `link()`: unlinked -> linked; returns the links left from before, to end.
// - `request(_:number:by:)`: keeps the reads if no request numbered higher came first;
//   returns whether the caller must apply (nobody is applying). A caller that does not
//   apply may wait (`mustWait(for:by:)`, in `room`) until a request numbered at least
//   as high is applied: a switch delivers its state only after its old links ended.
// - `nextStep()`: the applier takes the waiting request: the links to end and the roots
//   to link; nil (and the applier stops) when none waits.
// - `attach(_:)`: the links the applier made; returned to end if the effect was
//   unlinked meanwhile.
// - `unlink()`: linked -> unlinked; returns every link, to end.

/// The links of one effect, and the requests to change them.
@usableFromInline
struct EffectState: Sendable {
  /// One link: a subscription to a root's hub (`RootEntry`).
  @usableFromInline struct Link: Sendable {
    @usableFromInline let identity: ObjectIdentifier
    @usableFromInline let root: any Root
    @usableFromInline let core: SubscriptionCore

    @usableFromInline init(identity: ObjectIdentifier, root: any Root, core: SubscriptionCore) {
      self.identity = identity
      self.root = root
      self.core = core
    }
  }

  /// What the applier does next: end `ended`, then link to `added` (as read in `reads`).
  @usableFromInline struct Step: Sendable {
    @usableFromInline let reads: Reads
    @usableFromInline let ended: [SubscriptionCore]
    @usableFromInline let added: [any Root]
  }

  @usableFromInline private(set) var linked: [Link] = []
  /// Whether the effect follows its roots (while it has observers).
  @usableFromInline private(set) var isLinked = false
  /// Observers announced by `willObserve` and not yet subscribed.
  @usableFromInline var arriving = 0
  /// The reads whose links were asked for last and are not applied yet.
  @usableFromInline private(set) var pending: Reads?
  /// The number of the newest request taken.
  @usableFromInline private(set) var requested: UInt64 = 0
  /// Whether a thread is applying requests.
  @usableFromInline private(set) var isRelinking = false
  /// The number of the waiting request.
  @usableFromInline private(set) var pendingNumber: UInt64 = 0
  /// The number of the request being applied, and of the last one applied whole.
  @usableFromInline private(set) var applying: UInt64 = 0
  @usableFromInline private(set) var applied: UInt64 = 0
  /// The thread applying requests, while one does.
  @usableFromInline private(set) var applier: UInt = 0
  /// Where threads wait for the applier, made by the first one to wait; woken at every
  /// step while `waiters` is not zero.
  @usableFromInline var room: Condition?
  @usableFromInline var waiters = 0

  @usableFromInline init() {}

  /// Starts following; returns the links left from before (dropped by their roots), to
  /// end after unlocking.
  @usableFromInline mutating func link() -> [SubscriptionCore] {
    defer { _checkInvariants() }
    isLinked = true
    requested = 0
    applying = 0
    applied = 0
    defer { linked = [] }
    return linked.map(\.core)
  }

  /// Stops following; returns every link, to end after unlocking.
  @usableFromInline mutating func unlink() -> [SubscriptionCore] {
    defer { _checkInvariants() }
    isLinked = false
    pending = nil
    wakeWaiters()
    defer { linked = [] }
    return linked.map(\.core)
  }

  /// Records that a root dropped its link because the effect had no observer: the next
  /// observer links again.
  @usableFromInline mutating func dropped() {
    isLinked = false
    pending = nil
    wakeWaiters()
    _checkInvariants()
  }

  /// Asks for the links of `reads`, unless a request numbered higher came first.
  ///
  /// - Returns: Whether the caller must apply the requests (nobody else is).
  @usableFromInline mutating func request(_ reads: Reads, number: UInt64, by thread: UInt) -> Bool {
    defer { _checkInvariants() }
    guard isLinked, number >= requested else { return false }
    requested = number
    pending = reads
    pendingNumber = number
    if isRelinking { return false }
    isRelinking = true
    applier = thread
    return true
  }

  /// Whether `thread`, which asked for links numbered `number` and does not apply them,
  /// must wait for the applier: until a request numbered at least as high is applied,
  /// the effect stops following, or nobody applies.
  @usableFromInline func mustWait(for number: UInt64, by thread: UInt) -> Bool {
    isLinked && isRelinking && applier != thread && applied < number
  }

  /// Wakes the threads waiting for the applier, to check ``mustWait(for:by:)`` again.
  @usableFromInline mutating func wakeWaiters() {
    if waiters > 0 { room?.broadcast() }
  }

  /// The applier's next step, or nil once no request waits (then it stops applying).
  @usableFromInline mutating func nextStep() -> Step? {
    defer { _checkInvariants() }
    // The step before, if any, is done.
    applied = applying
    defer { wakeWaiters() }
    guard let reads = pending.take(), isLinked else {
      pending = nil
      isRelinking = false
      applier = 0
      return nil
    }
    applying = pendingNumber
    let wanted = Set(reads.entries.lazy.map(\.identity))
    var ended: [SubscriptionCore] = []
    var kept: [Link] = []
    for link in linked {
      if wanted.contains(link.identity) { kept.append(link) } else { ended.append(link.core) }
    }
    let have = Set(kept.map(\.identity))
    linked = kept
    var added: [any Root] = []
    for entry in reads.entries where !have.contains(entry.identity) { added.append(entry.root) }
    return Step(reads: reads, ended: ended, added: added)
  }

  /// Keeps the links the applier made; returns them, to end, if the effect stopped
  /// following meanwhile.
  @usableFromInline mutating func attach(_ made: [Link]) -> [SubscriptionCore] {
    defer { _checkInvariants() }
    guard isLinked else { return made.map(\.core) }
    linked.append(contentsOf: made)
    return []
  }

  /// The roots linked now.
  @usableFromInline var linkedRoots: [any Root] { linked.map(\.root) }

  /// Impossible states stop the program in debug builds.
  @usableFromInline func _checkInvariants() {
    #if DEBUG
      if arriving < 0 { preconditionFailure("Evented: an effect has fewer than no arriving observers") }
      if !isLinked, pending != nil { preconditionFailure("Evented: an unlinked effect has a request waiting") }
      if pending != nil, !isRelinking { preconditionFailure("Evented: a request waits with nobody to apply it") }
      if isRelinking != (applier != 0) { preconditionFailure("Evented: an effect's applier is not recorded") }
      var seen = Set<ObjectIdentifier>()
      for link in linked where !seen.insert(link.identity).inserted {
        preconditionFailure("Evented: an effect is linked twice to one root")
      }
    #endif
  }
}
