// The concurrency contract, for ArrayProperty: one changeset per commit, in commit
// order, reproducing the array; reentrancy; no user code under the lock; final
// cancellation; and the fixed forms of the seed's bugs.

import Dispatch
import Testing

@testable import Evented

/// A replica that one subscription keeps by replaying every changeset.
final class Replica: Sendable {
  private let state: Monitor<(array: [Int], applied: Int, problems: [String])>

  init(_ initial: [Int]) {
    state = Monitor((initial, 0, []))
  }

  func apply(_ changeset: ArrayChangeset<Int>) {
    state.withLock { state in
      let next = changeset.applied(to: state.array)
      if next != changeset.array {
        state.problems.append("changeset \(state.applied) applied to \(state.array) gives \(next)")
      }
      if let problem = problem(with: changeset, from: state.array) { state.problems.append(problem) }
      state.array = changeset.array
      state.applied += 1
    }
  }

  var array: [Int] { state.current.array }
  var applied: Int { state.current.applied }
  var problems: [String] { state.current.problems }
}

/// One random mutation that cannot fail whatever the array holds now.
func randomMutation(of property: ArrayProperty<Int>, _ random: inout SplitMix, tag: Int) {
  switch random.next() % 10 {
  case 0, 1: property.append(tag)
  case 2: _ = property.popLast()
  case 3: property.append(contentsOf: [tag, tag + 1])
  case 4:
    property.batch { array in
      if !array.isEmpty { array.remove(at: Int(random.next() % UInt64(array.count))) }
    }
  case 5:
    property.batch { array in
      array.insert(tag, at: Int(random.next() % UInt64(array.count + 1)))
    }
  case 6:
    property.batch { array in
      guard !array.isEmpty else { return }
      array.move(from: Int(random.next() % UInt64(array.count)), to: Int(random.next() % UInt64(array.count)))
      array[Int(random.next() % UInt64(array.count))] = tag
    }
  case 7:
    let length = Int(random.next() % 6)
    property.value = (0..<length).map { _ in Int(random.next() % 8) }
  case 8:
    var next = property.value
    if next.count > 1 { next.swapAt(0, next.count - 1) }
    next.append(tag)
    property.value = next
  default:
    if random.next() % 4 == 0 { property.removeAll() } else { _ = property.count }
  }
}

@Suite struct ArrayPropertyContractTests {
  @Test func fourWritersAndAReplayingSubscriberConvergeOnTheFinalArray() {
    let initial = [1, 2, 3]
    let property = ArrayProperty(initial)
    let replica = Replica(initial)
    let changes = property.observeChanges { replica.apply($0) }
    let arrays = Recorder<[Int]>()
    let values = property.observe { arrays.append($0) }
    let finished = onThreads { index in
      var random = SplitMix(seed: 77 + index)
      for step in 0..<1500 {
        randomMutation(of: property, &random, tag: index * 100_000 + step)
      }
    }
    #expect(finished)
    #expect(replica.problems.isEmpty, "\(replica.problems.prefix(3))")
    #expect(replica.array == property.value)
    #expect(arrays.values.last == property.value)
    changes.cancel()
    values.cancel()
  }

  @Test func changesetsArriveInCommitOrderAndChain() {
    let property = ArrayProperty<Int>([])
    let replica = Replica([])
    let subscription = property.observeChanges { replica.apply($0) }
    for step in 0..<50 {
      property.append(step)
      if step % 3 == 0 { property.removeFirst() }
      if step % 5 == 0 { property.value = property.value.reversed() }
    }
    #expect(replica.problems.isEmpty)
    #expect(replica.array == property.value)
    subscription.cancel()
  }

  @Test func mutationFromAHandlerIsCommittedAtOnceAndDeliveredAfterTheCurrentChangeset() {
    let property = ArrayProperty([0])
    let seen = Recorder<String>()
    let first = property.observeChanges { changeset in
      seen.append("first \(changeset.array)")
      if changeset.array == [0, 1] {
        property.append(2)
        seen.append("reads \(property.value)")
      }
    }
    let second = property.observeChanges { changeset in seen.append("second \(changeset.array)") }
    property.append(1)
    #expect(
      seen.values == [
        "first [0, 1]", "reads [0, 1, 2]", "second [0, 1]", "first [0, 1, 2]", "second [0, 1, 2]",
      ])
    first.cancel()
    second.cancel()
  }

  @Test func writingFromASubscriberDoesNotDeadlock() {
    // The seed deadlocked here: its subscriber ran while the collection's lock was held.
    let property = ArrayProperty(["a"])
    let owner = Owner()
    property.observe(with: owner) { _, array in
      if array.count < 5 { property.append("x") }
    }
    #expect(property.value == ["a", "x", "x", "x", "x"])
  }

  @Test func subscriberAddedDuringABatchGetsTheWholeArrayNeverHalfABatch() {
    for round in 0..<20 {
      let before = [round]
      let after = [round, 1, 2, 3]
      let property = ArrayProperty(before)
      let started = Gate()
      let firsts = Recorder<[Int]>()
      let late = Spawned {
        started.wait()
        let subscription = property.observe { firsts.append($0) }
        firsts.wait(forCount: 1)
        subscription.cancel()
      }
      property.batch { array in
        array.append(1)
        // The late subscriber may now reach the lock while the batch holds it.
        started.open()
        array.append(2)
        array.append(3)
      }
      #expect(late.join())
      let first = firsts.values.first
      #expect(first == before || first == after, "a late subscriber saw \(String(describing: first))")
    }
  }

  @Test func subscriptionMadeInsideAHandlerDoesNotReceiveTheInFlightChangeset() {
    let property = ArrayProperty([0])
    let inner = Recorder<[Int]>()
    let box = SubscriptionBox()
    let outer = property.observeChanges { changeset in
      if box.subscription == nil { box.subscription = property.observeChanges { inner.append($0.array) } }
    }
    property.append(1)
    #expect(inner.values.isEmpty)
    property.append(2)
    #expect(inner.values == [[0, 1, 2]])
    outer.cancel()
    box.subscription?.cancel()
  }

  @Test func cancelledSubscriptionReceivesNoFurtherChangesets() {
    let property = ArrayProperty([0])
    let seen = Recorder<[Int]>()
    let subscription = property.observeChanges { seen.append($0.array) }
    property.append(1)
    subscription.cancel()
    #expect(!subscription.isActive)
    property.append(2)
    #expect(seen.values == [[0, 1]])
    #expect(property.observerCount == 0)
  }

  @Test func cancelInsideTheHandlerStopsLaterDeliveriesInTheSamePass() {
    let property = ArrayProperty([0])
    let seen = Recorder<Int>()
    let box = SubscriptionBox()
    box.subscription = property.observeChanges { changeset in
      seen.append(changeset.array.count)
      property.append(9)
      box.subscription?.cancel()
    }
    property.append(1)
    #expect(seen.values == [2])
    #expect(property.value == [0, 1, 9])
  }

  @Test func readYourWritesAfterEveryMutation() {
    let property = ArrayProperty<Int>([])
    let finished = onThreads { index in
      for step in 0..<300 {
        property.append(index * 1000 + step)
        if !property.value.contains(index * 1000 + step) { Issue.record("lost own append") }
        property.batch { array in
          if let at = array.firstIndex(of: index * 1000 + step) { array.remove(at: at) }
        }
      }
    }
    #expect(finished)
    #expect(property.value.isEmpty)
  }

  @Test(arguments: [Delivery.synchronous, .queue(DispatchQueue(label: "array-handler-lock"))])
  func noUserCodeRunsUnderALockWhileAHandlerRuns(_ delivery: Delivery) {
    let property = ArrayProperty([0])
    let checks = Recorder<Bool>()
    let subscription = property.observe(on: delivery) { array in
      checks.append(completesOnAnotherThread { _ = property.value })
      if array == [0] { checks.append(completesOnAnotherThread { property.append(1) }) }
    }
    #expect(checks.wait(forCount: 3))
    #expect(checks.values == [true, true, true])
    subscription.cancel()
  }

  @Test func noUserCodeRunsUnderALockWhileRemovedElementsAndOldArraysAreReleased() {
    let property = ArrayProperty<DeinitProbe>([])
    let checks = Recorder<Bool>()
    func probe() -> DeinitProbe {
      DeinitProbe { checks.append(completesOnAnotherThread { _ = property.count }) }
    }
    property.append(probe())
    property.removeLast()
    property.append(probe())
    property.value = [probe()]
    property.batch { $0[0] = probe() }
    property.batch { $0.append(probe()) }
    property.removeAll()
    #expect(checks.wait(forCount: 5))
    #expect(checks.values.allSatisfy { $0 })
    #expect(checks.values.count == 5)
  }

  @Test func removedElementsOfAThrowingBatchAreReleasedOutsideTheLock() {
    struct Refused: Error {}
    let property = ArrayProperty<DeinitProbe>([])
    let checks = Recorder<Bool>()
    #expect(throws: Refused.self) {
      try property.batch { array throws(Refused) in
        array.append(DeinitProbe { checks.append(completesOnAnotherThread { _ = property.count }) })
        array.removeLast()
        throw Refused()
      }
    }
    #expect(checks.values == [true])
  }

  @Test func theSeedsWholeArrayAssignmentNowRemovesAsWellAsInserts() {
    // The seed's assignment emitted only insertions, so replaying it grew the array.
    let property = ArrayProperty(["test1", "test2"])
    let replica = Recorder<[String]>()
    let subscription = property.observeChanges { changeset in
      replica.append(changeset.applied(to: replica.values.last ?? ["test1", "test2"]))
    }
    property.value = ["test3"]
    property.value = []
    #expect(replica.values == [["test3"], []])
    subscription.cancel()
  }

  @Test func theSeedsReplaceNowHonoursTheReplacedRangesLength() {
    // The seed's replace(subRange:with:) replaced as many elements as it was given,
    // whatever the length of the range.
    let property = ArrayProperty(["test1", "test2", "test3", "test4"])
    let log = ChangesetLog(property)
    property.replaceSubrange(0..<3, with: ["new"])
    property.replaceSubrange(1..<1, with: ["a", "b"])
    #expect(property.value == ["new", "a", "b", "test4"])
    #expect(log.changesets.count == 2)
    if let first = log.changesets.first {
      expectConsistent(first, from: ["test1", "test2", "test3", "test4"])
      #expect(first.array == ["new", "test4"])
    }
  }

  @Test func theSeedsMutatorsEachDeliverOneChangeset() {
    // The seed's example and its list of methods, each as one changeset.
    let property = ArrayProperty(["test1", "test2"])
    let log = ChangesetLog(property)
    property.append("test3")
    property.append(contentsOf: ["test4", "test5"])
    property.insert("test0", at: 0)
    property.remove(at: 1)
    property.removeFirst()
    property.removeLast()
    property.replaceSubrange(0..<1, with: ["x", "y"])
    property.removeAll()
    #expect(log.changesets.count == 8)
    var previous = ["test1", "test2"]
    for changeset in log.changesets {
      expectConsistent(changeset, from: previous)
      previous = changeset.array
    }
    #expect(log.changesets.first?.changes == [.insert(index: 2, element: "test3")])
    #expect(previous == [])
  }

  @Test func removingFromAnEmptyArrayWithPopLastLeavesThePropertyUsable() {
    // The seed trapped or left its lock held; popLast is the non-trapping form.
    let property = ArrayProperty<Int>([])
    #expect(property.popLast() == nil)
    #expect(completesOnAnotherThread { property.append(1) })
    #expect(property.value == [1])
  }
}
