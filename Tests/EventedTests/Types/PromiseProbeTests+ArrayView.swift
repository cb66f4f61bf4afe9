import Dispatch
import Testing

@testable import Evented

extension PromiseProbeTests {
  @Test func aMergedChangeOfAnArraysReadOnlyViewOnAHeldQueueThatCameBackIsNotDelivered() {
    let items = ArrayProperty([1])
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<Change<[Int]>>()
    let subscription = items.readOnly.observeChanges(on: .queue(queue)) { change in
      if seen.count == 0 { blocker.block() }
      seen.append(change)
    }
    items.append(2)
    #expect(blocker.entered.wait())
    items.removeLast()
    items.append(2)  // back to the array the handler received: the merged change is none
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values == [Change(oldValue: [1], newValue: [1, 2])])
    subscription.cancel()
  }

  @Test func aBatchThatLeavesAnArrayEqualNotifiesNoObserverOfItsReadOnlyViewWithAChangeToItself() {
    let items = ArrayProperty([1, 2, 3])
    let seen = Recorder<Change<[Int]>>()
    let mapped = Recorder<Change<[Int]>>()
    let s1 = items.readOnly.observeChanges { seen.append($0) }
    let s2 = items.readOnly.map { $0 }.observeChanges { mapped.append($0) }
    items.batch { array in
      array.append(4)
      array.removeLast()
    }
    #expect(mapped.values == [], "a map of the view skips the equal state")
    #expect(seen.values == [], "the view itself delivers \(seen.values)")
    s1.cancel()
    s2.cancel()
  }

  @Test func aTransactionThatLeavesAnArrayEqualNotifiesNoObserverOfItsReadOnlyViewWithAChangeToItself() {
    let items = ArrayProperty([1, 2, 3])
    let seen = Recorder<Change<[Int]>>()
    let s1 = items.readOnly.observeChanges { seen.append($0) }
    transaction {
      items.append(9)
      items.removeLast()
    }
    #expect(seen.values == [], "the view delivers \(seen.values)")
    s1.cancel()
  }
}
