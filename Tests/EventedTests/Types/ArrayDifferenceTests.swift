import Synchronization
import Testing

@testable import Evented

/// The length of a longest common subsequence of `a` and `b`.
private func commonLength(_ a: [Int], _ b: [Int]) -> Int {
  var row = [Int](repeating: 0, count: b.count + 1)
  for x in a {
    var diagonal = 0
    for j in b.indices {
      let above = row[j + 1]
      row[j + 1] = x == b[j] ? diagonal + 1 : Swift.max(row[j + 1], row[j])
      diagonal = above
    }
  }
  return row[b.count]
}

/// Inserts and removes of `changes`, a move counting as one of each; and whether any
/// change is a replacement.
private func editCount(_ changes: [ArrayChange<Int>]) -> (edits: Int, hasReplacement: Bool) {
  var edits = 0
  var hasReplacement = false
  for change in changes {
    switch change {
    case .insert, .remove: edits += 1
    case .move: edits += 2
    case .replace: hasReplacement = true
    }
  }
  return (edits, hasReplacement)
}

/// Elements whose `==` and `hash(into:)` call `touch` first.
private struct Touching: Hashable, Sendable {
  let id: Int
  let touch: @Sendable () -> Void

  static func == (lhs: Touching, rhs: Touching) -> Bool {
    lhs.touch()
    return lhs.id == rhs.id
  }

  func hash(into hasher: inout Hasher) {
    touch()
    hasher.combine(id)
  }
}

@Suite struct ArrayDifferenceTests {
  /// Random pairs of small arrays of small integers (equal elements common): the exact
  /// search always applies, and every difference is minimal.
  @Test func everyDifferenceReplaysAndIsMinimal() {
    var random = SplitMix(seed: 2_026)
    for round in 0..<6_000 {
      let old = (0..<Int(random.next() % 12)).map { _ in Int(random.next() % 5) }
      let new = (0..<Int(random.next() % 12)).map { _ in Int(random.next() % 5) }
      let changes = hashedChanges(from: old, to: new)
      let changeset = ArrayChangeset(changes: changes, array: new)
      guard changeset.applied(to: old) == new else {
        Issue.record("round \(round): \(changes) does not turn \(old) into \(new)")
        return
      }
      expectConsistent(changeset, from: old)
      let (edits, hasReplacement) = editCount(changes)
      let minimal = old.count + new.count - 2 * commonLength(old, new)
      #expect(!hasReplacement && edits == minimal, "round \(round): \(old) -> \(new): \(changes)")
    }
  }

  /// With the exact search ruled out, elements are matched by hashing: the difference
  /// always replays, and is minimal when no element occurs twice.
  @Test func hashedDifferencesReplayAndAreMinimalWithoutRepeatedElements() {
    var random = SplitMix(seed: 20)
    for round in 0..<6_000 {
      let unique = random.next() % 2 == 0
      let universe = unique ? 16 : 4
      var old = (0..<Int(random.next() % 14)).map { _ in Int(random.next() % UInt64(universe)) }
      var new = (0..<Int(random.next() % 14)).map { _ in Int(random.next() % UInt64(universe)) }
      if unique {
        old = Array(Set(old)).shuffled(using: &random)
        new = random.next() % 3 == 0 ? old.shuffled(using: &random) : Array(Set(new)).shuffled(using: &random)
      }
      let changes = hashedChanges(from: old, to: new, maximumExactDistance: 0)
      let changeset = ArrayChangeset(changes: changes, array: new)
      guard changeset.applied(to: old) == new else {
        Issue.record("round \(round): \(changes) does not turn \(old) into \(new)")
        return
      }
      expectConsistent(changeset, from: old)
      if unique {
        let (edits, hasReplacement) = editCount(changes)
        let minimal = old.count + new.count - 2 * commonLength(old, new)
        #expect(!hasReplacement && edits == minimal, "round \(round): \(old) -> \(new): \(changes)")
      }
    }
  }

  /// The example the Arrays guide gives of a hashed difference that is not minimal.
  @Test func hashedDifferencePairsRepeatedElementsInOrder() {
    let changes = hashedChanges(from: [1, 2], to: [2, 1, 2, 3], maximumExactDistance: 0)
    #expect(
      changes == [.move(from: 1, to: 0, element: 2), .insert(index: 2, element: 2), .insert(index: 3, element: 3)])
    #expect(
      hashedChanges(from: [1, 2], to: [2, 1, 2, 3]) == [.insert(index: 0, element: 2), .insert(index: 3, element: 3)])
  }

  @Test func largeShuffledAndChangedArraysReplay() {
    var random = SplitMix(seed: 5)
    let old = Array(0..<3_000)
    var changed = old.shuffled(using: &random)
    for index in stride(from: 0, to: 3_000, by: 7) { changed[index] = -index }
    changed.removeLast(100)
    changed.insert(contentsOf: 5_000..<5_100, at: 1_000)
    for new in [old.shuffled(using: &random), changed, old.map { $0 + 10_000 }, Array(old.reversed())] {
      let changes = hashedChanges(from: old, to: new)
      #expect(ArrayChangeset(changes: changes, array: new).applied(to: old) == new)
    }
    var tenChanges = old
    for index in [2_900, 2_100, 900, 300] { tenChanges.remove(at: index) }
    for index in [50, 750, 1_450, 1_950] { tenChanges.insert(-index, at: index) }
    tenChanges[1_500] = -1
    tenChanges[2_400] = -2
    let changes = hashedChanges(from: old, to: tenChanges)
    #expect(changes.count == 12)
    #expect(ArrayChangeset(changes: changes, array: tenChanges).applied(to: old) == tenChanges)
  }

  /// Large changesets with many moves are applied and summarized through a block list.
  @Test func largeChangesetsWithManyMovesApplyAndSummarize() {
    var random = SplitMix(seed: 9)
    let old = Array(0..<6_000)
    var new = old.shuffled(using: &random)
    for index in stride(from: 0, to: 6_000, by: 11) { new[index] = -index - 1 }
    new.removeSubrange(100..<300)
    let changeset = ArrayChangeset(changes: hashedChanges(from: old, to: new), array: new)
    #expect(changeset.usesBlocks(count: old.count))
    #expect(changeset.applied(to: old) == new)
    expectConsistent(changeset, from: old)
  }

  /// Replacements cost O(1) each on an array: a changeset of replacements alone, however
  /// large, is applied and summarized there, in linear time, not through a block list.
  @Test func largeChangesetsOfReplacementsApplyAndSummarizeOnAnArray() {
    let old = Array(0..<20_000)
    let property = ArrayProperty(old)
    let log = ChangesetLog(property)
    property.replaceSubrange(0..<old.count, with: old.map { -$0 - 1 })
    #expect(log.changesets.count == 1)
    guard let changeset = log.changesets.first else { return }
    let usesBlocks = changeset.usesBlocks(count: old.count)
    #expect(!usesBlocks)
    let applied = changeset.applied(to: old) == changeset.array
    #expect(applied)
    expectConsistent(changeset, from: old)
  }

  @Test func aBlockListInsertsAndRemovesAsAnArrayDoes() {
    var random = SplitMix(seed: 11)
    var array = Array(0..<1_000)
    var list = BlockList(array)
    for step in 0..<20_000 {
      switch random.next() % 3 {
      case 0:
        let index = Int(random.next() % UInt64(array.count + 1))
        array.insert(step, at: index)
        list.insert(step, at: index)
      case 1 where !array.isEmpty:
        let index = Int(random.next() % UInt64(array.count))
        #expect(list.remove(at: index) == array.remove(at: index))
      default:
        guard !array.isEmpty else { continue }
        let index = Int(random.next() % UInt64(array.count))
        array[index] = -step
        list[index] = -step
      }
    }
    #expect(list.elements == array)
  }

  @Test func assignmentComparesAndHashesElementsOutsideTheLock() {
    let holder = Mutex<ArrayProperty<Touching>?>(nil)
    let touch: @Sendable () -> Void = {
      // Reading the property under its own lock would stop the program.
      if let property = holder.withLock({ $0 }) { _ = property.count }
    }
    let elements = (0..<300).map { Touching(id: $0, touch: touch) }
    let property = ArrayProperty(elements)
    holder.withLock { $0 = property }
    let log = ChangesetLog(property)
    property.value = elements.shuffled()
    property.value = Array(elements.prefix(150))
    #expect(log.changesets.count == 2)
    #expect(property.value.map(\.id) == Array(0..<150))
    holder.withLock { $0 = nil }
  }

  @Test func anArrayChangedWhileTheDifferenceRunsIsDiffedAgain() {
    let holder = Mutex<ArrayProperty<Touching>?>(nil)
    let interruptions = Mutex(2)
    let touch: @Sendable () -> Void = {
      let interrupts = interruptions.withLock { left in
        defer { left = Swift.max(0, left - 1) }
        return left > 0
      }
      guard interrupts else { return }
      holder.withLock { $0 }?.remove(at: 0)
    }
    let elements = (0..<10).map { Touching(id: $0, touch: touch) }
    let property = ArrayProperty<Touching>(elements.map { Touching(id: $0.id, touch: {}) })
    holder.withLock { $0 = property }
    let log = ChangesetLog(property)
    let new = Array(elements.reversed())
    property.value = new
    #expect(property.value.map(\.id) == Array((0..<10).reversed()))
    var array = (0..<10).map { Touching(id: $0, touch: {}) }
    for changeset in log.changesets {
      array = changeset.applied(to: array)
      #expect(array.map(\.id) == changeset.array.map(\.id))
    }
    #expect(log.changesets.count == 3)
    holder.withLock { $0 = nil }
  }
}
