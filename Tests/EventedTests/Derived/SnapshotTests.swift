// A snapshot pins each root on its first read and finds it again on every later read of
// the same evaluation: by a scan of a few pins, past that by a table. These tests pin
// many roots, read them in another order, and check that every read finds its own pin,
// that no root is pinned twice, and that an emptied snapshot forgets its pins.

import Testing

@testable import Evented

@Suite struct SnapshotTests {
  /// The roots of `properties`, as a value derived from them reads them.
  func roots(_ properties: [Property<Int>]) -> [any Root] {
    properties.map { $0.readOnly.roots[0] }
  }

  @Test func everyRootIsFoundAgainPastTheScannedPins() {
    let properties = (0..<1_000).map { Property($0) }
    let roots = roots(properties)
    let snapshot = Snapshot()
    for root in roots { _ = snapshot.index(of: root) }
    #expect(snapshot.pins.count == 1_000)
    for (position, root) in roots.enumerated().reversed() {
      #expect(snapshot.index(of: root) == position)
      #expect(snapshot.read(properties[position].hub) == position)
    }
    #expect(snapshot.pins.count == 1_000)  // nothing pinned twice
  }

  @Test func aRootFirstReadThroughItsHubIsPinnedOnce() {
    let properties = (0..<40).map { Property($0 * 10) }
    let snapshot = Snapshot()
    for property in properties { #expect(snapshot.read(property.hub) == property.value) }
    for property in properties.reversed() { #expect(snapshot.read(property.hub) == property.value) }
    #expect(snapshot.pins.count == 40)
  }

  @Test func anEmptiedSnapshotPinsAgainWithTheNewVersions() {
    let properties = (0..<20).map { Property($0) }
    let roots = roots(properties)
    let snapshot = Snapshot()
    let first = snapshot.versions(of: roots)
    properties[15].value = 100
    #expect(snapshot.versions(of: roots) == first)  // pinned: the write is not seen
    #expect(!snapshot.isConsistent)
    snapshot.empty()
    #expect(snapshot.find(ObjectIdentifier(properties[15].hub.storage)) == nil)
    let second = snapshot.versions(of: roots)
    #expect(second.isLater(than: first))
    #expect(snapshot.read(properties[15].hub) == 100)
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
}
