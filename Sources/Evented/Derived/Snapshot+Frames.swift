// How a snapshot records what each evaluation reads (Snapshot.swift): a frame per
// running evaluation, closed into that evaluation's `Reads`.

extension Snapshot {
  /// Starts recording the reads of one evaluation; returns where they start in `trail`.
  @inlinable func openFrame() -> Int {
    frames += 1
    return trail.count
  }

  /// Ends the frame opened at `start`: its reads, each root once, which also count as
  /// read by the frame around it.
  @usableFromInline func closeFrame(_ start: Int) -> Reads {
    frames -= 1
    if readOneRoot(from: start) {
      // One root read (a map of one root, or both sides of a diamond): listed once.
      while trail.count - start > 1 { trail.removeLast() }
      let index = Int(trail[start])
      if frames == 0 { clearTrail() }
      if let last = lastOfOneRoot, last.entries[0].identity == pins[index].identity,
        last.entries[0].version == pins[index].version
      {
        return last
      }
      let reads = Reads(
        entries: [Reads.Read(pinnedRoots[index], identity: pins[index].identity, version: pins[index].version)])
      // Kept only where another frame may follow: inside a frame or a pass from the roots up.
      if frames > 0 || isEvaluatingUpstream { lastOfOneRoot = reads }
      return reads
    }
    closings &+= 1
    if listed.count < pins.count { listed.append(contentsOf: repeatElement(0, count: pins.count - listed.count)) }
    if trail.count - start <= Self.scanLimit {
      var kept = start
      for position in start..<trail.count {
        let index = Int(trail[position])
        if listed[index] == closings { continue }
        listed[index] = closings
        trail[kept] = trail[position]
        kept += 1
      }
      trail.removeLast(trail.count - kept)
      let read = { (position: Int) -> Reads.Read in
        let index = Int(self.trail[position])
        return Reads.Read(
          self.pinnedRoots[index], identity: self.pins[index].identity, version: self.pins[index].version)
      }
      // Two roots (a pair, most values of several) as a literal: reserving capacity in an
      // empty array costs as much again.
      var entries: [Reads.Read]
      if kept - start == 2 {
        entries = [read(start), read(start + 1)]
      } else {
        entries = []
        entries.reserveCapacity(kept - start)
        for position in start..<kept { entries.append(read(position)) }
      }
      if frames == 0 { clearTrail() }
      return Reads(entries: entries)
    }
    return closeWideFrame(start)
  }

  /// ``closeFrame(_:)`` of more than ``scanLimit`` reads, through buffers: each element
  /// written through an array stored here would check that the array is not shared.
  @usableFromInline func closeWideFrame(_ start: Int) -> Reads {
    let (closing, end) = (closings, trail.count)
    var kept = start
    let entries = [Reads.Read](unsafeUninitializedCapacity: end - start) { out, made in
      trail.withUnsafeMutableBufferPointer { trail in
        listed.withUnsafeMutableBufferPointer { listed in
          pins.withUnsafeBufferPointer { pins in
            pinnedRoots.withUnsafeBufferPointer { roots in
              for position in start..<end {
                let index = Int(trail[position])
                if listed[index] == closing { continue }
                listed[index] = closing
                trail[kept] = trail[position]
                kept &+= 1
                (out.baseAddress.unsafelyUnwrapped + made).initialize(
                  to: Reads.Read(roots[index], identity: pins[index].identity, version: pins[index].version))
                made &+= 1
              }
            }
          }
        }
      }
    }
    trail.removeLast(end - kept)
    if frames == 0 { clearTrail() }
    return Reads(entries: entries)
  }

  /// Whether the reads in `trail` from `start` on are of one root, read once or more.
  @inlinable func readOneRoot(from start: Int) -> Bool {
    guard start < trail.count else { return false }
    for position in (start &+ 1)..<trail.count where trail[position] != trail[start] { return false }
    return true
  }

  /// Empties `trail`, keeping its capacity: a few reads are removed one by one, since
  /// `removeAll(keepingCapacity:)` goes through the general `replaceSubrange`.
  @inlinable func clearTrail() {
    if trail.count <= Self.scanLimit {
      while !trail.isEmpty { trail.removeLast() }
    } else {
      trail.removeAll(keepingCapacity: true)
    }
  }

  /// Whether `reads` are this snapshot's state of their roots: pins each in order (as
  /// the evaluation that read them did). If they match, they count as read by the open
  /// frames; if not, nothing does, and the evaluation that follows records what it
  /// reads itself. With `pinningAll` (a value that reads the same roots every time),
  /// the roots after the first that differs are pinned too, with the root objects the
  /// reads keep: the evaluation reads them next, and would otherwise make a property's
  /// root anew.
  @inlinable func matches(_ reads: Reads, pinningAll: Bool = false) -> Bool {
    let start = trail.count
    for position in reads.entries.indices {
      let index = find(reads.entries[position].identity) ?? pinNew(reads.entries[position].root)
      guard pins[index].version == reads.entries[position].version else {
        if frames > 0 { trail.removeLast(trail.count - start) }
        guard pinningAll else { return false }
        for later in reads.entries[(position + 1)...] where find(later.identity) == nil { _ = pinNew(later.root) }
        return false
      }
      if frames > 0 { trail.append(Int32(truncatingIfNeeded: index)) }
    }
    return true
  }

  /// ``matches(_:pinningAll:)`` of the reads of one root pinned here already, which
  /// pins nothing and calls nothing, so that it can run under a memo's lock; nil for
  /// other reads.
  @inlinable func matchesPinned(_ reads: Reads) -> Bool? {
    guard reads.count == 1, let index = find(reads.entries[0].identity) else { return nil }
    guard pins[index].version == reads.entries[0].version else { return false }
    if frames > 0 { trail.append(Int32(truncatingIfNeeded: index)) }
    return true
  }

  /// Whether `reads`, read in this snapshot, held together: one root, or each is still
  /// at the version read.
  @inlinable func held(_ reads: Reads) -> Bool {
    pins.count <= 1 || reads.areCurrent(for: reader)
  }

  /// Whether every pinned value held at one instant: no root moved since it was pinned
  /// (each root's version read again, without its lock where it can be).
  @usableFromInline var isConsistent: Bool {
    if pins.count <= 1 { return true }
    for index in pins.indices where pins[index].root.versionNow(for: reader) != pins[index].version { return false }
    return true
  }
}
