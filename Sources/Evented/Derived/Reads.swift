// What one evaluation of a derived value read: the roots, each once, with the version of
// each. A computed value's memo is valid while its roots are at those versions; an
// effect delivers a state only if it is later than the reads it delivered last, and
// links to the roots its last reads name.

/// The roots one evaluation read, each once in the order first read, with the version
/// of each that it read.
@usableFromInline
struct Reads: Sendable {
  @usableFromInline var roots: [any Root]
  @usableFromInline var identities: [ObjectIdentifier]
  @usableFromInline var versions: [UInt64]

  @inlinable init(roots: [any Root] = [], identities: [ObjectIdentifier] = [], versions: [UInt64] = []) {
    self.roots = roots
    self.identities = identities
    self.versions = versions
  }

  @inlinable var count: Int { identities.count }

  /// Whether every root is still at the version read, as the thread `reader` sees it
  /// (each loaded without its lock where it can be).
  @inlinable func areCurrent(for reader: Snapshot.Reader) -> Bool {
    for index in roots.indices where roots[index].versionNow(for: reader) != versions[index] { return false }
    return true
  }

  /// Whether `self` and `other` read the same roots, in the same order.
  @inlinable func readsSameRoots(as other: Reads) -> Bool {
    identities == other.identities
  }

  /// Whether `self` is a later state than `other`: no root both read is older here, and
  /// one is newer. Two evaluations of one value that read the same versions of the roots
  /// they share read the same roots (the choices a body makes depend on what it read),
  /// so a state that differs from another differs in a root both read.
  @inlinable func isLater(than other: Reads) -> Bool {
    if identities == other.identities {
      var newer = false
      for index in versions.indices {
        if versions[index] < other.versions[index] { return false }
        if versions[index] > other.versions[index] { newer = true }
      }
      return newer
    }
    if other.count == 0 { return true }
    var earlier: [ObjectIdentifier: UInt64] = [:]
    earlier.reserveCapacity(other.count)
    for index in other.identities.indices { earlier[other.identities[index]] = other.versions[index] }
    var newer = false
    for index in identities.indices {
      guard let version = earlier[identities[index]] else { continue }
      if versions[index] < version { return false }
      if versions[index] > version { newer = true }
    }
    return newer
  }
}
