// What one evaluation of a derived value read: the roots, each once, with the version of
// each. A computed value's memo is valid while its roots are at those versions; an
// effect delivers a state only if it is later than the reads it delivered last, and
// links to the roots its last reads name.

import Synchronization

/// The roots one evaluation read, each once in the order first read, with the version
/// of each that it read. One array, so that recording a value's reads allocates once.
@usableFromInline
struct Reads: Sendable {
  /// One root read, at one version.
  @usableFromInline struct Read: Sendable {
    @usableFromInline let root: any Root
    /// `root.identity`, kept so that comparing reads calls nothing.
    @usableFromInline let identity: ObjectIdentifier
    @usableFromInline let version: UInt64
    /// The address of `root`'s version word (``Root/versionWord``), or 0 if it has none:
    /// checking a read loads it without a call through `Root`. An address, so that the
    /// read stays `Sendable`; valid while `root` lives.
    @usableFromInline let word: UInt

    @inlinable init(root: any Root, identity: ObjectIdentifier, version: UInt64, word: UInt) {
      self.root = root
      self.identity = identity
      self.version = version
      self.word = word
    }

    /// The read of `root` at `version`, with its version word.
    @inlinable init(_ root: any Root, identity: ObjectIdentifier, version: UInt64) {
      self.init(root: root, identity: identity, version: version, word: UInt(bitPattern: root.versionWord))
    }

  }

  @usableFromInline var entries: [Read]

  @inlinable init() {
    entries = []
  }

  @inlinable init(entries: [Read]) {
    self.entries = entries
  }

  @inlinable init(roots: [any Root], identities: [ObjectIdentifier], versions: [UInt64]) {
    entries = roots.indices.map { Read(roots[$0], identity: identities[$0], version: versions[$0]) }
  }

  @inlinable var count: Int { entries.count }

  /// The address of the version word of the one root read (``Root/versionWord``), if
  /// there is one root and it has a word; else 0.
  @inlinable var wordOfOneRoot: UInt {
    count == 1 ? entries[0].word : 0
  }
  @inlinable var roots: [any Root] { entries.map(\.root) }
  @inlinable var identities: [ObjectIdentifier] { entries.map(\.identity) }
  @inlinable var versions: [UInt64] { entries.map(\.version) }

  /// The version read of the root whose identity is `identity`, if it was read.
  @inlinable func version(of identity: ObjectIdentifier) -> UInt64? {
    for entry in entries where entry.identity == identity { return entry.version }
    return nil
  }

  /// Whether every root is still at the version read, as the thread `reader` sees it
  /// (each loaded without its lock where it can be).
  @inlinable func areCurrent(for reader: Snapshot.Reader) -> Bool {
    let usesWords = wordsAreCurrent
    // By index: a loop over the entries would copy each out, a retain of its root.
    for index in entries.indices {
      let word = entries[index].word
      let now = usesWords && word != 0 ? wordVersion(word) : nil
      if (now ?? entries[index].root.version(for: reader)) != entries[index].version { return false }
    }
    return true
  }

  /// Whether `self` and `other` read the same roots, in the same order.
  @inlinable func readsSameRoots(as other: Reads) -> Bool {
    guard entries.count == other.entries.count else { return false }
    for index in entries.indices where entries[index].identity != other.entries[index].identity { return false }
    return true
  }

  /// Whether `self` is a later state than `other`: no root both read is older here, and
  /// one is newer. Two evaluations of one value that read the same versions of the roots
  /// they share read the same roots (the choices a body makes depend on what it read),
  /// so a state that differs from another differs in a root both read.
  @inlinable func isLater(than other: Reads) -> Bool {
    // One root on both sides, most values: no loop.
    if entries.count == 1, other.entries.count == 1, entries[0].identity == other.entries[0].identity {
      return entries[0].version > other.entries[0].version
    }
    if readsSameRoots(as: other) {
      var newer = false
      for index in entries.indices {
        let (mine, theirs) = (entries[index].version, other.entries[index].version)
        if mine < theirs { return false }
        if mine > theirs { newer = true }
      }
      return newer
    }
    if other.count == 0 { return true }
    var earlier: [ObjectIdentifier: UInt64] = [:]
    earlier.reserveCapacity(other.count)
    for entry in other.entries { earlier[entry.identity] = entry.version }
    var newer = false
    for entry in entries {
      guard let version = earlier[entry.identity] else { continue }
      if entry.version < version { return false }
      if entry.version > version { newer = true }
    }
    return newer
  }
}
