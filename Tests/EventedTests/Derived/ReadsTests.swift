// What an evaluation read orders states: a later state has no root older and one newer
// among the roots both read; a snapshot's frames record each evaluation's reads, each
// root once, and hand them to the frame around.

import Testing

@testable import Evented

@Suite struct ReadsTests {
  let properties = (0..<4).map { Property($0) }

  /// Reads of `roots` (indices in `properties`) at `versions`.
  func reads(_ roots: [Int], _ versions: [UInt64]) -> Reads {
    let chosen = roots.map { properties[$0].root as any Root }
    return Reads(roots: chosen, identities: chosen.map(\.identity), versions: versions)
  }

  @Test func aStateIsLaterWhenNoRootIsOlderAndOneIsNewer() {
    #expect(reads([0, 1], [2, 5]).isLater(than: reads([0, 1], [1, 5])))
    #expect(!reads([0, 1], [1, 5]).isLater(than: reads([0, 1], [1, 5])), "the same state")
    #expect(!reads([0, 1], [2, 4]).isLater(than: reads([0, 1], [1, 5])), "one root older")
    #expect(reads([0], [1]).isLater(than: Reads()), "anything is later than nothing")
  }

  @Test func aSwitchIsOrderedByTheRootsBothRead() {
    // A `flatMapLatest` reads its outer root 0, then target 1 or target 2.
    #expect(reads([0, 2], [4, 0]).isLater(than: reads([0, 1], [3, 9])))
    #expect(!reads([0, 1], [3, 9]).isLater(than: reads([0, 2], [4, 0])), "an older choice")
    #expect(!reads([0, 2], [3, 7]).isLater(than: reads([0, 1], [3, 9])), "no root both read is newer")
  }

  @Test func aFrameListsEachRootOnceAndHandsItsReadsToTheFrameAround() {
    let snapshot = Snapshot()
    let outer = snapshot.openFrame()
    _ = snapshot.read(properties[2])
    let inner = snapshot.openFrame()
    _ = snapshot.read(properties[0])
    _ = snapshot.read(properties[1])
    _ = snapshot.read(properties[0])
    let innerReads = snapshot.closeFrame(inner)
    #expect(innerReads.identities == [0, 1].map { ObjectIdentifier(properties[$0].hub.storage) })
    _ = snapshot.read(properties[1])
    let outerReads = snapshot.closeFrame(outer)
    #expect(outerReads.identities == [2, 0, 1].map { ObjectIdentifier(properties[$0].hub.storage) })
    #expect(outerReads.versions == [0, 0, 0])
    #expect(snapshot.trail.isEmpty)
  }

  @Test func readsMatchASnapshotOnlyAtTheirVersionsAndCountAsReadThen() {
    let earlier = Snapshot()
    let start = earlier.openFrame()
    _ = earlier.read(properties[0])
    _ = earlier.read(properties[1])
    let recorded = earlier.closeFrame(start)
    let same = Snapshot()
    let frame = same.openFrame()
    #expect(same.matches(recorded))
    #expect(same.closeFrame(frame).identities == recorded.identities)
    properties[1].value = 10
    let later = Snapshot()
    let another = later.openFrame()
    #expect(!later.matches(recorded))
    #expect(later.closeFrame(another).count == 0, "a failed match counts nothing as read")
    #expect(reads([0, 1], [0, 1]).isLater(than: recorded))
  }
}
