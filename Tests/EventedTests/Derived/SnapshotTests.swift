// A snapshot pins each root on its first read and finds it again on every later read of
// the same evaluation: by a scan of a few pins, past that by a table. These tests pin
// many roots, read them in another order, and check that every read finds its own pin,
// that no root is pinned twice, and that an emptied snapshot forgets its pins.

import Testing

@testable import Evented

@Suite struct SnapshotTests {
  /// The roots of `properties`, as a value derived from them reads them.
  func roots(_ properties: [Property<Int>]) -> [any Root] {
    properties.map { $0.root }
  }

  /// The versions of `roots` in `snapshot`, pinning those not read yet.
  func versions(of roots: [any Root], in snapshot: Snapshot) -> [UInt64] {
    roots.map { snapshot.pin($0).version }
  }

  @Test func everyRootIsFoundAgainPastTheScannedPins() {
    let properties = (0..<1_000).map { Property($0) }
    let roots = roots(properties)
    let snapshot = Snapshot()
    for root in roots { _ = snapshot.index(of: root) }
    #expect(snapshot.pins.count == 1_000)
    for (position, root) in roots.enumerated().reversed() {
      #expect(snapshot.index(of: root) == position)
      #expect(snapshot.read(properties[position]) == position)
    }
    #expect(snapshot.pins.count == 1_000)  // nothing pinned twice
  }

  @Test func aRootFirstReadThroughItsHubIsPinnedOnce() {
    let properties = (0..<40).map { Property($0 * 10) }
    let snapshot = Snapshot()
    for property in properties { #expect(snapshot.read(property) == property.value) }
    for property in properties.reversed() { #expect(snapshot.read(property) == property.value) }
    #expect(snapshot.pins.count == 40)
  }

  @Test func pinsMadeAfterASearchAreFoundInAnyOrder() {
    let properties = (0..<200).map { Property($0) }
    let snapshot = Snapshot()
    for property in properties[..<20] { _ = snapshot.read(property) }
    #expect(snapshot.read(properties[3]) == 3)  // not the pin guessed: the table is filled
    for property in properties[20...] { _ = snapshot.read(property) }  // pinned after it
    var order = Array(properties.indices)
    var seed: UInt64 = 7
    for index in order.indices.reversed() {
      seed = seed &* 6_364_136_223_846_793_005 &+ 1
      order.swapAt(index, Int(seed >> 33) % (index + 1))
    }
    for index in order { #expect(snapshot.read(properties[index]) == index) }
    for index in properties.indices { #expect(snapshot.read(properties[index]) == index) }  // each guessed
    #expect(snapshot.pins.count == 200)
  }

  @Test func anEmptiedSnapshotPinsAgainWithTheNewVersions() {
    let properties = (0..<20).map { Property($0) }
    let roots = roots(properties)
    let snapshot = Snapshot()
    let first = versions(of: roots, in: snapshot)
    properties[15].value = 100
    #expect(versions(of: roots, in: snapshot) == first)  // pinned: the write is not seen
    #expect(!snapshot.isConsistent)
    snapshot.empty()
    #expect(snapshot.find(ObjectIdentifier(properties[15].hub.storage)) == nil)
    let second = versions(of: roots, in: snapshot)
    #expect(second != first)
    #expect(snapshot.read(properties[15]) == 100)
    #expect(snapshot.isConsistent)
    #expect(snapshot.pins.count == 20)
  }

  @Test func aSnapshotOfFewRootsAndOneOfManyFindTheSamePins() {
    for count in [1, 2, 8, 9, 16, 17, 33, 64, 65, 300] {
      let properties = (0..<count).map { Property($0) }
      let roots = roots(properties)
      let snapshot = Snapshot()
      for root in roots.shuffled() { _ = snapshot.index(of: root) }
      for (position, root) in roots.enumerated() {
        let index = snapshot.index(of: root)
        #expect(snapshot.pins[index].identity == root.identity, "\(count) roots, root \(position)")
      }
      #expect(snapshot.pins.count == count)
    }
  }

  /// A frame that reads one root several times (the two sides of a diamond) lists it
  /// once, shares the reads of the frame before it of that root at that version, and
  /// leaves one read of it to the frame around it.
  @Test func aFrameThatReadsOneRootTwiceListsItOnceAndSharesItsReads() {
    let a = Property(1)
    let b = Property(2)
    let snapshot = Snapshot()
    let outer = snapshot.openFrame()
    let side = snapshot.openFrame()
    _ = snapshot.read(a)
    let sideReads = snapshot.closeFrame(side)
    let diamond = snapshot.openFrame()
    _ = snapshot.read(a)
    _ = snapshot.read(a)
    let diamondReads = snapshot.closeFrame(diamond)
    #expect(diamondReads.count == 1)
    #expect(
      diamondReads.entries.withUnsafeBufferPointer(\.baseAddress)
        == sideReads.entries.withUnsafeBufferPointer(\.baseAddress))
    _ = snapshot.read(b)
    let all = snapshot.closeFrame(outer)
    #expect(all.entries.map(\.identity) == [ObjectIdentifier(a.hub.storage), ObjectIdentifier(b.hub.storage)])
  }
}
