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

  @Test func appendingWithASynchronousObserverThatKeepsNothingChangesTheBufferInPlace() {
    let property = ArrayProperty<Int>([])
    let counted = Counter()
    let subscription = property.observeChanges { changeset in counted.add(changeset.array.count) }
    var moves = 0
    var address = bufferAddress(property)
    for i in 0..<1_000 {
      property.append(i)
      let now = bufferAddress(property)
      if now != address { moves += 1 }
      address = now
    }
    // Growing by doubling moves the buffer about log2(1,000) times; a copy per append,
    // 1,000 times.
    #expect(moves < 50)
    #expect(counted.value == 1_000 * 1_001 / 2)
    #expect(property.value == Array(0..<1_000))
    subscription.cancel()
  }

  @Test func arraysKeptByAnObserverStayAsTheyWereWhileAppendsGoOn() {
    let property = ArrayProperty<Int>([])
    let kept = Recorder<[Int]>()
    let subscription = property.observe { kept.append($0) }
    let lent = property.observeChanges { _ in }
    for i in 0..<200 { property.append(i) }
    // The current array first, then the array of every append.
    #expect(kept.values.count == 201)
    #expect(kept.values.enumerated().allSatisfy { index, array in array == Array(0..<index) })
    subscription.cancel()
    lent.cancel()
  }

  @Test func appendsOnSeveralThreadsWithSynchronousObserversThatReadEveryElement() {
    // The handlers run on whichever thread delivers, and read the whole buffer that the
    // next append changes in place: Thread Sanitizer checks that they are ordered.
    let property = ArrayProperty<Int>([])
    let sums = Counter()
    let subscription = property.observeChanges { changeset in sums.add(changeset.array.reduce(0, +) & 1) }
    let finished = onThreads { thread in
      for i in 0..<500 {
        property.append(thread * 1_000 + i)
        if i % 50 == 0 { _ = property.value }
      }
    }
    #expect(finished)
    #expect(property.count == 500 * contentionThreads)
    #expect(Set(property.value).count == 500 * contentionThreads)
    subscription.cancel()
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
