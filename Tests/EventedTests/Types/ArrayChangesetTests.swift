import Testing

@testable import Evented

/// One step of a random sequence, applied alike to an `ArrayProperty`, to a batch and
/// to a plain array (the model).
enum ArrayStep {
  case append(Int)
  case appendContents([Int])
  case insert(Int, at: Int)
  case insertContents([Int], at: Int)
  case remove(at: Int)
  case removeFirst
  case removeLast
  case popLast
  case removeAll
  case set(Int, at: Int)
  case replace(Range<Int>, with: [Int])
  case move(from: Int, to: Int)

  /// A step that is valid for an array of `count` elements.
  static func random(count: Int, _ random: inout SplitMix) -> ArrayStep {
    func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
    func elements() -> [Int] { (0..<below(4)).map { _ in below(6) } }
    if count == 0 {
      switch below(5) {
      case 0: return .append(below(6))
      case 1: return .appendContents(elements())
      case 2: return .insertContents(elements(), at: 0)
      case 3: return .popLast
      default: return .replace(0..<0, with: elements())
      }
    }
    switch below(12) {
    case 0: return .append(below(6))
    case 1: return .appendContents(elements())
    case 2: return .insert(below(6), at: below(count + 1))
    case 3: return .insertContents(elements(), at: below(count + 1))
    case 4: return .remove(at: below(count))
    case 5: return below(2) == 0 ? .removeFirst : .removeLast
    case 6: return below(4) == 0 ? .removeAll : .popLast
    case 7: return .set(below(6), at: below(count))
    case 8, 9:
      let lower = below(count + 1)
      let upper = lower + below(count - lower + 1)
      return .replace(lower..<upper, with: elements())
    default: return .move(from: below(count), to: below(count))
    }
  }

  func apply(to array: inout [Int]) {
    switch self {
    case .append(let element): array.append(element)
    case .appendContents(let elements): array.append(contentsOf: elements)
    case .insert(let element, let index): array.insert(element, at: index)
    case .insertContents(let elements, let index): array.insert(contentsOf: elements, at: index)
    case .remove(let index): array.remove(at: index)
    case .removeFirst: array.removeFirst()
    case .removeLast: array.removeLast()
    case .popLast: _ = array.popLast()
    case .removeAll: array.removeAll()
    case .set(let element, let index): array[index] = element
    case .replace(let range, let elements): array.replaceSubrange(range, with: elements)
    case .move(let from, let to): array.insert(array.remove(at: from), at: to)
    }
  }

  func apply(to batch: inout ArrayProperty<Int>.Batch) {
    switch self {
    case .append(let element): batch.append(element)
    case .appendContents(let elements): batch.append(contentsOf: elements)
    case .insert(let element, let index): batch.insert(element, at: index)
    case .insertContents(let elements, let index): batch.insert(contentsOf: elements, at: index)
    case .remove(let index): batch.remove(at: index)
    case .removeFirst: batch.removeFirst()
    case .removeLast: batch.removeLast()
    case .popLast: _ = batch.popLast()
    case .removeAll: batch.removeAll()
    case .set(let element, let index): batch[index] = element
    case .replace(let range, let elements): batch.replaceSubrange(range, with: elements)
    case .move(let from, let to): batch.move(from: from, to: to)
    }
  }

  func apply(to property: ArrayProperty<Int>) {
    switch self {
    case .append(let element): property.append(element)
    case .appendContents(let elements): property.append(contentsOf: elements)
    case .insert(let element, let index): property.insert(element, at: index)
    case .insertContents(let elements, let index): property.insert(contentsOf: elements, at: index)
    case .remove(let index): property.remove(at: index)
    case .removeFirst: property.removeFirst()
    case .removeLast: property.removeLast()
    case .popLast: _ = property.popLast()
    case .removeAll: property.removeAll()
    case .set(let element, let index): property[index] = element
    case .replace(let range, let elements): property.replaceSubrange(range, with: elements)
    case .move(let from, let to): property.move(from: from, to: to)
    }
  }
}

/// The changes of one changeset that are not replacements, counting a move as one.
private func editCount(_ changes: [ArrayChange<Int>]) -> (edits: Int, replacements: Int) {
  var edits = 0
  var replacements = 0
  for change in changes {
    if case .replace = change { replacements += 1 } else { edits += 1 }
  }
  return (edits, replacements)
}

@Suite struct ArrayChangesetTests {
  @Test func appliedToThePreviousArrayYieldsTheNewOne() {
    let changeset = ArrayChangeset(
      changes: [
        .insert(index: 0, element: "z"), .remove(index: 2, element: "b"), .replace(index: 1, old: "a", new: "A"),
        .move(from: 2, to: 0, element: "c"),
      ], array: ["c", "z", "A"])
    #expect(changeset.applied(to: ["a", "b", "c"]) == ["c", "z", "A"])
    #expect(changeset.removals == [0, 1, 2])
    #expect(changeset.insertions == [0, 1, 2])
    #expect(!changeset.isEmpty)
  }

  @Test func summariesOfOneChangeNameItsIndices() {
    #expect(ArrayChangeset(changes: [.move(from: 1, to: 3, element: 0)], array: [0, 0, 0, 0]).removals == [1])
    #expect(ArrayChangeset(changes: [.move(from: 1, to: 3, element: 0)], array: [0, 0, 0, 0]).insertions == [3])
    #expect(ArrayChangeset<Int>(changes: [], array: [1]).removals == [])
  }

  @Test func summariesFollowElementsThroughEarlierChanges() {
    // Insert at 0, then remove the element that was at old index 1 (now at 2).
    let changeset = ArrayChangeset(
      changes: [.insert(index: 0, element: 9), .remove(index: 2, element: 2)], array: [9, 1, 3])
    #expect(changeset.removals == [1])
    #expect(changeset.insertions == [0])
    expectConsistent(changeset, from: [1, 2, 3])
  }

  /// 10,000 random sequences of single mutations, batches and whole-array assignments
  /// on small arrays of small integers (so that equal elements and moves are common).
  /// After every step: the delivered changeset applied to the previous array gives the
  /// new one, equals `value` and the model, its summaries are consistent, and an
  /// assignment uses no more changes than a minimal difference.
  @Test func randomSequencesAlwaysProduceChangesetsThatReproduceTheArray() {
    var random = SplitMix(seed: 20_261_123)
    var steps = 0
    var failures = 0
    for sequence in 0..<10_000 {
      let initial = (0..<Int(random.next() % 7)).map { _ in Int(random.next() % 6) }
      let property = ArrayProperty(initial)
      let log = Recorder<ArrayChangeset<Int>>()
      let subscription = property.observeChanges { log.append($0) }
      var model = initial
      var delivered = 0
      for _ in 0..<6 {
        steps += 1
        let old = model
        var isAssignment = false
        switch random.next() % 10 {
        case 0, 1, 2, 3:
          let step = ArrayStep.random(count: model.count, &random)
          step.apply(to: &model)
          step.apply(to: property)
        case 4, 5, 6:
          var batchSteps: [ArrayStep] = []
          var scratch = model
          for _ in 0..<(1 + Int(random.next() % 4)) {
            let step = ArrayStep.random(count: scratch.count, &random)
            step.apply(to: &scratch)
            batchSteps.append(step)
          }
          model = scratch
          property.batch { batch in
            for step in batchSteps { step.apply(to: &batch) }
          }
        default:
          isAssignment = true
          if random.next() % 3 == 0 {
            model = old.shuffled(using: &random)
          } else {
            model = (0..<Int(random.next() % 8)).map { _ in Int(random.next() % 6) }
          }
          property.value = model
        }
        let value = property.value
        let changesets = log.values
        guard value == model else {
          failures += 1
          Issue.record("sequence \(sequence): value \(value), expected \(model)")
          break
        }
        if changesets.count == delivered {
          if isAssignment && old != model { Issue.record("sequence \(sequence): an assignment notified nobody") }
          continue
        }
        guard changesets.count == delivered + 1 else {
          Issue.record("sequence \(sequence): one step delivered \(changesets.count - delivered) changesets")
          failures += 1
          break
        }
        delivered += 1
        let changeset = changesets[changesets.count - 1]
        if changeset.array != value { Issue.record("sequence \(sequence): changeset.array differs from value") }
        if let problem = problem(with: changeset, from: old) {
          Issue.record("sequence \(sequence): \(problem)")
          failures += 1
        }
        if isAssignment {
          let (edits, replacements) = editCount(changeset.changes)
          let minimal = model.difference(from: old)
          if replacements != 0 || edits > minimal.count || changeset.changes.isEmpty {
            Issue.record(
              "sequence \(sequence): \(changeset.changes.count) changes for a difference of \(minimal.count)")
          }
          if old == model { Issue.record("sequence \(sequence): assigning an equal array notified") }
        }
        if failures > 10 { return }
      }
      subscription.cancel()
    }
    #expect(steps == 60_000)
  }

  /// Assignments of Equatable (not Hashable) elements: minimal differences without moves.
  @Test func randomAssignmentsOfEquatableElementsReproduceTheArray() {
    var random = SplitMix(seed: 7)
    let property = ArrayProperty<Label>([])
    let log = Recorder<ArrayChangeset<Label>>()
    let subscription = property.observeChanges { log.append($0) }
    var old: [Label] = []
    for _ in 0..<2_000 {
      let new = (0..<Int(random.next() % 8)).map { _ in Label(String(random.next() % 5)) }
      property.value = new
      if new != old {
        let changeset = log.values.last
        #expect(changeset?.applied(to: old) == new)
        #expect(changeset?.changes.count == new.difference(from: old).count)
        if let changeset { expectConsistent(changeset, from: old) }
      }
      old = new
    }
    subscription.cancel()
  }
}
