// Finding a root's pin in a snapshot costs O(1) at any size: a scan of a few pins, the
// pin after the one found last, or an open-addressing table filled when a search needs
// it (Snapshot.swift).

extension Snapshot {
  /// The number of pins up to which a pin is found by comparing each: a constant, so
  /// that finding one costs O(1) at any size, and the one or two pins of most
  /// evaluations need no table.
  @inlinable static var scanLimit: Int { 8 }

  /// The index in `pins` of the pin of the root whose identity is `identity`, if it is
  /// pinned: by a scan of at most ``scanLimit`` pins, else the pin guessed (``guess``),
  /// else from ``slots``.
  @inlinable func find(_ identity: ObjectIdentifier) -> Int? {
    if pins.count <= Self.scanLimit {
      for index in pins.indices where pins[index].identity == identity { return index }
      return nil
    }
    let tried = guess
    if tried < pins.count, pins[tried].identity == identity {
      guess = tried &+ 1
      return tried
    }
    guard let index = search(identity) else { return nil }
    guess = index &+ 1
    return index
  }

  /// ``find(_:)`` of a pin that is not the one guessed, past ``scanLimit`` pins.
  @usableFromInline func search(_ identity: ObjectIdentifier) -> Int? {
    if indexed < pins.count { indexPins() }
    let (table, shift) = (slots, slotShift)
    return pins.withUnsafeBufferPointer { pins in
      let mask = table.count &- 1
      var slot = Self.hash(identity, shift: shift)
      while true {
        let stored = Int(table[slot])
        if stored == 0 { return nil }
        if pins[stored &- 1].identity == identity { return stored &- 1 }
        slot = (slot &+ 1) & mask
      }
    }
  }

  /// Where a root's search in ``slots`` starts: its address, multiplied (Fibonacci
  /// hashing: the top bits of the product are spread even for aligned addresses), with
  /// no call to the standard library's hasher.
  @inlinable static func hash(_ identity: ObjectIdentifier, shift: Int) -> Int {
    Int(truncatingIfNeeded: (UInt64(UInt(bitPattern: identity)) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
  }

  /// Enters the pins made since the last search in ``slots``; the table is emptied for
  /// a new snapshot's pins, and built again larger when they would fill more than half.
  @usableFromInline func indexPins() {
    let count = pins.count
    if indexed == 0 || count * 2 > slots.count {
      var size = max(slots.count, 32)
      while count * 2 > size { size *= 2 }
      if size != slots.count {
        slots.deallocate()
        slots = .allocate(capacity: size)
      }
      slots.initialize(repeating: 0)
      slotShift = 64 - size.trailingZeroBitCount
      indexed = 0
    }
    let (table, first, shift) = (slots, indexed, slotShift)
    pins.withUnsafeBufferPointer { pins in
      let mask = table.count &- 1
      for index in first..<count {
        var slot = Self.hash(pins[index].identity, shift: shift)
        while table[slot] != 0 { slot = (slot &+ 1) & mask }
        table[slot] = Int32(truncatingIfNeeded: index &+ 1)
      }
    }
    indexed = count
  }
}
