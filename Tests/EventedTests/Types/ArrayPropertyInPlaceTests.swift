import Testing

@testable import Evented

/// The address of the stored buffer, read under the lock without sharing it.
private func bufferAddress(_ property: ArrayProperty<Int>) -> UnsafeRawPointer? {
  property.hub.storage.withLock { state in
    state.stored.elements.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
  }
}

@Suite struct ArrayPropertyInPlaceTests {
  @Test func mutationsWithoutObserversChangeTheBufferInPlace() {
    let property = ArrayProperty<Int>([])
    property.append(0)  // the initial array was its caller's: copied once
    let address = bufferAddress(property)
    property.hub.storage.withLock { $0.stored.elements.reserveCapacity(100) }
    let reserved = bufferAddress(property)
    for i in 1..<50 { property.append(i) }
    property[3] = 30
    property.insert(-1, at: 0)
    property.remove(at: 10)
    property.replaceSubrange(0..<2, with: [7, 8, 9])
    property.batch { $0.append(99) }
    #expect(address != nil)
    #expect(bufferAddress(property) == reserved)
  }

  @Test func aMutationAfterTheArrayWasReadCopiesItOnce() {
    let property = ArrayProperty<Int>([])
    property.append(0)
    property.hub.storage.withLock { $0.stored.elements.reserveCapacity(100) }
    let before = bufferAddress(property)
    let snapshot = property.value
    property.append(1)
    let copied = bufferAddress(property)
    #expect(copied != before)
    property.hub.storage.withLock { $0.stored.elements.reserveCapacity(100) }
    let reserved = bufferAddress(property)
    property.append(2)
    #expect(bufferAddress(property) == reserved)
    #expect(snapshot == [0])
    #expect(property.value == [0, 1, 2])
  }

  @Test func aDeliveredArrayIsNeverChangedAfterwards() {
    let property = ArrayProperty([1, 2, 3])
    let log = ChangesetLog(property)
    for i in 4...40 { property.append(i) }
    property.removeAll()
    property.append(contentsOf: [5, 6])
    var previous = [1, 2, 3]
    for changeset in log.changesets {
      #expect(changeset.applied(to: previous) == changeset.array)
      previous = changeset.array
    }
    #expect(log.changesets.count == 39)
    #expect(log.changesets[0].array == [1, 2, 3, 4])
    #expect(log.changesets[36].array.count == 40)
  }

  @Test func aThrowingBatchLeavesTheArrayAsItWas() {
    struct Refused: Error {}
    let property = ArrayProperty<Int>([])
    property.append(contentsOf: [1, 2, 3, 4])
    let log = ChangesetLog(property)
    #expect(throws: Refused.self) {
      try property.batch { array throws(Refused) in
        array.insert(contentsOf: [8, 9], at: 1)
        array.move(from: 0, to: 4)
        array[2] = 0
        array.remove(at: 3)
        array.replaceSubrange(0..<1, with: [5, 6, 7])
        array.removeAll()
        throw Refused()
      }
    }
    #expect(property.value == [1, 2, 3, 4])
    #expect(log.changesets.isEmpty)
    property.append(5)
    #expect(property.value == [1, 2, 3, 4, 5])
  }
}
