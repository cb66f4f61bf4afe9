import Testing

@testable import Evented

/// Elements that are Equatable but not Hashable: assignment diffs without moves.
struct Label: Equatable, Sendable {
  var text: String
  init(_ text: String) { self.text = text }
}

/// Elements that are not Equatable: assignment removes everything and inserts anew.
struct Opaque: Sendable {
  var id: Int
}

@Suite struct ArrayPropertyTests {
  /// Runs `mutation` on a property holding `initial` and returns the one changeset it
  /// delivered, after checking it against the old array and the property's value.
  func changeset(
    _ initial: [Int], sourceLocation: SourceLocation = #_sourceLocation, _ mutation: (ArrayProperty<Int>) -> Void
  ) -> ArrayChangeset<Int>? {
    let property = ArrayProperty(initial)
    let log = ChangesetLog(property)
    mutation(property)
    let all = log.changesets
    #expect(all.count <= 1, "one mutation delivered \(all.count) changesets", sourceLocation: sourceLocation)
    guard let changeset = all.first else { return nil }
    expectConsistent(changeset, from: initial, sourceLocation: sourceLocation)
    #expect(changeset.array == property.value, sourceLocation: sourceLocation)
    return changeset
  }

  @Test func appendInsertsAtTheEnd() {
    let changeset = changeset([1, 2]) { $0.append(3) }
    #expect(changeset?.changes == [.insert(index: 2, element: 3)])
    #expect(changeset?.array == [1, 2, 3])
    #expect(changeset?.removals == [])
    #expect(changeset?.insertions == [2])
  }

  @Test func appendContentsOfInsertsEachElementInOneChangeset() {
    let changeset = changeset([1]) { $0.append(contentsOf: [2, 3]) }
    #expect(changeset?.changes == [.insert(index: 1, element: 2), .insert(index: 2, element: 3)])
    #expect(changeset?.insertions == [1, 2])
  }

  @Test func appendingNothingNotifiesNobody() {
    #expect(changeset([1]) { $0.append(contentsOf: []) } == nil)
  }

  @Test func insertAtIndexShiftsTheRest() {
    let changeset = changeset([1, 2]) { $0.insert(0, at: 1) }
    #expect(changeset?.changes == [.insert(index: 1, element: 0)])
    #expect(changeset?.array == [1, 0, 2])
    #expect(changeset?.insertions == [1])
  }

  @Test func insertContentsOfInsertsInOrder() {
    let changeset = changeset([1, 2]) { $0.insert(contentsOf: [7, 8], at: 0) }
    #expect(changeset?.changes == [.insert(index: 0, element: 7), .insert(index: 1, element: 8)])
    #expect(changeset?.array == [7, 8, 1, 2])
    #expect(changeset?.insertions == [0, 1])
  }

  @Test func insertAtTheEndIsAllowed() {
    let changeset = changeset([1, 2]) { $0.insert(3, at: 2) }
    #expect(changeset?.array == [1, 2, 3])
  }

  @Test func removeAtReturnsTheElement() {
    let property = ArrayProperty([1, 2, 3])
    let log = ChangesetLog(property)
    #expect(property.remove(at: 1) == 2)
    #expect(log.changesets.map(\.changes) == [[.remove(index: 1, element: 2)]])
    #expect(log.changesets.first?.removals == [1])
    #expect(log.changesets.first?.insertions == [])
  }

  @Test func removeFirstAndRemoveLastReturnTheElements() {
    let property = ArrayProperty([1, 2, 3])
    let log = ChangesetLog(property)
    #expect(property.removeFirst() == 1)
    #expect(property.removeLast() == 3)
    #expect(
      log.changesets.map(\.changes) == [[.remove(index: 0, element: 1)], [.remove(index: 1, element: 3)]])
    #expect(property.value == [2])
  }

  @Test func popLastReturnsTheLastElementOrNilWhenEmpty() {
    let property = ArrayProperty([5])
    let log = ChangesetLog(property)
    #expect(property.popLast() == 5)
    #expect(property.popLast() == nil)
    #expect(log.changesets.map(\.changes) == [[.remove(index: 0, element: 5)]])
  }

  @Test func removeAllRemovesFromTheLastElementDown() {
    let changeset = changeset([1, 2, 3]) { $0.removeAll() }
    #expect(
      changeset?.changes == [
        .remove(index: 2, element: 3), .remove(index: 1, element: 2), .remove(index: 0, element: 1),
      ])
    #expect(changeset?.removals == [0, 1, 2])
    #expect(changeset?.array == [])
  }

  @Test func removeAllOfAnEmptyArrayNotifiesNobody() {
    #expect(changeset([]) { $0.removeAll() } == nil)
  }

  @Test func subscriptSetRecordsAReplacement() {
    let changeset = changeset([1, 2, 3]) { $0[1] = 9 }
    #expect(changeset?.changes == [.replace(index: 1, old: 2, new: 9)])
    #expect(changeset?.removals == [1])
    #expect(changeset?.insertions == [1])
  }

  @Test func subscriptSetWithAnEqualElementStillRecordsAReplacement() {
    let changeset = changeset([1, 2]) { $0[0] = 1 }
    #expect(changeset?.changes == [.replace(index: 0, old: 1, new: 1)])
  }

  @Test func subscriptGetReadsTheElement() {
    let property = ArrayProperty([4, 5])
    #expect(property[1] == 5)
    #expect(property.count == 2)
    #expect(!property.isEmpty)
    #expect(ArrayProperty<Int>([]).isEmpty)
  }

  @Test func replaceSubrangeWithFewerElementsReplacesThenRemoves() {
    let changeset = changeset([1, 2, 3, 4]) { $0.replaceSubrange(1..<3, with: [9]) }
    #expect(changeset?.changes == [.replace(index: 1, old: 2, new: 9), .remove(index: 2, element: 3)])
    #expect(changeset?.array == [1, 9, 4])
    #expect(changeset?.removals == [1, 2])
    #expect(changeset?.insertions == [1])
  }

  @Test func replaceSubrangeWithMoreElementsReplacesThenInserts() {
    let changeset = changeset([1, 2, 3]) { $0.replaceSubrange(1..<2, with: [7, 8, 9]) }
    #expect(
      changeset?.changes == [
        .replace(index: 1, old: 2, new: 7), .insert(index: 2, element: 8), .insert(index: 3, element: 9),
      ])
    #expect(changeset?.array == [1, 7, 8, 9, 3])
    #expect(changeset?.removals == [1])
    #expect(changeset?.insertions == [1, 2, 3])
  }

  @Test func replaceSubrangeWithAnEmptyRangeInserts() {
    let changeset = changeset([1, 2]) { $0.replaceSubrange(2..<2, with: [3]) }
    #expect(changeset?.changes == [.insert(index: 2, element: 3)])
  }

  @Test func moveRemovesThenInsertsAtTheFinalIndex() {
    let changeset = changeset([10, 11, 12, 13]) { $0.move(from: 0, to: 2) }
    #expect(changeset?.changes == [.move(from: 0, to: 2, element: 10)])
    #expect(changeset?.array == [11, 12, 10, 13])
    #expect(changeset?.removals == [0])
    #expect(changeset?.insertions == [2])
    let back = self.changeset([10, 11, 12, 13]) { $0.move(from: 3, to: 0) }
    #expect(back?.array == [13, 10, 11, 12])
  }

  @Test func moveToTheSameIndexNotifiesNobody() {
    #expect(changeset([1, 2]) { $0.move(from: 1, to: 1) } == nil)
  }

  @Test func assigningAnEqualArrayNotifiesNobody() {
    #expect(changeset([1, 2, 3]) { $0.value = [1, 2, 3] } == nil)
    let labels = ArrayProperty([Label("a")])
    let log = ChangesetLog(labels)
    labels.value = [Label("a")]
    #expect(log.changesets.isEmpty)
  }

  @Test func assignmentOfHashableElementsInfersMoves() {
    let changeset = changeset([1, 2, 3, 4]) { $0.value = [4, 1, 2, 3] }
    #expect(changeset?.changes == [.move(from: 3, to: 0, element: 4)])
    #expect(changeset?.removals == [3])
    #expect(changeset?.insertions == [0])
  }

  @Test func assignmentRecordsAMinimalDifference() {
    let changeset = changeset([1, 2, 3, 4, 5]) { $0.value = [1, 9, 3, 5, 6] }
    #expect(
      changeset?.changes == [
        .remove(index: 3, element: 4), .remove(index: 1, element: 2), .insert(index: 1, element: 9),
        .insert(index: 4, element: 6),
      ])
    #expect(changeset?.removals == [1, 3])
    #expect(changeset?.insertions == [1, 4])
  }

  @Test func assignmentOfEquatableElementsRecordsADifferenceWithoutMoves() {
    let labels = ArrayProperty([Label("a"), Label("b"), Label("c")])
    let log = ChangesetLog(labels)
    labels.value = [Label("c"), Label("a"), Label("b")]
    let changeset = log.changesets.first
    #expect(changeset?.changes == [.remove(index: 2, element: Label("c")), .insert(index: 0, element: Label("c"))])
    #expect(changeset?.applied(to: [Label("a"), Label("b"), Label("c")]) == labels.value)
  }

  @Test func assignmentOfOtherElementsRemovesEverythingThenInserts() {
    let property = ArrayProperty([Opaque(id: 1), Opaque(id: 2)])
    let changes = Recorder<[ArrayChange<Opaque>]>()
    let subscription = property.observeChanges { changes.append($0.changes) }
    property.value = [Opaque(id: 3)]
    let recorded = changes.values.first ?? []
    #expect(recorded.count == 3)
    if recorded.count == 3,
      case .remove(1, let second) = recorded[0], case .remove(0, let first) = recorded[1],
      case .insert(0, let third) = recorded[2]
    {
      #expect([first.id, second.id, third.id] == [1, 2, 3])
    } else {
      Issue.record("unexpected changes \(recorded)")
    }
    subscription.cancel()
  }

  @Test func batchCommitsEverythingAsOneChangesetInOrder() {
    let property = ArrayProperty([1, 2, 3])
    let log = ChangesetLog(property)
    let removed = property.batch { array in
      let first = array.remove(at: 0)
      array.append(4)
      array[0] = 20
      array.move(from: 2, to: 0)
      return first
    }
    #expect(removed == 1)
    #expect(property.value == [4, 20, 3])
    #expect(log.changesets.count == 1)
    let changeset = log.changesets.first
    #expect(
      changeset?.changes == [
        .remove(index: 0, element: 1), .insert(index: 2, element: 4), .replace(index: 0, old: 2, new: 20),
        .move(from: 2, to: 0, element: 4),
      ])
    if let changeset { expectConsistent(changeset, from: [1, 2, 3]) }
    #expect(changeset?.removals == [0, 1])
    #expect(changeset?.insertions == [0, 1])
  }

  @Test func batchReadsTheArrayAsItStandsNow() {
    let property = ArrayProperty([3, 1, 2])
    property.batch { array in
      #expect(array.count == 3 && !array.isEmpty)
      #expect(array.first == 3 && array.last == 2)
      if let index = array.firstIndex(of: 1) { array.remove(at: index) }
      #expect(Array(array) == [3, 2])
      #expect(array.array == [3, 2])
    }
    #expect(property.value == [3, 2])
  }

  struct Refused: Error {}

  @Test func batchThatThrowsCommitsNothing() {
    let property = ArrayProperty([1, 2])
    let log = ChangesetLog(property)
    #expect(throws: Refused.self) {
      try property.batch { array throws(Refused) in
        array.append(3)
        array.removeAll()
        throw Refused()
      }
    }
    #expect(property.value == [1, 2])
    #expect(log.changesets.isEmpty)
  }

  @Test func batchThatChangesNothingNotifiesNobody() {
    let property = ArrayProperty([1])
    let log = ChangesetLog(property)
    let count = property.batch { $0.count }
    #expect(count == 1)
    #expect(log.changesets.isEmpty)
  }

  @Test func batchInsertThenRemoveOfTheSameElementLeavesNoSummary() {
    let changeset = changeset([1, 2]) { property in
      property.batch { array in
        array.insert(5, at: 1)
        array.remove(at: 1)
      }
    }
    #expect(changeset?.changes.count == 2)
    #expect(changeset?.removals == [])
    #expect(changeset?.insertions == [])
  }

  @Test func batchPopLastOnEmptyReturnsNil() {
    let property = ArrayProperty<Int>([])
    #expect(property.batch { $0.popLast() } == nil)
  }

  @Test func observeDeliversTheCurrentArrayFirstThenEveryArray() {
    let property = ArrayProperty([1])
    let owner = Owner()
    let arrays = Recorder<[Int]>()
    property.observe(with: owner) { _, array in arrays.append(array) }
    property.append(2)
    property.value = [3]
    #expect(arrays.values == [[1], [1, 2], [3]])
  }

  @Test func observeChangesDoesNotReplay() {
    let property = ArrayProperty([1])
    let log = ChangesetLog(property)
    #expect(log.changesets.isEmpty)
    property.append(2)
    #expect(log.changesets.map(\.array) == [[1, 2]])
  }

  @Test func subscriptionEndsWhenOwnerDeinitializes() {
    let property = ArrayProperty([1])
    var owner: Owner? = Owner()
    let arrays = Recorder<[Int]>()
    property.observeChanges(with: owner!) { _, changeset in arrays.append(changeset.array) }
    #expect(property.observerCount == 1)
    owner = nil
    property.append(2)
    #expect(arrays.values.isEmpty)
    #expect(property.observerCount == 0)
  }

  @Test func valuesYieldsTheCurrentArrayThenNewArrays() async {
    let property = ArrayProperty([1])
    let values = property.values(bufferingPolicy: .unbounded)
    property.append(2)
    property.removeFirst()
    var seen: [[Int]] = []
    for await array in values {
      seen.append(array)
      if seen.count == 3 { break }
    }
    #expect(seen == [[1], [1, 2], [2]])
    #expect(property.observerCount == 0, "leaving the loop ended the subscription")
  }
}
