// The tail trim: a subscribe first drops up to two ended subscriptions or tombstones
// from the end of the list, and a released handler is an optional set to nil. The trim
// must never drop a live subscription, reorder the others or unbalance the live count,
// alone or under contention. (Its meeting with a handler still running on another
// thread is in TailTrimRunningHandlerTests.) Every test passes on correct code and
// fails if its promise breaks; none sleeps to decide its result.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Evented

@Suite struct TailTrimTests {
  // MARK: - Order, liveness and counts under every mix of ends at the tail

  /// A random mix of subscribes (handle-owned, owner-owned, once-only), cancels (mostly
  /// of the last subscription, so that the trim runs), owner deaths, subscribe-then-
  /// cancel pairs, sends and counts, checked against a model after every step: each
  /// send reaches exactly the live subscriptions in subscription order, `observerCount`
  /// is exact, and `live` and the snapshot agree with the slots.
  @Test(arguments: 0..<6) func trimKeepsLiveSubscriptionsInOrderAndCountsExact(seed: Int) {
    var random = SplitMix(seed: seed)
    let source = EventSource<Int>()
    let seen = Monitor<[(id: Int, event: Int)]>([])
    struct Live {
      let id: Int
      let handle: Subscription
      var owner: Owner?
      let isOnce: Bool
    }
    var model: [Live] = []
    var nextID = 0
    var event = 0
    for step in 0..<3_000 {
      let roll = Int.random(in: 0..<100, using: &random)
      switch roll {
      case 0..<25:
        let id = nextID
        nextID += 1
        let kind = Int.random(in: 0..<3, using: &random)
        if kind == 0 {
          model.append(
            Live(
              id: id, handle: source.observe { event in seen.withLock { $0.append((id, event)) } }, owner: nil,
              isOnce: false))
        } else if kind == 1 {
          let owner = Owner()
          let handle = source.observe(with: owner) { _, event in seen.withLock { $0.append((id, event)) } }
          model.append(Live(id: id, handle: handle, owner: owner, isOnce: false))
        } else {
          model.append(
            Live(
              id: id, handle: source.observeOnce { event in seen.withLock { $0.append((id, event)) } }, owner: nil,
              isOnce: true))
        }
      case 25..<45:
        if let last = model.popLast() { last.handle.cancel() }
      case 45..<55:
        if !model.isEmpty {
          model.remove(at: Int.random(in: 0..<model.count, using: &random)).handle.cancel()
        }
      case 55..<62:
        // An owner dies: its subscription is ownerless, not ended.
        if let index = model.lastIndex(where: { $0.owner != nil }) { model.remove(at: index) }
      case 62..<75:
        let pair = source.observe { _ in Issue.record("a cancelled subscription was called") }
        pair.cancel()
      case 75..<92:
        source.send(event)
        let expected = model.map { $0.id }
        let got = seen.withLock { recorded in
          defer { recorded = [] }
          return recorded
        }
        #expect(got.allSatisfy { $0.event == event }, "step \(step)")
        #expect(got.map(\.id) == expected, "step \(step): delivered \(got.map(\.id)), live \(expected)")
        model.removeAll { $0.isOnce }
        event += 1
      default:
        #expect(source.observerCount == model.count, "step \(step)")
      }
      checkBookkeeping(source.hub, "step \(step)")
      if step % 100 == 0 {
        #expect(slotCount(source.hub) <= 2 * model.count + 64, "step \(step): \(slotCount(source.hub)) slots")
      }
    }
    withExtendedLifetime(model) {}
  }

  /// Trims mixed with tombstones. Subscribe-and-cancel churn at the tail no longer
  /// grows the slots, so the sweep that runs when they double never comes: only the
  /// incremental scan finds the subscriptions of owners that died in the middle of the
  /// list. The trim shortens the list under the scan's cursor and drops the tombstones
  /// the scan leaves at the end; the cursor must still reach every slot, so that those
  /// captures are released within a bounded number of subscribes, without any send.
  @Test func trimOfTombstonesKeepsTheScanReachingEverySlot() {
    let source = EventSource<Int>()
    let live = LiveCount()
    var keptOwners: [Owner] = []
    var dying: [Owner] = []
    for index in 0..<40 {
      let owner = Owner()
      let tracked = Tracked(live, id: index)
      source.observe(with: owner) { _, _ in withExtendedLifetime(tracked) {} }
      if index % 3 == 0 { dying.append(owner) } else { keptOwners.append(owner) }
    }
    let dyingCount = dying.count
    dying.removeAll()
    #expect(live.value == 40)
    var largest = 0
    for round in 0..<200 {
      // A screen opened and closed: an ended last subscription, or two.
      let first = source.observe { _ in }
      if round % 2 == 0 { source.observe { _ in }.cancel() }
      first.cancel()
      // Now and then an owner that dies at once: the scan leaves a tombstone at the
      // end, or in the middle once others follow it.
      if round % 10 == 0 { source.observe(with: Owner()) { _, _ in } }
      largest = max(largest, slotCount(source.hub))
      checkBookkeeping(source.hub, "round \(round)")
    }
    #expect(largest <= 40 + 24, "the slots grew to \(largest): the trim did not replace the churn in place")
    #expect(live.value == 40 - dyingCount, "captures of dead owners kept after 500 subscribes, no send")
    #expect(source.observerCount == keptOwners.count)
    withExtendedLifetime(keptOwners) {}
  }

  // MARK: - Handlers that replace themselves at the tail, inside a delivery pass

  /// Each handler of a chain cancels itself and subscribes its successor from inside
  /// the delivery (inline or on a queue): the successor takes the ended one's place at
  /// the end of the list. The successor must not receive the in-flight event, must
  /// receive every later one, in order, and the subscriptions before it keep theirs.
  @Test(arguments: [false, true]) func selfReplacingHandlerAtTheTailKeepsOrder(viaQueue: Bool) {
    let source = EventSource<Int>()
    let queue = DispatchQueue(label: "tail-trim-chain")
    let delivery: Delivery = viaQueue ? .queue(queue) : .synchronous
    let seen = Recorder<(link: Int, event: Int)>()
    let before = Recorder<Int>()
    let keeper = source.observe { before.append($0) }
    let box = SubscriptionBox()
    let live = LiveCount()
    let lateCalls = Counter()
    let links = Number(0)
    @Sendable func subscribeLink(_ link: Int) {
      let tracked = Tracked(live, id: link)
      let cancelled = Flag()
      box.subscription = source.observe(on: delivery) { event in
        if cancelled.isSet { lateCalls.increment() }
        withExtendedLifetime(tracked) {}
        seen.append((link, event))
        cancelled.set()
        box.cancel()
        subscribeLink(link + 1)
        links.increment()
      }
    }
    subscribeLink(0)
    let events = 300
    for event in 0..<events {
      source.send(event)
      if viaQueue {
        // The successor subscribes on the queue: wait for that delivery to return before
        // the next send. A handler still running keeps its ended subscription listed.
        queue.sync {}
        #expect(links.value == event + 1)
      }
      #expect(slotCount(source.hub) <= 3, "event \(event): \(slotCount(source.hub)) slots")
    }
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    let values = seen.values
    #expect(values.map(\.event) == Array(0..<events))
    #expect(values.map(\.link) == Array(0..<events), "a link received more than one event")
    #expect(before.values == Array(0..<events))
    #expect(lateCalls.value == 0)
    #expect(live.wait(for: 1), "the ended links' captures were not released")
    #expect(source.observerCount == 2)
    checkBookkeeping(source.hub, "end")
    withExtendedLifetime(keeper) {}
  }

  /// A property observer that, on each new value, cancels itself and observes again from
  /// inside its handler: the new observer replaces it at the tail, and its replay (the
  /// current value) is queued behind the pass. The chain must see every value in
  /// commit order, each new value followed by its replay, and never a stale one.
  @Test func selfReplacingPropertyObserverGetsReplayInCommitOrder() {
    let property = Property(0)
    let seen = Recorder<Int>()
    let box = SubscriptionBox()
    let last = Number(-1)
    @Sendable func observeAgain() {
      box.subscription = property.observe { value in
        seen.append(value)
        guard value != last.value else { return }  // the replay
        last.store(value)
        box.cancel()
        observeAgain()
      }
    }
    observeAgain()
    for value in 1...200 { property.value = value }
    var expected = [0, 0]
    for value in 1...200 { expected += [value, value] }
    #expect(seen.values == expected)
    #expect(property.observerCount == 1)
    checkBookkeeping(property.hub, "end")
  }

  // MARK: - Contention

  /// Two threads subscribe and cancel at the tail of two sources (each churn
  /// subscription checks that it receives each sender's events in order, and that it
  /// never starts after its cancel returned), while two threads send to each source and
  /// another calls `removeAllObservers()` and `observerCount` on the second in a loop.
  /// The kept subscriptions of the first source receive every event, each sender's in
  /// commit order; at the end the counts are exact.
  @Test func concurrentTailChurnKeepsOrderFinalityAndCounts() {
    let source = EventSource<Int>()
    let other = EventSource<Int>()
    let kept = (0..<3).map { _ in Recorder<Int>() }
    let keptHandles = kept.map { recorder in source.observe { recorder.append($0) } }
    let violations = Counter()
    let lateStarts = Counter()
    let stop = Flag()
    let events = 2_000
    // Two senders per source; an event is its sender times `stride` plus its number.
    let stride = 1_000_000
    let churners = (0..<2).map { thread in
      Spawned {
        var random = SplitMix(seed: thread)
        var held: [(Subscription, Flag)] = []
        func end(_ handle: Subscription, _ cancelled: Flag) {
          handle.cancel()
          cancelled.set()
        }
        while !stop.isSet {
          let target = Bool.random(using: &random) ? source : other
          let last = [Number(-1), Number(-1)]
          let cancelled = Flag()
          let handle = target.observe { event in
            if cancelled.isSet { lateStarts.increment() }
            if last[event / stride].exchange(event % stride) >= event % stride { violations.increment() }
          }
          if Int.random(in: 0..<3, using: &random) == 0 {
            held.append((handle, cancelled))
          } else {
            end(handle, cancelled)
          }
          if held.count > 3 {
            let (newest, flag) = held.removeLast()
            end(newest, flag)
          }
        }
        for (handle, flag) in held { end(handle, flag) }
      }
    }
    let remover = Spawned {
      while !stop.isSet {
        other.removeAllObservers()
        _ = other.observerCount
      }
    }
    let senders = [source, source, other, other].enumerated().map { index, target in
      Spawned { for event in 0..<events { target.send(index % 2 * stride + event) } }
    }
    for sender in senders { #expect(sender.join(timeout: .seconds(120))) }
    stop.set()
    for churner in churners { #expect(churner.join()) }
    #expect(remover.join())
    for recorder in kept {
      let values = recorder.values
      #expect(values.count == 2 * events)
      for sender in 0..<2 {
        let mine = values.filter { $0 / stride == sender }.map { $0 % stride }
        #expect(mine == Array(0..<events), "sender \(sender): lost or out of commit order")
      }
    }
    #expect(violations.value == 0, "a churn subscription received events out of order")
    #expect(lateStarts.value == 0, "a handler started after its cancel() returned")
    #expect(source.observerCount == kept.count)
    #expect(other.observerCount == 0)
    checkBookkeeping(source.hub, "source")
    checkBookkeeping(other.hub, "other")
    withExtendedLifetime(keptHandles) {}
  }

  // MARK: - Derived links at the tail

  /// `flatMapLatest` switching back and forth between two targets ends its link to the
  /// old target without waiting, and subscribes to the new one, whose ended link from
  /// the previous visit is last in its list: the trim replaces it. The targets' own
  /// observers keep their order, the counts drop back at each switch, and the chain
  /// delivers the value of the target it follows.
  @Test func flatMapLatestSwitchingBackAndForthReplacesItsOldLink() {
    let a = Property(1_000)
    let b = Property(200)
    let useA = Property(true)
    let chain = useA.flatMapLatest { $0 ? a : b }
    let seenA = Recorder<Int>()
    let keeperA = a.observe { seenA.append($0) }
    let seen = Recorder<(value: Int, countA: Int, countB: Int)>()
    let handle = chain.observe { value in seen.append((value, a.observerCount, b.observerCount)) }
    for round in 1...300 {
      useA.value = round % 2 == 0
      if round % 3 == 0 { a.value = 1_000 + round }
      checkBookkeeping(a.hub, "a, round \(round)")
      checkBookkeeping(b.hub, "b, round \(round)")
      #expect(slotCount(a.hub) <= 3, "a, round \(round): \(slotCount(a.hub)) slots")
      #expect(slotCount(b.hub) <= 2, "b, round \(round): \(slotCount(b.hub)) slots")
    }
    #expect(chain.value == a.value)
    #expect(seen.values.last?.value == a.value)
    // Following b: a has its keeper, b the link. Following a: a has both, b none.
    for (index, entry) in seen.values.enumerated() {
      let expected = entry.value == 200 ? (1, 1) : (2, 0)
      if (entry.countA, entry.countB) != expected {
        Issue.record("delivery \(index): value \(entry.value), counts \((entry.countA, entry.countB))")
        break
      }
    }
    var expectedA = [1_000]
    for round in 1...300 where round % 3 == 0 { expectedA.append(1_000 + round) }
    #expect(seenA.values == expectedA)
    withExtendedLifetime((handle, keeperA)) {}
  }
}
