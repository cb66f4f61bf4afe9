// Promise 8: with duplicates skipped, a write equal to the current committed value
// notifies nobody, and no subscription ever receives `(x, x)` as a change.

import Dispatch
import Testing

@testable import Evented

@Suite struct DedupContract {
  static let deliveries: [Delivery] = [
    .synchronous,
    .queue(DispatchQueue(label: "dedup", attributes: .concurrent)),
  ]

  @Test(arguments: PropertySubjectKind.allCases, deliveries)
  func dedupIsExactUnderConcurrentWrites(_ kind: PropertySubjectKind, _ delivery: Delivery) {
    let subject = kind.make(0)
    let changes = Recorder<Change<Int>>()
    let values = Recorder<Int>()
    let a = subject.observeChanges(on: delivery) { changes.append($0) }
    let b = subject.observe(on: delivery) { values.append($0) }
    #expect(
      onThreads { index in
        var random = SplitMix(seed: index)
        for step in 0..<400 {
          if step % 3 == 0 {
            subject.modify { $0 = ($0 + Int.random(in: 0..<2, using: &random)) % 3 }
          } else {
            subject.value = Int.random(in: 0..<3, using: &random)
          }
        }
      })
    let final = subject.value
    // A last, distinct write marks the end of the deliveries on the queue.
    subject.value = 99
    #expect(values.wait { $0.last == 99 })
    #expect(changes.wait { $0.last?.newValue == 99 })
    let seenValues = values.values.dropLast()
    let allChanges = changes.values
    let seenChanges = Array(allChanges.dropLast())
    #expect(allChanges.allSatisfy { $0.oldValue != $0.newValue })
    #expect(zip(seenValues, seenValues.dropFirst()).allSatisfy { $0 != $1 })
    // Each change starts where the one before ended, the last write's included.
    #expect(zip(allChanges, allChanges.dropFirst()).allSatisfy { $0.newValue == $1.oldValue })
    // A synchronous observer receives every commit; one on a queue may receive the
    // final state merged into the last write's change (state coalesces on queues).
    if delivery.queue == nil, let last = seenChanges.last { #expect(last.newValue == final) }
    a.cancel()
    b.cancel()
  }

  @Test(arguments: PropertySubjectKind.allCases)
  func dedupIsExactAnEqualWriteNotifiesNobody(_ kind: PropertySubjectKind) {
    let subject = kind.make(7)
    let values = Recorder<Int>()
    let changes = Recorder<Change<Int>>()
    let a = subject.observe(on: .synchronous) { values.append($0) }
    let b = subject.observeChanges(on: .synchronous) { changes.append($0) }
    subject.value = 7
    subject.modify { $0 = 7 }
    subject.modify { $0 += 0 }
    #expect(values.values == [7])
    #expect(changes.values.isEmpty)
    subject.value = 8
    subject.value = 8
    #expect(values.values == [7, 8])
    #expect(changes.values == [Change(oldValue: 7, newValue: 8)])
    a.cancel()
    b.cancel()
  }

  @Test func dedupIsExactEqualityIsAgainstTheCommittedValueNotTheLastDelivered() {
    // While 1 is being delivered, a handler writes 2 and then 1 again: the second
    // write is compared with the committed 2, not with the 1 in flight, so it counts.
    let property = Property(0)
    let changes = Recorder<Change<Int>>()
    let a = property.observeChanges { change in
      changes.append(change)
      if change.oldValue == 0 {
        property.value = 2
        property.value = 1
        property.value = 1
      }
    }
    property.value = 1
    #expect(
      changes.values == [
        Change(oldValue: 0, newValue: 1), Change(oldValue: 1, newValue: 2), Change(oldValue: 2, newValue: 1),
      ])
    a.cancel()
  }

  // MARK: - Actor variants

  @Test(arguments: ActorPropertySubjectKind.allCases)
  func dedupIsExactActorPropertyNeverDeliversAnEqualChange(_ kind: ActorPropertySubjectKind) async {
    let property = kind.make(1)
    let changes = Recorder<Change<Int>>()
    let subscription = await property.observeChanges { change in changes.append(change) }
    await property.setValue(1)
    await property.modify { $0 = 1 }
    await property.setValue(2)
    await property.setValue(2)
    await withTaskGroup(of: Void.self) { group in
      for writer in 0..<4 {
        group.addTask {
          for index in 0..<500 { await property.setValue((writer + index) % 3) }
        }
      }
    }
    await property.setValue(7)
    #expect(await settles { changes.values.last?.newValue == 7 })
    let all = changes.values
    // Changes a slow handler was behind on arrive merged; each starts where the last ended.
    #expect(all.first?.oldValue == 1)
    #expect(zip(all, all.dropFirst()).allSatisfy { $0.newValue == $1.oldValue })
    #expect(all.allSatisfy { $0.oldValue != $0.newValue })
    let every = ActorProperty(1, skipsDuplicates: false)
    let seen = Recorder<Int>()
    let everySubscription = await every.observe { value in seen.append(value) }
    #expect(await settles { seen.values == [1] })
    await every.setValue(1)
    #expect(await settles { seen.values == [1, 1] })
    subscription.cancel()
    everySubscription.cancel()
  }
}
