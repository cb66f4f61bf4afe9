import Dispatch
import Synchronization
import Testing

@testable import Evented

/// State coalesces, events push back: an observer of state on a queue holds at most one
/// undelivered state, so writers never wait for it; an event observer on a queue keeps
/// the backlog limit.
@Suite struct StateCoalescingTests {
  /// A gate that the first handler call waits at: the observer's queue stays blocked
  /// while the test writes.
  final class Blocker: Sendable {
    let entered = Gate()
    let release = Gate()

    func block() {
      entered.open()
      release.wait()
    }
  }

  @Test func aWorkerNeverWaitsForABlockedStateObserverOnAQueue() {
    let progress = Property(0, backlogLimit: 4)
    let blocker = Blocker()
    let seen = Recorder<Int>()
    let subscription = progress.observe(on: .queue(DispatchQueue(label: "ui"))) { value in
      blocker.block()
      seen.append(value)
    }
    #expect(blocker.entered.wait())
    #expect(completesOnAnotherThread { for value in 1...10_000 { progress.value = value } })
    blocker.release.open()
    #expect(seen.wait { $0.last == 10_000 })
    #expect(seen.values.count <= 3, "the replay, at most one state before the writes, and the newest")
    #expect(seen.values == seen.values.sorted())
    subscription.cancel()
  }

  @Test func aWorkerNeverWaitsForABlockedObserverOfADerivedValueOnAQueue() {
    let progress = Property(0, backlogLimit: 4)
    let percent = progress.map { $0 / 100 }
    let blocker = Blocker()
    let seen = Recorder<Int>()
    let subscription = percent.observe(on: .queue(DispatchQueue(label: "ui"))) { value in
      blocker.block()
      seen.append(value)
    }
    #expect(blocker.entered.wait())
    #expect(completesOnAnotherThread { for value in 1...10_000 { progress.value = value } })
    blocker.release.open()
    #expect(seen.wait { $0.last == 100 })
    #expect(seen.values.count <= 3)
    subscription.cancel()
  }

  @Test func aWorkerNeverWaitsForABlockedObserverOfAnArrayOnAQueue() {
    let items = ArrayProperty<Int>([], backlogLimit: 4)
    let blocker = Blocker()
    let seen = Recorder<[Int]>()
    let subscription = items.observe(on: .queue(DispatchQueue(label: "ui"))) { array in
      blocker.block()
      seen.append(array)
    }
    #expect(blocker.entered.wait())
    #expect(completesOnAnotherThread { for value in 1...2_000 { items.append(value) } })
    blocker.release.open()
    #expect(seen.wait { $0.last?.count == 2_000 })
    #expect(seen.values.count <= 3)
    #expect(seen.values.last == Array(1...2_000))
    subscription.cancel()
  }

  @Test func aWorkerNeverWaitsForABlockedStateObserverOnTheMainQueue() async {
    let progress = Property(0, backlogLimit: 2)
    let seen = Recorder<Int>()
    let subscription = progress.observe(on: .main) { value in seen.append(value) }
    // Whether or not the main queue runs meanwhile, the writes return.
    #expect(completesOnAnotherThread { for value in 1...5_000 { progress.value = value } })
    #expect(await settles { seen.values.last == 5_000 })
    subscription.cancel()
  }

  @Test func aMergedChangeStartsWhereTheLastDeliveredOneEnded() {
    let name = Property(0)
    let blocker = Blocker()
    let seen = Recorder<Change<Int>>()
    let subscription = name.observeChanges(on: .queue(DispatchQueue(label: "ui"))) { change in
      blocker.block()
      seen.append(change)
    }
    name.value = 1
    #expect(blocker.entered.wait())
    for value in 2...500 { name.value = value }
    blocker.release.open()
    #expect(seen.wait { $0.last?.newValue == 500 })
    let changes = seen.values
    #expect(changes.first == Change(oldValue: 0, newValue: 1))
    #expect(changes.count == 2, "the change that blocked, then the merged one")
    for (before, after) in zip(changes, changes.dropFirst()) { #expect(after.oldValue == before.newValue) }
    subscription.cancel()
  }

  @Test func aMergedChangeThatComesBackToTheDeliveredValueIsNotDelivered() {
    let name = Property("a")
    let blocker = Blocker()
    let seen = Recorder<Change<String>>()
    let subscription = name.observeChanges(on: .queue(DispatchQueue(label: "ui"))) { change in
      if change.newValue == "b" { blocker.block() }
      seen.append(change)
    }
    name.value = "b"
    #expect(blocker.entered.wait())
    name.value = "c"
    name.value = "b"  // merged: from "b" to "b", no change
    blocker.release.open()
    name.value = "d"
    #expect(seen.wait { $0.last?.newValue == "d" })
    #expect(seen.values == [Change(oldValue: "a", newValue: "b"), Change(oldValue: "b", newValue: "d")])
    subscription.cancel()
  }

  @Test func aOnceOnlyObserverOnAQueueKeepsItsFirstState() {
    let count = Property(0)
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    queue.async { blocker.block() }
    #expect(blocker.entered.wait())
    let seen = Recorder<Int>()
    let subscription = count.observeOnce(on: .queue(queue)) { seen.append($0) }
    for value in 1...100 { count.value = value }
    blocker.release.open()
    #expect(seen.wait(forCount: 1))
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(seen.values == [1], "the next value after it subscribed")
    withExtendedLifetime(subscription) {}
  }

  @Test func mergedArrayChangesetsReproduceTheArray() {
    let items = ArrayProperty<Int>(Array(0..<50))
    let blocker = Blocker()
    let replica = Monitor<[Int]>([])
    let deliveries = Counter()
    let subscription = items.observeChanges(on: .queue(DispatchQueue(label: "ui")), fromEmpty: true) { changeset in
      blocker.block()
      replica.withLock { array in
        #expect(changeset.changes.count <= array.count + changeset.array.count)
        array = changeset.applied(to: array)
        #expect(array == changeset.array)
      }
      deliveries.increment()
    }
    #expect(blocker.entered.wait())
    var generator = SplitMix(seed: 7)
    for step in 0..<2_000 {
      let count = items.count
      switch step % 5 {
      case 0: items.append(step)
      case 1: items.insert(step, at: Int.random(in: 0...count, using: &generator))
      case 2 where count > 0: items.remove(at: Int.random(in: 0..<count, using: &generator))
      case 3 where count > 1:
        items.move(from: Int.random(in: 0..<count, using: &generator), to: Int.random(in: 0..<count, using: &generator))
      case 4 where count > 0: items[Int.random(in: 0..<count, using: &generator)] = -step
      default: items.append(step)
      }
    }
    blocker.release.open()
    let final = items.value
    #expect(replica.wait { $0 == final })
    #expect(deliveries.value <= 3)
    subscription.cancel()
  }

  @Test func mergedArrayChangesetsNeverOutgrowAReplacement() {
    let before = [1, 2, 3]
    let first = ArrayChangeset(
      changes: [
        .move(from: 0, to: 2, element: 1), .move(from: 0, to: 2, element: 2), .move(from: 0, to: 2, element: 3),
      ],
      array: [1, 2, 3])
    let second = ArrayChangeset(
      changes: [
        .move(from: 0, to: 2, element: 1), .move(from: 0, to: 2, element: 2), .replace(index: 0, old: 3, new: 9),
        .remove(index: 2, element: 2),
      ],
      array: [9, 1])
    // Seven changes would outnumber removing three elements and inserting two.
    let merged = first.merged(with: second)
    #expect(merged.changes.count == before.count + second.array.count)
    #expect(merged.applied(to: before) == [9, 1])
    #expect(merged.previousArray() == before)
    let misfit = ArrayChangeset(changes: [.remove(index: 5, element: 0)], array: [Int]())
    #expect(first.merged(with: misfit).changes.count == 4, "not chained: concatenated, never a trap")
    let short = ArrayChangeset(changes: [.insert(index: 3, element: 4)], array: [1, 2, 3, 4])
    let shortMerged = short.merged(with: ArrayChangeset(changes: [.remove(index: 0, element: 1)], array: [2, 3, 4]))
    #expect(shortMerged.changes == [.insert(index: 3, element: 4), .remove(index: 0, element: 1)])
    #expect(shortMerged.applied(to: before) == [2, 3, 4])
  }

  @Test func eventsOnAQueueAreNeverDroppedAndStillPushBack() async {
    let limit = 4
    let source = EventSource<Int>(backlogLimit: limit)
    let sent = Atomic<Int>(0)
    let peakBacklog = Atomic<Int>(0)
    let release = Gate()
    let seen = Recorder<Int>()
    let subscription = source.observe(on: .queue(DispatchQueue(label: "ui"))) { event in
      release.wait()
      peakBacklog.max(sent.load(ordering: .acquiring) - event, ordering: .relaxed)
      seen.append(event)
    }
    let sender = Spawned {
      for event in 1...200 {
        source.send(event)
        sent.store(event, ordering: .releasing)
      }
    }
    // The sender fills the backlog and waits there; without the limit it would send
    // all 200 before the handler first runs.
    #expect(await settles { sent.load(ordering: .acquiring) >= limit })
    release.open()
    #expect(sender.join())
    #expect(seen.wait(forCount: 200))
    #expect(seen.values == Array(1...200))
    #expect(peakBacklog.load(ordering: .relaxed) <= limit + 1)
    subscription.cancel()
  }
}
