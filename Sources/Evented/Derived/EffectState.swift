// The state of an observed derived value's effect: its links to the roots it read, and
// the requests to change them. Guarded by the node's `links` lock; the node carries out
// the actions outside it (DerivedProperty+Links.swift).
//
// States: unlinked (no observer: no links, no request), or linked, with at most one
// request waiting (the reads of the newest state asked for) and at most one thread
// applying requests (`isRelinking`). Transitions:
// - `link()`: unlinked -> linked; returns the links left from before, to end.
// - `request(_:number:)`: keeps the reads if no request numbered higher came first;
//   returns whether the caller must apply (nobody is applying).
// - `takeUnread(_:)`: for a switch while another thread applies: the links that
//   neither its reads, nor the request waiting, nor the step being applied name, taken
//   out now (with those the applier is ending), for the switching thread to end before
//   it delivers. It never waits for the applier, which may be running a lazy source's
//   hooks. A link taken out that a later state reads is made again by that state's
//   request, which every committed switch makes after its commit.
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
  /// The links the applier's current step ends, which a switching thread may end too
  /// (ending a subscription twice is harmless).
  @usableFromInline private(set) var ending: [SubscriptionCore] = []
  /// The reads of the step being applied.
  @usableFromInline private(set) var applying: Reads?

  @usableFromInline init() {}

  /// Starts following; returns the links left from before (dropped by their roots), to
  /// end after unlocking.
  @usableFromInline mutating func link() -> [SubscriptionCore] {
    defer { _checkInvariants() }
    isLinked = true
    requested = 0
    defer { linked = [] }
    return linked.map(\.core)
  }

  /// Stops following; returns every link, to end after unlocking.
  @usableFromInline mutating func unlink() -> [SubscriptionCore] {
    defer { _checkInvariants() }
    isLinked = false
    pending = nil
    defer { linked = [] }
    return linked.map(\.core)
  }

  /// Records that a root dropped its link because the effect had no observer: the next
  /// observer links again.
  @usableFromInline mutating func dropped() {
    isLinked = false
    pending = nil
    _checkInvariants()
  }

  /// Asks for the links of `reads`, unless a request numbered higher came first.
  ///
  /// - Returns: Whether the caller must apply the requests (nobody else is).
  @usableFromInline mutating func request(_ reads: Reads, number: UInt64) -> Bool {
    defer { _checkInvariants() }
    guard isLinked, number >= requested else { return false }
    requested = number
    pending = reads
    if isRelinking { return false }
    isRelinking = true
    return true
  }

  /// The applier's next step, or nil once no request waits (then it stops applying).
  @usableFromInline mutating func nextStep() -> Step? {
    defer { _checkInvariants() }
    ending = []
    applying = nil
    guard let reads = pending.take(), isLinked else {
      pending = nil
      isRelinking = false
      return nil
    }
    applying = reads
    let wanted = Set(reads.entries.lazy.map(\.identity))
    var ended: [SubscriptionCore] = []
    var kept: [Link] = []
    for link in linked {
      if wanted.contains(link.identity) { kept.append(link) } else { ended.append(link.core) }
    }
    let have = Set(kept.map(\.identity))
    linked = kept
    ending = ended
    var added: [any Root] = []
    for entry in reads.entries where !have.contains(entry.identity) { added.append(entry.root) }
    return Step(reads: reads, ended: ended, added: added)
  }

  /// While another thread applies requests: the links that neither `reads`, nor the
  /// request waiting, nor the step being applied name, taken out of the links, with
  /// those the step is ending; to end. None when nobody applies.
  @usableFromInline mutating func takeUnread(_ reads: Reads) -> [SubscriptionCore] {
    defer { _checkInvariants() }
    guard isLinked, isRelinking else { return [] }
    func isNamed(_ identity: ObjectIdentifier) -> Bool {
      reads.version(of: identity) != nil || pending?.version(of: identity) != nil
        || applying?.version(of: identity) != nil
    }
    var unread = ending
    var kept: [Link] = []
    for link in linked {
      if isNamed(link.identity) { kept.append(link) } else { unread.append(link.core) }
    }
    if kept.count != linked.count { linked = kept }
    return unread
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
      if applying != nil || !ending.isEmpty, !isRelinking {
        preconditionFailure("Evented: an effect applies a step with nobody applying")
      }
      var seen = Set<ObjectIdentifier>()
      for link in linked where !seen.insert(link.identity).inserted {
        preconditionFailure("Evented: an effect is linked twice to one root")
      }
    #endif
  }
}
