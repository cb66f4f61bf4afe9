import Synchronization
import Testing

@testable import Evented

/// An array kept up to date from changesets alone.
private final class IntReplica: Sendable {
  let rows = Mutex<[Int]>([])
  let changesets = Mutex(0)

  func apply(_ changeset: ArrayChangeset<Int>) {
    rows.withLock { $0 = changeset.applied(to: $0) }
    changesets.withLock { $0 += 1 }
  }
}

@Suite struct ArrayPropertyReplicaTests {
  @Test func fromEmptyFirstInsertsTheCurrentArrayThenDeliversEveryChangeset() {
    let property = ArrayProperty([1, 2, 3])
    let log = Recorder<ArrayChangeset<Int>>()
    let subscription = property.observeChanges(fromEmpty: true) { log.append($0) }
    property.append(4)
    #expect(log.values.count == 2)
    #expect(
      log.values.first?.changes == [
        .insert(index: 0, element: 1), .insert(index: 1, element: 2), .insert(index: 2, element: 3),
      ])
    #expect(log.values.first?.array == [1, 2, 3])
    #expect(log.values.first?.insertions == [0, 1, 2])
    #expect(log.values.last?.changes == [.insert(index: 3, element: 4)])
    subscription.cancel()
  }

  @Test func fromEmptyOfAnEmptyArrayDeliversAnEmptyChangeset() {
    let property = ArrayProperty<Int>([])
    let log = Recorder<ArrayChangeset<Int>>()
    let subscription = property.observeChanges(fromEmpty: true) { log.append($0) }
    #expect(log.values.map(\.isEmpty) == [true])
    subscription.cancel()
  }

  @Test func aReplicaSubscribedWhileWritersRunEndsEqualToValue() {
    let property = ArrayProperty(Array(0..<50))
    let replica = IntReplica()
    let finished = onThreads(3) { thread in
      if thread == 0 {
        property.observeChanges(with: replica, fromEmpty: true) { replica, changeset in replica.apply(changeset) }
        return
      }
      var random = SplitMix(seed: thread)
      for step in 0..<600 {
        switch random.next() % 6 {
        case 0 where property.count < 80: property.append(step)
        case 0, 1: property.popLast()
        case 2 where property.count < 80: property.insert(contentsOf: [step, step + 1], at: 0)
        case 3: property.batch { array in if let index = array.firstIndex(of: step - 1) { array.remove(at: index) } }
        case 4: property.value = property.value.shuffled(using: &random)
        default:
          property.batch { array in
            if array.count > 3 { array.replaceSubrange(1..<3, with: [step]) }
          }
        }
      }
    }
    #expect(finished)
    #expect(replica.rows.withLock { $0 } == property.value)
    #expect(replica.changesets.withLock { $0 } >= 1)
  }

  @Test func appliedToReplaysRunsOfBulkChanges() {
    let property = ArrayProperty(Array(0..<10))
    let log = ChangesetLog(property)
    property.insert(contentsOf: 100..<110, at: 3)
    property.replaceSubrange(2..<15, with: [7])
    property.append(contentsOf: 20..<25)
    property.removeAll()
    var replica = Array(0..<10)
    for changeset in log.changesets {
      replica = changeset.applied(to: replica)
      #expect(replica == changeset.array)
    }
    #expect(log.changesets.count == 4)
    #expect(log.changesets[0].insertions == Array(3..<13))
    #expect(log.changesets[0].removals.isEmpty)
    #expect(log.changesets[1].removals == Array(2..<15))
    #expect(log.changesets[1].insertions == [2])
    #expect(log.changesets[3].removals == Array(0..<13))
    #expect(log.changesets[3].insertions.isEmpty)
    for (changeset, old) in zip(log.changesets.dropFirst(), log.changesets) {
      expectConsistent(changeset, from: old.array)
    }
  }
}
