// A hub's version is read by derived values without the lock, through its address
// (`Hub.versionWord`): every way of committing must write it there, atomically, and a
// value read through a map must follow the writes of another thread.

import Testing

@testable import Evented

@Suite struct VersionWordTests {
  /// The version under the lock and the one loaded through the word.
  func versions<M, S>(_ hub: Hub<M, S>) -> (locked: UInt64, loaded: UInt64) {
    (hub.storage.withLock { $0.version }, hub.versionWord.pointee.load(ordering: .acquiring))
  }

  @Test func everyCommitOfAPropertyIsLoadedThroughTheWord() {
    let property = Property(0)
    #expect(versions(property.hub) == (0, 0))
    property.value = 1
    #expect(versions(property.hub) == (1, 1))
    property.value = 1  // equal: nothing committed
    #expect(versions(property.hub) == (1, 1))
    property.modify { $0 += 1 }
    #expect(versions(property.hub) == (2, 2))
    let handle = property.observe { _ in }
    property.value = 5  // with a subscriber: the path that delivers
    #expect(versions(property.hub) == (3, 3))
    handle.cancel()
  }

  @Test func aFollowingNodeCountsItsCommitsThroughTheWord() {
    let a = Property(1)
    let b = Property(2)
    let useA = Property(true)
    let chain = useA.flatMapLatest { $0 ? a : b }
    let handle = chain.observe { _ in }
    let hub = chain.derived!.hub
    let before = versions(hub)
    #expect(before.locked == before.loaded)
    useA.value = false
    b.value = 3
    let after = versions(hub)
    #expect(after.locked == after.loaded)
    #expect(after.loaded > before.loaded)
    #expect(chain.value == 3)
    handle.cancel()
  }

  /// While another thread's transaction that wrote `a` is open, the version carries the
  /// hiding bit, so a map of `a` read here is read under the lock and shows the state
  /// before the transaction; the bit goes when the transaction ends.
  @Test func anOpenTransactionHidesItsWritesFromAMapReadOnAnotherThread() {
    let a = Property(0)
    let mapped = a.map { $0 * 10 }
    #expect(mapped.value == 0)
    let hiding = HubState<Update<Int>, Int>.mayHideBit
    let wrote = Gate()
    let release = Gate()
    let writer = Spawned {
      transaction {
        a.value = 1
        #expect(mapped.value == 10)  // read back here, and remembered for this state
        wrote.open()
        release.wait()
      }
    }
    #expect(wrote.wait())
    #expect(a.hub.versionWord.pointee.load(ordering: .acquiring) & hiding != 0)
    #expect(mapped.value == 0, "a write of an open transaction of another thread was seen")
    release.open()
    #expect(writer.join())
    #expect(a.hub.versionWord.pointee.load(ordering: .acquiring) & hiding == 0)
    #expect(mapped.value == 10)
    let other = Property(0)
    let otherMapped = other.map { $0 + 1 }
    other.value = 2  // outside any transaction: never hidden
    #expect(other.hub.versionWord.pointee.load(ordering: .acquiring) & hiding == 0)
    #expect(otherMapped.value == 3)
  }

  /// A map read on one thread while another writes its source: each read is a value
  /// the source held, never older than the previous read, and the last one is current.
  @Test func aMapReadWithoutTheLockFollowsAnotherThreadsWrites() {
    let source = Property(0)
    let mapped = source.map { $0 * 2 }
    let writes = 20_000
    let done = Flag()
    let wrong = Recorder<String>()
    // Only a deadlock reaches the timeout: the whole suite runs at once on two cores.
    let finished = onThreads(2, timeout: .seconds(60)) { index in
      if index == 0 {
        for value in 1...writes { source.value = value }
        done.set()
        return
      }
      var last = 0
      while !done.isSet {
        let value = mapped.value
        if value < last || value % 2 != 0 { wrong.append("read \(value) after \(last)") }
        last = value
      }
    }
    #expect(finished)
    #expect(wrong.values.isEmpty, "\(wrong.values.prefix(3))")
    #expect(mapped.value == writes * 2)
  }
}
