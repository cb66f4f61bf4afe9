import Dispatch
import Foundation
import Synchronization
import Testing

#if FaultInjection
  @_spi(FaultInjection) @testable import Evented
#else
  @testable import Evented
#endif

/// Promises checked where state coalesces on queues, where actor handlers suspend, and
/// where transactions mix arrays, events and properties seen through derived values.
@Suite struct PromiseProbeTests {
  struct Failure: Error {}

  init() {
    #if FaultInjection
      if let raw = ProcessInfo.processInfo.environment["EVENTED_PROBE_PLANT"], let value = UInt8(raw) {
        FaultInjection.planted = FaultInjection.Bug(rawValue: value)
      }
    #endif
  }

  /// Holds a queue: the first `block()` waits until `release` opens.
  final class Blocker: Sendable {
    let entered = Gate()
    let release = Gate()

    func block() {
      entered.open()
      release.wait()
    }

    /// Blocks `queue` now, before anything is delivered on it.
    func hold(_ queue: DispatchQueue) -> Bool {
      queue.async { self.block() }
      return entered.wait()
    }
  }

  /// Waits until everything queued on `queue` so far has run.
  func drain(_ queue: DispatchQueue) -> Bool {
    let drained = Gate()
    queue.async { drained.open() }
    return drained.wait()
  }

  struct Pair: Equatable, Sendable {
    var part: Int
    var other: Int
  }

  /// A value of more than a kilobyte: it waits on a queue in a letter on the heap.
  struct Wide: Equatable, Sendable {
    var part: Int
    var other: Int
    var padding = Kilobytes2(0)

    init(part: Int, other: Int) {
      self.part = part
      self.other = other
    }

    static func == (a: Self, b: Self) -> Bool { a.part == b.part && a.other == b.other }
  }

  // MARK: State coalescing on queues

  @Test func aKeyPathObserverOnAHeldQueueReceivesItsFirstPartWhenLaterWritesLeaveThePartEqual() {
    let pair = Property(Pair(part: 1, other: 0))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<Int>()
    let subscription = pair.observe(\.part, on: .queue(queue)) { seen.append($0) }
    #expect(completesOnAnotherThread { for other in 1...100 { pair.value.other = other } })
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values == [1], "the current part first, once, though only other parts changed")
    pair.value.part = 2
    #expect(seen.wait { $0.last == 2 })
    #expect(seen.values == [1, 2])
    subscription.cancel()
  }

  @Test func aKeyPathObserverOnAHeldQueueReceivesTheNewestPartWhenTheReplayIsStillWaiting() {
    let pair = Property(Pair(part: 1, other: 0))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<Int>()
    let subscription = pair.observe(\.part, on: .queue(queue)) { seen.append($0) }
    pair.value.part = 2
    pair.value.part = 3
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values.last == 3)
    #expect(seen.values == seen.values.sorted() && Set(seen.values).count == seen.values.count)
    subscription.cancel()
  }

  @Test func aKeyPathObserverOnAQueueIsNotCalledWhenItsPartCameBackWhileItWasBehind() {
    let pair = Property(Pair(part: 1, other: 0))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<Int>()
    let subscription = pair.observe(\.part, on: .queue(queue)) { part in
      if part == 2 { blocker.block() }
      seen.append(part)
    }
    #expect(seen.wait(forCount: 1))
    pair.value.part = 2
    #expect(blocker.entered.wait())
    pair.value.part = 5
    pair.value.part = 2  // back to the part the handler is receiving
    pair.value.other = 9
    blocker.release.open()
    #expect(drain(queue))
    pair.value.part = 3
    #expect(seen.wait { $0.last == 3 })
    #expect(seen.values == [1, 2, 3], "the part went 2 → 5 → 2 while the observer was behind")
    subscription.cancel()
  }

  @Test func anArrayReplicaFromEmptyOnAHeldQueueStartsFromTheEmptyArray() {
    let items = ArrayProperty(Array(0..<20))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let replica = Monitor<[Int]>([])
    let deliveries = Counter()
    let subscription = items.observeChanges(on: .queue(queue), fromEmpty: true) { changeset in
      replica.withLock { array in
        #expect(changeset.applied(to: array) == changeset.array)
        array = changeset.array
      }
      deliveries.increment()
    }
    #expect(
      completesOnAnotherThread {
        for step in 0..<500 {
          switch step % 4 {
          case 0: items.append(step)
          case 1: items.remove(at: 0)
          case 2: items.value = items.value.reversed()
          default: items.batch { $0.insert(-step, at: 0) }
          }
        }
      })
    blocker.release.open()
    let final = items.value
    #expect(replica.wait { $0 == final })
    #expect(drain(queue))
    #expect(deliveries.value == 1, "one merged changeset from the empty array")
    subscription.cancel()
  }

  @Test func mergedArrayChangesetsWithoutFromEmptyComposeOnTheLastDeliveredArray() {
    let items = ArrayProperty(Array(0..<30))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let previous = Monitor<[Int]>(Array(0..<30))
    let mismatches = Counter()
    let subscription = items.observeChanges(on: .queue(queue)) { changeset in
      blocker.block()
      previous.withLock { array in
        if changeset.applied(to: array) != changeset.array { mismatches.increment() }
        array = changeset.array
      }
    }
    items.append(30)
    #expect(blocker.entered.wait())
    let writer = Spawned {
      var generator = SplitMix(seed: 11)
      for step in 0..<600 {
        let count = items.count
        switch step % 6 {
        case 0: items.value = items.value.shuffled(using: &generator)
        case 1:
          items.batch { array in
            array.append(step)
            if array.count > 1 { array.move(from: 0, to: array.count - 1) }
          }
        case 2 where count > 2: items.replaceSubrange(1..<3, with: [step, step + 1, step + 2])
        case 3 where count > 0: items.move(from: count - 1, to: 0)
        case 4:
          transaction {
            items.append(step)
            if items.count > 3 { items.remove(at: 1) }
          }
        default: items.removeAll()
        }
      }
    }
    #expect(writer.join(), "the writer waited for a held state observer")
    blocker.release.open()
    let final = items.value
    #expect(previous.wait { $0 == final })
    #expect(mismatches.value == 0)
    subscription.cancel()
  }

  @Test func aCombinationOfAnArrayAndAPropertyOnAHeldQueueSeesOnlyWholeTransactionsAndEndsOnValue() {
    let items = ArrayProperty<Int>([])
    let count = Property(0)
    let version = Property(0)
    let all = items.readOnly.combineLatest(count, version)
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let torn = Recorder<String>()
    let last = Monitor<Int>(-1)
    let subscription = all.observe(on: .queue(queue)) { array, count, version in
      if version == 1 { blocker.block() }
      if array.count != count { torn.append("\(array.count) vs \(count)") }
      last.withLock { last in
        if version <= last { torn.append("back from \(last) to \(version)") }
        last = version
      }
    }
    transaction {
      items.append(1)
      count.value = 1
      version.value = 1
    }
    #expect(blocker.entered.wait())
    #expect(
      onThreads(2) { thread in
        for step in 0..<300 {
          transaction {
            if thread == 0 || step.isMultiple(of: 3) {
              items.append(step)
            } else if !items.isEmpty {
              items.removeLast()
            }
            count.value = items.count
            version.value += 1
          }
        }
      }, "a writer waited for a held state observer")
    blocker.release.open()
    #expect(version.value == 601)
    #expect(count.value == items.count)
    #expect(last.wait { $0 == 601 })
    #expect(torn.values == [])
    subscription.cancel()
  }

  @Test func aFlatMapLatestOnAHeldQueueSwitchesWholeAndNothingFromTheOldTargetFollows() {
    let useSecond = Property(false)
    let first = ArrayProperty([1])
    let second = ArrayProperty([100])
    let chosen = useSecond.flatMapLatest { $0 ? second.readOnly : first.readOnly }
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<[Int]>()
    let subscription = chosen.observe(on: .queue(queue)) { array in
      if array == [1, 2] { blocker.block() }
      seen.append(array)
    }
    #expect(seen.wait(forCount: 1))
    first.append(2)
    #expect(blocker.entered.wait())
    #expect(
      completesOnAnotherThread {
        transaction {
          useSecond.value = true
          second.append(101)
          first.append(3)
        }
        first.append(4)
      })
    blocker.release.open()
    #expect(drain(queue))
    first.append(5)
    #expect(drain(queue))
    #expect(seen.values == [[1], [1, 2], [100, 101]])
    #expect(first.observerCount == 0)
    subscription.cancel()
  }

  @Test func anObserverOfAMapOnAConcurrentQueueNeverOverlapsNeverHoldsAWriterAndEndsOnValue() {
    let source = Property(0)
    let tens = source.map { $0 * 10 }
    let queue = DispatchQueue(label: "pool", attributes: .concurrent)
    let overlaps = OverlapDetector()
    let blocker = Blocker()
    let seen = Recorder<Int>()
    let subscription = tens.observe(on: .queue(queue)) { value in
      overlaps.invocation {
        if value == 10 { blocker.block() }
        spin()
      }
      seen.append(value)
    }
    source.value = 1
    #expect(blocker.entered.wait())
    #expect(onThreads(3) { thread in for step in 1...2_000 { source.modify { $0 = max($0, step * 3 + thread) } } })
    blocker.release.open()
    let final = tens.value
    #expect(seen.wait { $0.last == final })
    #expect(overlaps.overlapCount == 0)
    #expect(seen.values == seen.values.sorted())
    #expect(seen.count <= 3, "the replay or 10, then the newest")
    subscription.cancel()
  }

  @Test func aMergedChangeOfADerivedValueOnAQueueStartsWhereTheLastEndedAndSkipsAComeBack() {
    let source = Property(0)
    let parity = source.map { $0 % 2 }
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<Change<Int>>()
    let subscription = parity.observeChanges(on: .queue(queue)) { change in
      if change.newValue == 1 && seen.count == 0 { blocker.block() }
      seen.append(change)
    }
    source.value = 1
    #expect(blocker.entered.wait())
    source.value = 2  // parity 0
    source.value = 3  // parity 1: back to what the handler received
    blocker.release.open()
    #expect(drain(queue))
    source.value = 4
    #expect(seen.wait { $0.count == 2 })
    #expect(drain(queue))
    #expect(seen.values == [Change(oldValue: 0, newValue: 1), Change(oldValue: 1, newValue: 0)])
    subscription.cancel()
  }

  @Test func eventsThroughAMapOnAQueueAreNeverDroppedAndTheirSenderIsPaced() async {
    let source = EventSource<Int>(backlogLimit: 4)
    let doubled = source.map { $0 * 2 }
    let sent = Number(0)
    let peakBacklog = Atomic<Int>(0)
    let release = Gate()
    let seen = Recorder<Int>()
    let subscription = doubled.observe(on: .queue(DispatchQueue(label: "ui"))) { event in
      release.wait()
      peakBacklog.max(sent.value - event / 2, ordering: .relaxed)
      seen.append(event / 2)
    }
    let sender = Spawned {
      for event in 1...3_000 {
        source.send(event)
        sent.store(event)
      }
    }
    #expect(await settles { sent.value >= 4 })
    release.open()
    #expect(sender.join())
    #expect(seen.wait(forCount: 3_000))
    #expect(seen.values == Array(1...3_000))
    #expect(peakBacklog.load(ordering: .relaxed) <= 2 * 1_024, "the sender was never paced")
    subscription.cancel()
  }

  @Test func eventsSentInATransactionToAFullQueueSubscriptionNeverWaitAndArriveInOrder() {
    let source = EventSource<Int>(backlogLimit: 2)
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<Int>()
    let subscription = source.observe(on: .queue(queue)) { seen.append($0) }
    let finished = completesOnAnotherThread {
      transaction {
        for event in 1...50 { source.send(event) }
      }
    }
    #expect(finished, "a send inside a transaction waited for room")
    blocker.release.open()
    #expect(seen.wait(forCount: 50))
    #expect(seen.values == Array(1...50))
    subscription.cancel()
  }

  @Test func aThrowingTransactionDeliversNothingToQueueObserversOfAnArrayAnEventSourceAndADerivedValue() {
    let items = ArrayProperty([1])
    let events = EventSource<String>()
    let name = Property("a")
    let both = items.readOnly.combineLatest(name)
    let queue = DispatchQueue(label: "ui")
    let seen = Recorder<String>()
    let s1 = items.observeChanges(on: .queue(queue)) { seen.append("items \($0.array)") }
    let s2 = events.observe(on: .queue(queue)) { seen.append("event \($0)") }
    let s3 = both.observe(on: .queue(queue)) { seen.append("both \($0.0) \($0.1)") }
    let s4 = name.observeChanges(on: .queue(queue)) { seen.append("name \($0.oldValue)→\($0.newValue)") }
    #expect(drain(queue))
    #expect(seen.values == ["both [1] a"])
    #expect(throws: Failure.self) {
      try transaction {
        items.append(2)
        events.send("x")
        name.value = "b"
        transaction {
          items[0] = 9
          events.send("y")
        }
        throw Failure()
      }
    }
    transaction {
      events.send("z")
      #expect(throws: Failure.self) {
        try transaction {
          items.append(7)
          name.value = "c"
          events.send("w")
          throw Failure()
        }
      }
      name.value = "d"
    }
    #expect(drain(queue))
    #expect(items.value == [1])
    // Each subscription in its own order; different subscriptions are not ordered.
    #expect(seen.values.sorted() == ["both [1] a", "both [1] d", "event z", "name a→d"])
    for subscription in [s1, s2, s3, s4] { subscription.cancel() }
  }

  @Test func cancellingAQueueObserverWhoseNewestStateWaitsIsFinalOnceCancelReturns() {
    let source = Property(0)
    let doubled = source.map { $0 * 2 }
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let cancelled = Flag()
    let lateCalls = Counter()
    let subscription = doubled.observe(on: .queue(queue)) { value in
      if cancelled.isSet { lateCalls.increment() }
      if value == 2 { blocker.block() }
    }
    source.value = 1
    #expect(blocker.entered.wait())
    for value in 2...50 { source.value = value }
    // Cancelled from another thread while the handler runs: cancel waits for it.
    let canceller = Spawned {
      subscription.cancel()
      cancelled.set()
    }
    blocker.release.open()
    #expect(canceller.join())
    source.value = 51
    #expect(drain(queue))
    #expect(lateCalls.value == 0, "the waiting state ran after cancel() returned")
  }

  @Test func removeAllObserversDropsAStateWaitingOnAQueue() {
    let source = Property(0)
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<Int>()
    let subscription = source.observe(on: .queue(queue)) { seen.append($0) }
    for value in 1...20 { source.value = value }
    source.removeAllObservers()
    blocker.release.open()
    #expect(drain(queue))
    source.value = 21
    #expect(drain(queue))
    #expect(seen.values == [], "delivered after removeAllObservers() returned")
    withExtendedLifetime(subscription) {}
  }

  @Test func anOwnerThatDiesWhileItsStateWaitsOnAQueueIsNeverCalled() {
    final class Screen: Sendable {}
    let source = Property(0)
    let combined = source.combineLatest(source.map { -$0 })
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let calls = Counter()
    var screen: Screen? = Screen()
    combined.observe(with: screen!, on: .queue(queue)) { _, _ in calls.increment() }
    source.value = 1
    screen = nil
    blocker.release.open()
    #expect(drain(queue))
    source.value = 2
    #expect(drain(queue))
    #expect(calls.value == 0)
    #expect(combined.observerCount == 0)
  }

  @Test func aOnceOnlyObserverOfADerivedValueOnAHeldQueueKeepsItsFirstState() {
    let source = Property(0)
    let label = source.map { "#\($0)" }
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<String>()
    let subscription = label.observeOnce(on: .queue(queue)) { seen.append($0) }
    for value in 1...30 { source.value = value }
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values == ["#0"] || seen.values == ["#1"], "observeOnce receives \(seen.values)")
    withExtendedLifetime(subscription) {}
  }

  @Test func aKeyPathObserverOfADerivedValueOnAHeldQueueIsCalledOnlyWhenItsPartChanged() {
    let first = Property(1)
    let second = Property(0)
    let pair = first.combineLatest(second).map { Pair(part: $0, other: $1) }
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<Int>()
    let subscription = pair.observe(\.part, on: .queue(queue)) { part in
      if part == 2 { blocker.block() }
      seen.append(part)
    }
    #expect(seen.wait(forCount: 1))
    first.value = 2
    #expect(blocker.entered.wait())
    for other in 1...20 { second.value = other }
    blocker.release.open()
    #expect(drain(queue))
    first.value = 3
    #expect(seen.wait { $0.last == 3 })
    #expect(seen.values == [1, 2, 3])
    subscription.cancel()
  }

  @Test func aQueueObserverSubscribedInsideATransactionStartsFromTheStateBeforeAndEndsOnItsCommit() {
    let items = ArrayProperty([1])
    let total = Property(1)
    let both = items.readOnly.combineLatest(total)
    let queue = DispatchQueue(label: "ui")
    let seen = Recorder<String>()
    let replica = Recorder<ArrayChangeset<Int>>()
    var subscriptions: [Subscription] = []
    transaction {
      items.append(2)
      total.value = 3
      subscriptions.append(both.observe(on: .queue(queue)) { seen.append("\($0.0) \($0.1)") })
      subscriptions.append(items.observeChanges(on: .queue(queue), fromEmpty: true) { replica.append($0) })
      items.append(3)
      total.value = 6
    }
    #expect(drain(queue))
    #expect(seen.values == ["[1] 1", "[1, 2, 3] 6"] || seen.values == ["[1, 2, 3] 6"])
    #expect(replica.values.reduce([Int]()) { $1.applied(to: $0) } == [1, 2, 3])
    #expect(replica.values.first?.applied(to: []) == [1] || replica.values.count == 1)
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test func aPropertysChangeOnAQueueAfterATransactionRunsFromTheValueBeforeIt() {
    let name = Property("a")
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<Change<String>>()
    let subscription = name.observeChanges(on: .queue(queue)) { change in
      if change.newValue == "b" { blocker.block() }
      seen.append(change)
    }
    name.value = "b"
    #expect(blocker.entered.wait())
    transaction {
      name.value = "c"
      name.value = "d"
    }
    try? transaction {
      name.value = "e"
      throw Failure()
    }
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values == [Change(oldValue: "a", newValue: "b"), Change(oldValue: "b", newValue: "d")])
    subscription.cancel()
  }

  @Test func aLargeValuesMergedChangeOnAHeldQueueStartsWhereTheLastEndedAndSkipsAComeBack() {
    let wide = Property(Wide(part: 0, other: 0))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<String>()
    let subscription = wide.observeChanges(on: .queue(queue)) { change in
      if change.newValue.part == 1 && seen.count == 0 { blocker.block() }
      seen.append("\(change.oldValue.part)→\(change.newValue.part)")
    }
    wide.value.part = 1
    #expect(blocker.entered.wait())
    for part in 2...20 { wide.value.part = part }
    wide.value.part = 1
    blocker.release.open()
    #expect(drain(queue))
    wide.value.part = 7
    #expect(seen.wait { $0.count == 2 })
    #expect(drain(queue))
    #expect(seen.values == ["0→1", "1→7"])
    subscription.cancel()
  }

  @Test func aLargeValuesKeyPathObserverOnAHeldQueueReceivesItsFirstPartOnce() {
    let wide = Property(Wide(part: 4, other: 0))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<Int>()
    let subscription = wide.observe(\.part, on: .queue(queue)) { seen.append($0) }
    for other in 1...20 { wide.value.other = other }
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values == [4])
    subscription.cancel()
  }

  @Test func aLargeDerivedValueOnAQueueIsGlitchFreeWhileTwoThreadsWriteItsRoots() {
    let a = Property(0)
    let b = Property(0)
    let wide = a.combineLatest(b).map { Wide(part: $0, other: $1) }
    let check = wide.combineLatest(a, b)
    let queue = DispatchQueue(label: "ui")
    let wrong = Recorder<String>()
    let last = Monitor<(Int, Int)>((0, 0))
    let subscription = check.observe(on: .queue(queue)) { wide, a, b in
      if wide.part != a || wide.other != b { wrong.append("\(wide.part),\(wide.other) vs \(a),\(b)") }
      last.withLock { last in
        if a < last.0 || b < last.1 { wrong.append("back from \(last) to \(a),\(b)") }
        last = (a, b)
      }
    }
    #expect(
      onThreads(2) { thread in
        let root = thread == 0 ? a : b
        for value in 1...1_000 { root.value = value }
      })
    #expect(last.wait { $0 == (1_000, 1_000) })
    #expect(wrong.values == [])
    subscription.cancel()
  }

  @Test func aDiamondOnAQueueIsGlitchFreeAndEndsOnValueWhileThreadsWriteAndReadIt() {
    let a = Property(0)
    let b = Property(0)
    let sum = a.combineLatest(b).map { $0 + $1 }
    let difference = a.combineLatest(b).map { $0 - $1 }
    let diamond = sum.combineLatest(difference, a, b)
    let queue = DispatchQueue(label: "ui")
    let wrong = Recorder<String>()
    let last = Monitor<(Int, Int)>((0, 0))
    let subscription = diamond.observe(on: .queue(queue)) { sum, difference, a, b in
      if sum != a + b || difference != a - b { wrong.append("\(sum) \(difference) for \(a), \(b)") }
      last.withLock { $0 = (a, b) }
    }
    let inline = diamond.observe { sum, difference, a, b in
      if sum != a + b || difference != a - b { wrong.append("inline \(sum) \(difference) for \(a), \(b)") }
    }
    #expect(
      onThreads(3) { thread in
        for value in 1...600 {
          switch thread {
          case 0: a.value = value
          case 1:
            transaction {
              b.value = value
              a.modify { $0 = max($0, value) }
            }
          default:
            let (s, d, x, y) = diamond.value
            if s != x + y || d != x - y { wrong.append("read \(s) \(d) for \(x), \(y)") }
          }
        }
      })
    let final = (a.value, b.value)
    #expect(last.wait { $0 == final })
    #expect(wrong.values == [])
    subscription.cancel()
    inline.cancel()
  }

  @Test func aMergedChangeOfAFlatMapLatestOnAHeldQueueThatCameBackIsNotDelivered() {
    let selector = Property(0)
    let targets = [Property(10), Property(20)]
    let chosen = selector.flatMapLatest { targets[$0] }
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<Change<Int>>()
    let subscription = chosen.observeChanges(on: .queue(queue)) { change in
      if change.newValue == 20 && seen.count == 0 { blocker.block() }
      seen.append(change)
    }
    selector.value = 1
    #expect(blocker.entered.wait())
    selector.value = 0
    targets[0].value = 20  // the other target, at the value the handler received
    blocker.release.open()
    #expect(drain(queue))
    targets[0].value = 30
    #expect(seen.wait { $0.count == 2 })
    #expect(drain(queue))
    #expect(seen.values == [Change(oldValue: 10, newValue: 20), Change(oldValue: 20, newValue: 30)])
    subscription.cancel()
  }

  @Test func aQueueSubscriptionBehindSlowSynchronousHandlersAndThreeSendersStaysBelowTwiceTheLimit() {
    let limit = 4
    let source = EventSource<Int>(backlogLimit: limit)
    let committed = Number(0)
    let handled = Number(0)
    let peak = Atomic<Int>(0)
    let release = Gate()
    let seen = Recorder<Int>()
    let slow = source.observe { _ in spin(2_000) }
    let queued = source.observe(on: .queue(DispatchQueue(label: "ui"))) { event in
      release.wait()
      peak.max(committed.value - handled.value, ordering: .relaxed)
      handled.increment()
      seen.append(event)
    }
    let senders = (0..<3).map { thread in
      Spawned {
        for step in 0..<300 {
          source.send(thread * 1_000 + step)
          committed.increment()
        }
      }
    }
    #expect(eventually { committed.value >= limit })
    release.open()
    #expect(senders.allSatisfy { $0.join() })
    #expect(seen.wait(forCount: 900))
    for thread in 0..<3 {
      let mine = seen.values.filter { $0 / 1_000 == thread }
      #expect(mine == Array(thread * 1_000..<thread * 1_000 + 300))
    }
    #expect(peak.load(ordering: .relaxed) < 2 * limit + 3, "peak \(peak.load(ordering: .relaxed))")
    slow.cancel()
    queued.cancel()
  }

  @Test func anOwnedKeyPathObserverOnAHeldQueueReceivesItsFirstPartOnce() {
    final class Screen: Sendable {}
    let screen = Screen()
    let pair = Property(Pair(part: 1, other: 0))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<Int>()
    pair.observe(\.part, with: screen, on: .queue(queue)) { _, part in seen.append(part) }
    for other in 1...30 { pair.value.other = other }
    blocker.release.open()
    #expect(drain(queue))
    pair.value.part = 2
    pair.value.other = 99
    #expect(drain(queue))
    #expect(seen.values == [1, 2])
    withExtendedLifetime(screen) {}
  }

  @Test func anOwnedArrayObserverOnAHeldQueueReceivesOneMergedChangesetThatFitsTheArrayItHad() {
    final class Screen: Sendable {}
    let screen = Screen()
    let items = ArrayProperty([1, 2, 3])
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let previous = Monitor<[Int]>([1, 2, 3])
    let mismatches = Counter()
    let deliveries = Counter()
    items.observeChanges(with: screen, on: .queue(queue)) { _, changeset in
      if deliveries.value == 0 { blocker.block() }
      previous.withLock { array in
        if changeset.applied(to: array) != changeset.array { mismatches.increment() }
        array = changeset.array
      }
      deliveries.increment()
    }
    items.append(4)
    #expect(blocker.entered.wait())
    for step in 0..<200 {
      if step.isMultiple(of: 3) { items.remove(at: 0) } else { items.insert(step, at: items.count / 2) }
    }
    blocker.release.open()
    let final = items.value
    #expect(previous.wait { $0 == final })
    #expect(drain(queue))
    #expect(mismatches.value == 0)
    #expect(deliveries.value == 2)
    withExtendedLifetime(screen) {}
  }

  @Test func aOnceOnlyObserverOfALargeValueOnAHeldQueueKeepsItsFirstState() {
    let wide = Property(Wide(part: 0, other: 0))
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    #expect(blocker.hold(queue))
    let seen = Recorder<Int>()
    let subscription = wide.observeOnce(on: .queue(queue)) { seen.append($0.part) }
    for part in 1...30 { wide.value.part = part }
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values == [1], "the next value after it subscribed")
    withExtendedLifetime(subscription) {}
  }

  @Test func aLoopOverAnArraysValuesEndsWhenTheArrayIsFreed() async {
    var items: ArrayProperty<Int>? = ArrayProperty([1])
    weak let weakItems = items
    let arrays = items!.values(bufferingPolicy: .unbounded)
    items!.append(2)
    items = nil
    #expect(weakItems == nil, "the sequence kept the array alive")
    let received = Recorder<[Int]>()
    let finished = Flag()
    let loop = Task {
      for await array in arrays { received.append(array) }
      finished.set()
    }
    #expect(await settles(timeout: .seconds(10)) { finished.isSet })
    loop.cancel()
    #expect(received.values == [[1], [1, 2]])
  }

  @Test func eventsSentInATransactionBehindABusySynchronousDelivererNeverWaitAndArriveInOrder() {
    let source = EventSource<Int>(backlogLimit: 2)
    let blocker = Blocker()
    let seen = Recorder<Int>()
    let subscription = source.observe { event in
      if event == 0 { blocker.block() }
      seen.append(event)
    }
    let deliverer = Spawned { source.send(0) }
    #expect(blocker.entered.wait())
    #expect(
      completesOnAnotherThread {
        transaction {
          for event in 1...40 { source.send(event) }
        }
        transaction {
          for event in 41...80 { source.send(event) }
        }
      }, "a send inside a transaction waited for room")
    blocker.release.open()
    #expect(deliverer.join())
    #expect(seen.wait(forCount: 81))
    #expect(seen.values == Array(0...80))
    subscription.cancel()
  }

  @Test func aSwitchDetachesTheOldTargetBeforeAQueueObserverOrAnInlineObserverReceivesTheNewOne() {
    let useSecond = Property(false)
    let first = Property(1)
    let second = Property(2)
    let chosen = useSecond.flatMapLatest { $0 ? second : first }
    let queue = DispatchQueue(label: "ui")
    let attached = Recorder<String>()
    let s1 = chosen.observe(on: .queue(queue)) { value in
      if value == 2 { attached.append("queue: first has \(first.observerCount)") }
    }
    let s2 = chosen.observe { value in
      if value == 2 { attached.append("inline: first has \(first.observerCount)") }
    }
    #expect(drain(queue))
    useSecond.value = true
    #expect(drain(queue))
    #expect(attached.values.sorted() == ["inline: first has 0", "queue: first has 0"])
    s1.cancel()
    s2.cancel()
  }

  @Test func aTransactionWritingAnArrayAndAPropertyFromAQueueHandlerIsSeenWholeByAnotherQueue() {
    let trigger = Property(0)
    let items = ArrayProperty<Int>([])
    let count = Property(0)
    let both = items.readOnly.combineLatest(count)
    let writerQueue = DispatchQueue(label: "writer")
    let readerQueue = DispatchQueue(label: "reader")
    let torn = Recorder<String>()
    let last = Monitor(-1)
    let s1 = trigger.observe(on: .queue(writerQueue)) { step in
      guard step > 0 else { return }
      transaction {
        items.append(step)
        count.value = items.count
      }
    }
    let s2 = both.observe(on: .queue(readerQueue)) { array, count in
      if array.count != count { torn.append("\(array.count) vs \(count)") }
      last.withLock { $0 = count }
    }
    for step in 1...300 { trigger.value = step }
    #expect(drain(writerQueue))
    let final = count.value
    #expect(final >= 1 && final == items.count)
    #expect(last.wait { $0 == final })
    #expect(torn.values == [])
    s1.cancel()
    s2.cancel()
  }

  /// Equatable, not Hashable: assignments take the exact minimal diff.
  struct Tag: Equatable, Sendable {
    var id: Int
  }

  @Test func concurrentAssignmentsAndMutatorsKeepInlineAndQueueReplicasChainedToTheEnd() {
    let hashable = ArrayProperty(Array(0..<40))
    let equatable = ArrayProperty((0..<40).map { Tag(id: $0) })
    let queue = DispatchQueue(label: "ui")
    let inlineInts = Monitor<[Int]>([])
    let queuedInts = Monitor<[Int]>([])
    let inlineTags = Monitor<[Tag]>([])
    let misfits = Recorder<String>()
    let s1 = hashable.observeChanges(fromEmpty: true) { changeset in
      inlineInts.withLock { array in
        if changeset.applied(to: array) != changeset.array { misfits.append("inline ints") }
        array = changeset.array
      }
    }
    let s2 = hashable.observeChanges(on: .queue(queue), fromEmpty: true) { changeset in
      queuedInts.withLock { array in
        if changeset.applied(to: array) != changeset.array { misfits.append("queued ints") }
        array = changeset.array
      }
    }
    let s3 = equatable.observeChanges(fromEmpty: true) { changeset in
      inlineTags.withLock { array in
        if changeset.applied(to: array) != changeset.array { misfits.append("inline tags") }
        array = changeset.array
      }
    }
    #expect(
      onThreads(3) { thread in
        var generator = SplitMix(seed: thread)
        for step in 0..<150 {
          switch thread {
          case 0:
            hashable.value = hashable.value.shuffled(using: &generator).dropLast(step % 3) + [step]
            equatable.value = Array(equatable.value.shuffled(using: &generator).prefix(40))
          case 1:
            transaction {
              hashable.value = Array(hashable.value.reversed())
              hashable.append(-step)
              equatable.append(Tag(id: -step))
            }
          default:
            if hashable.count > 2 { hashable.remove(at: hashable.count / 2) }
            hashable.insert(1_000 + step, at: 0)
            if equatable.count > 2 { equatable.move(from: 0, to: equatable.count - 1) }
          }
        }
      })
    let finalInts = hashable.value
    let finalTags = equatable.value
    #expect(inlineInts.wait { $0 == finalInts })
    #expect(queuedInts.wait { $0 == finalInts })
    #expect(inlineTags.wait { $0 == finalTags })
    #expect(misfits.values == [])
    for subscription in [s1, s2, s3] { subscription.cancel() }
  }

  @Test func aQueueObserverOfAnArraysCountThroughAMapNeverSeesACountTheArrayDidNotHave() {
    let items = ArrayProperty<Int>([])
    let count = items.readOnly.map { $0.count }
    let both = count.combineLatest(items.readOnly)
    let queue = DispatchQueue(label: "ui")
    let wrong = Recorder<String>()
    let last = Monitor(-1)
    let subscription = both.observe(on: .queue(queue)) { count, array in
      if count != array.count { wrong.append("\(count) vs \(array.count)") }
      last.withLock { $0 = count }
    }
    #expect(
      onThreads(2) { thread in
        for step in 0..<400 {
          if thread == 0 {
            items.append(step)
          } else if step.isMultiple(of: 2) {
            items.batch { array in
              array.append(step)
              array.append(step)
            }
          } else {
            _ = items.popLast()
          }
        }
      })
    let final = items.count
    #expect(last.wait { $0 == final })
    #expect(wrong.values == [])
    subscription.cancel()
  }

  @Test func mergedChangesOfCombinationsOnAHeldQueueThatCameBackAreNotDelivered() {
    let a = Property(1)
    let b = Property(2)
    let pair = a.combineLatest(b)
    let list = [a, b].combineLatest()
    let queue = DispatchQueue(label: "ui")
    let blocker = Blocker()
    let seen = Recorder<String>()
    let s1 = pair.observeChanges(on: .queue(queue)) { change in
      if change.newValue == (5, 2) && !blocker.entered.isOpened { blocker.block() }
      seen.append("pair \(change.oldValue)→\(change.newValue)")
    }
    let s2 = list.observeChanges(on: .queue(queue)) { change in
      seen.append("list \(change.oldValue)→\(change.newValue)")
    }
    a.value = 5
    #expect(blocker.entered.wait())
    b.value = 3
    a.value = 4
    b.value = 2
    a.value = 5  // both back to the values the handlers received
    blocker.release.open()
    #expect(drain(queue))
    #expect(seen.values.sorted() == ["list [1, 2]→[5, 2]", "pair (1, 2)→(5, 2)"])
    s1.cancel()
    s2.cancel()
  }

  // MARK: Transactions mixing arrays, events and properties

  @Test func transactionsOfArraysEventsAndPropertiesAreSeenWholeOnAnotherThreadAndOnAQueue() {
    let items = ArrayProperty<Int>([])
    let total = Property(0)
    let added = EventSource<Int>()
    let sum = items.readOnly.map { $0.reduce(0, +) }
    let check = sum.combineLatest(total)
    let queue = DispatchQueue(label: "ui")
    let torn = Recorder<String>()
    let eventsSeen = Recorder<Int>()
    let onQueue = check.observe(on: .queue(queue)) { sum, total in
      if sum != total { torn.append("queue \(sum) vs \(total)") }
    }
    let inline = check.observe { sum, total in
      if sum != total { torn.append("inline \(sum) vs \(total)") }
    }
    let eventsOnQueue = added.observe(on: .queue(queue)) { eventsSeen.append($0) }
    let stop = Flag()
    let reader = Spawned {
      while !stop.isSet {
        let (sum, total) = check.value
        if sum != total { torn.append("read \(sum) vs \(total)") }
        yieldProcessor()
      }
    }
    #expect(
      onThreads(2) { thread in
        for step in 1...200 {
          let amount = thread * 1_000 + step
          transaction {
            items.append(amount)
            added.send(amount)
            total.modify { $0 += amount }
            if step.isMultiple(of: 5) {
              try? transaction {
                items.append(1)
                total.value += 1
                added.send(-1)
                throw Failure()
              }
            }
          }
        }
      })
    stop.set()
    #expect(reader.join())
    #expect(drain(queue))
    #expect(torn.values == [])
    #expect(items.count == 400)
    #expect(eventsSeen.count == 400 && !eventsSeen.values.contains(-1))
    #expect(total.value == items.value.reduce(0, +))
    for subscription in [onQueue, inline, eventsOnQueue] { subscription.cancel() }
  }

  @Test func aTransactionSwitchingAFlatMapLatestBetweenArraysDeliversOneStateOnEveryDelivery() {
    let useSecond = Property(false)
    let first = ArrayProperty([1])
    let second = ArrayProperty([2])
    let chosen = useSecond.flatMapLatest { $0 ? second.readOnly : first.readOnly }
    let labelled = chosen.combineLatest(useSecond)
    let queue = DispatchQueue(label: "ui")
    let inline = Recorder<String>()
    let queued = Recorder<String>()
    let s1 = labelled.observe { array, isSecond in inline.append("\(isSecond) \(array)") }
    let s2 = labelled.observe(on: .queue(queue)) { array, isSecond in queued.append("\(isSecond) \(array)") }
    #expect(drain(queue))
    #expect(
      completesOnAnotherThread {
        transaction {
          first.append(10)
          useSecond.value = true
          second.append(20)
          first.removeAll()
        }
      })
    #expect(drain(queue))
    #expect(inline.values == ["false [1]", "true [2, 20]"])
    #expect(queued.values == ["false [1]", "true [2, 20]"])
    #expect(first.observerCount == 0)
    s1.cancel()
    s2.cancel()
  }

  @Test func anArrayMutatorFromAnotherThreadWaitsForATransactionThatWroteTheArrayAndLosesNothing() {
    let items = ArrayProperty([0])
    let seen = Recorder<[Int]>()
    let subscription = items.observe { seen.append($0) }
    let started = Gate()
    let appenders = Recorder<Spawned>()
    transaction {
      items.append(1)
      appenders.append(
        Spawned {
          started.open()
          items.append(2)
        })
      appenders.append(Spawned { items.batch { $0.insert(-1, at: 0) } })
      #expect(started.wait())
      for _ in 0..<200 { yieldProcessor() }
      #expect(items.value == [0, 1], "a write from another thread landed inside the transaction")
      items.append(3)
    }
    #expect(appenders.values.allSatisfy { $0.join() })
    #expect(items.value.count == 5)
    #expect(Array(items.value.drop { $0 == -1 }.prefix(3)) == [0, 1, 3])
    #expect(seen.values.first == [0])
    #expect(seen.values.dropFirst().first == [0, 1, 3])
    #expect(seen.values.last == items.value)
    subscription.cancel()
  }

  @Test func aTransactionOverArraysIsNotSeenInPartThroughAnyDerivedValueReadOnAnotherThread() {
    let useSecond = Property(false)
    let first = ArrayProperty([1])
    let second = ArrayProperty([2])
    let total = Property(3)
    let chosen = useSecond.flatMapLatest { $0 ? second.readOnly : first.readOnly }
    let sum = first.readOnly.combineLatest(second.readOnly).map { $0.reduce(0, +) + $1.reduce(0, +) }
    let check = sum.combineLatest(total)
    let counted = first.readOnly.map { $0.count }
    let inside = Gate()
    let readOutside = Gate()
    let seenOutside = Recorder<String>()
    let reader = Spawned {
      #expect(inside.wait())
      seenOutside.append("chosen \(chosen.value)")
      seenOutside.append("check \(check.value.0) \(check.value.1)")
      seenOutside.append("counted \(counted.value)")
      seenOutside.append("first \(first.value) \(first.count) \(first.isEmpty) \(first[0])")
      readOutside.open()
    }
    transaction {
      first.append(10)
      useSecond.value = true
      second.removeAll()
      total.value = 11
      #expect(chosen.value == [] && check.value == (11, 11) && counted.value == 2)
      inside.open()
      #expect(readOutside.wait())
    }
    #expect(reader.join())
    #expect(seenOutside.values == ["chosen [1]", "check 3 3", "counted 1", "first [1] 1 false 1"])
    #expect(chosen.value == [] && check.value == (11, 11) && counted.value == 2)
  }

  @Test func oneThreadsWritesToAnArrayAndThenAPropertyAreSeenInOrderOnAQueueWhileAnotherThreadDelivers() {
    let items = ArrayProperty<Int>([])
    let level = Property(0)
    let both = items.readOnly.map { $0.count }.combineLatest(level)
    let blocker = Blocker()
    let holder = items.observeChanges { changeset in
      if changeset.array == [-1] { blocker.block() }
    }
    let queue = DispatchQueue(label: "ui")
    let wrong = Recorder<String>()
    let inline = Recorder<String>()
    let s1 = both.observe(on: .queue(queue)) { count, level in
      if count < level + 1 && level > 0 { wrong.append("\(count) items at level \(level)") }
    }
    let s2 = both.observe { count, level in
      if count < level + 1 && level > 0 { inline.append("\(count) items at level \(level)") }
    }
    // Another thread delivers the array's first change and holds there.
    let deliverer = Spawned { items.append(-1) }
    #expect(blocker.entered.wait())
    #expect(
      completesOnAnotherThread {
        for step in 1...50 {
          items.append(step)  // delivered later, by the holding thread
          level.value = step  // delivered now: with the array as it is, never as it was
        }
      })
    blocker.release.open()
    #expect(deliverer.join())
    #expect(drain(queue))
    #expect(wrong.values == [])
    #expect(inline.values == [])
    for subscription in [holder, s1, s2] { subscription.cancel() }
  }

  @Test func aReplicaSubscribingOnAnotherThreadWhileATransactionRunsStartsWholeAndChains() {
    let items = ArrayProperty([1, 2])
    let count = Property(2)
    let inside = Gate()
    let replica = Monitor<[[Int]]>([])
    let subscriptions = Recorder<Subscription>()
    let subscriber = Spawned {
      #expect(inside.wait())
      subscriptions.append(
        items.observeChanges(fromEmpty: true) { changeset in
          replica.withLock { arrays in
            let before = arrays.last ?? []
            #expect(changeset.applied(to: before) == changeset.array)
            arrays.append(changeset.array)
          }
        })
    }
    transaction {
      items.append(3)
      items.remove(at: 0)
      count.value = items.count
      inside.open()
      for _ in 0..<200 { yieldProcessor() }
      items.append(4)
      count.value = items.count
    }
    #expect(subscriber.join())
    items.append(5)
    let arrays = replica.current
    #expect(
      arrays == [[1, 2], [2, 3, 4], [2, 3, 4, 5]] || arrays == [[2, 3, 4], [2, 3, 4, 5]],
      "the replica saw \(arrays)")
    for subscription in subscriptions.values { subscription.cancel() }
  }

  // MARK: Async sequences

  @Test func aLoopOverACombinationSeesOnlyWholeTransactionsAndEndsOnTheLatest() async {
    let items = ArrayProperty<Int>([])
    let count = Property(0)
    let both = items.readOnly.combineLatest(count)
    let writer = Spawned {
      for step in 1...2_000 {
        transaction {
          items.append(step)
          count.value = items.count
        }
      }
    }
    var torn: [String] = []
    var last = -1
    for await (array, count) in both {
      if array.count != count { torn.append("\(array.count) vs \(count)") }
      if count < last { torn.append("back from \(last) to \(count)") }
      last = count
      if count == 2_000 { break }
    }
    #expect(writer.join())
    #expect(torn == [])
    #expect(last == 2_000)
  }

  @Test func aLoopOverAFlatMapLatestEndsOnTheLatestTargetAfterSwitchesInTransactions() async {
    let selector = Property(0)
    let targets = (0..<3).map { Property($0 * 10_000) }
    let chosen = selector.flatMapLatest { targets[$0] }
    let paired = chosen.combineLatest(selector)
    let writer = Spawned {
      for step in 1...600 {
        transaction {
          let next = step % 3
          selector.value = next
          targets[next].value = next * 10_000 + step
        }
      }
      selector.value = 2
      targets[2].value = -1
    }
    var wrong: [String] = []
    for await (value, choice) in paired {
      if value != -1, value / 10_000 != choice { wrong.append("\(value) from \(choice)") }
      if value == -1 { break }
    }
    #expect(writer.join())
    #expect(wrong == [])
  }

  @Test func aLoopOverAMappedEventSourceReceivesEveryCommittedEventInOrderAndNoRolledBackOne() async {
    let source = EventSource<Int>()
    let mapped = source.map { $0 * 2 }
    let events = mapped.events(bufferingPolicy: .unbounded)
    let writer = Spawned {
      for step in 1...500 {
        transaction {
          source.send(step)
          try? transaction {
            source.send(-step)
            throw Failure()
          }
        }
      }
      source.send(0)
    }
    var received: [Int] = []
    for await event in events {
      if event == 0 { break }
      received.append(event / 2)
    }
    #expect(writer.join())
    #expect(received == Array(1...500))
  }

  @Test func anUnboundedLoopOverACombinationReceivesEachTransactionOnceWhole() async {
    let x = Property(0)
    let y = Property(0)
    let both = x.combineLatest(y)
    let states = both.values(bufferingPolicy: .unbounded)
    let writer = Spawned {
      for step in 1...300 {
        transaction {
          x.value = step
          y.value = -step
        }
      }
    }
    var received: [Int] = []
    var torn: [String] = []
    for await (a, b) in states {
      if a != -b { torn.append("(\(a), \(b))") }
      received.append(a)
      if a == 300 { break }
    }
    #expect(writer.join())
    #expect(torn == [])
    #expect(received == Array(0...300), "one state per transaction, each once, in order")
  }

  @Test func anUnboundedLoopOverAnArrayReceivesEveryCommittedArrayAndNoRolledBackOne() async {
    let items = ArrayProperty<Int>([])
    let arrays = items.values(bufferingPolicy: .unbounded)
    let writer = Spawned {
      for step in 1...200 {
        transaction {
          items.append(step)
          try? transaction {
            items.removeAll()
            throw Failure()
          }
        }
        try? items.batch { array in
          array.append(-step)
          throw Failure()
        }
      }
    }
    var received: [[Int]] = []
    for await array in arrays {
      received.append(array)
      if array.count == 200 { break }
    }
    #expect(writer.join())
    #expect(received == (0...200).map { Array(1...max($0, 1)).prefix($0).map { $0 } })
  }

  // MARK: Actor handlers that suspend

  actor Tally {
    var values: [Int] = []
    func add(_ value: Int) { values.append(value) }
  }

  @Test func actorEventHandlersThatHopToOtherActorsKeepOrderNeverOverlapAndTheirSendsNeverWait() async {
    let source = ActorEventSource<Int>(backlogLimit: 1)
    let tally = Tally()
    let overlaps = OverlapDetector()
    let seen = Recorder<Int>()
    let subscription = await source.observe { event in
      overlaps.enter()
      await tally.add(event)
      await MainActor.run { seen.append(event) }
      if event < 0 {
        for next in 1...30 {
          await Task.yield()
          await source.send(next)
          await tally.add(-next)
        }
      }
      overlaps.leave()
    }
    await source.send(-1)
    #expect(await settles { seen.count == 31 })
    #expect(seen.values == [-1] + Array(1...30))
    #expect(overlaps.overlapCount == 0)
    subscription.cancel()
  }

  @Test func actorPropertyHandlersThatSuspendAndWriteLockBasedSourcesKeepTransactionsWhole() async {
    let property = ActorProperty(0)
    let left = Property(0)
    let right = Property(0)
    let pair = left.combineLatest(right)
    let torn = Recorder<String>()
    let pairs = pair.observe { l, r in if l != r { torn.append("\(l) vs \(r)") } }
    let done = Number(0)
    let subscription = await property.observe { value in
      let before = left.value
      await Task.yield()
      await MainActor.run {
        transaction {
          left.value = value
          right.value = value
        }
      }
      await Task.yield()
      transaction {
        left.value = max(left.value, before)
        right.value = left.value
      }
      done.store(value)
    }
    let writers = (0..<2).map { _ in
      Spawned { for _ in 0..<300 { right.modify { _ in } } }
    }
    for value in 1...300 { await property.setValue(value) }
    #expect(await settles { done.value == 300 })
    #expect(writers.allSatisfy { $0.join() })
    #expect(left.value == right.value)
    #expect(torn.values == [])
    pairs.cancel()
    subscription.cancel()
  }

  @Test func anActorOwnerAwaitedByItsHandlersReceivesStatesInOrderEndingOnTheNewest() async {
    let property = ActorProperty(0)
    let tally = Tally()
    let handled = Recorder<Int>()
    let subscription = await property.observe(with: tally) { tally, value in
      await Task.yield()
      await tally.add(value)
      handled.append(value)
    }
    await withTaskGroup(of: Void.self) { group in
      for writer in 0..<3 {
        group.addTask { for step in 0..<200 { await property.modify { $0 = max($0, step * 3 + writer) } } }
      }
    }
    let final = await property.value
    #expect(await settles { handled.values.last == final })
    let values = await tally.values
    #expect(values == values.sorted() && Set(values).count == values.count)
    subscription.cancel()
  }

  @Test func anActorKeyPathObserverReceivesItsFirstPartOnceWhenWritesLeaveThePartEqual() async {
    let pair = ActorProperty(Pair(part: 1, other: 0))
    let seen = Recorder<Int>()
    let subscription = await pair.observe(\.part) { part in
      await Task.yield()
      seen.append(part)
    }
    for other in 1...50 { await pair.modify { $0.other = other } }
    await pair.modify { $0.part = 2 }
    #expect(await settles { seen.values.last == 2 })
    // The first part may have merged into the newest, as a state observer behind does.
    #expect(seen.values == [1, 2] || seen.values == [2])
    subscription.cancel()
  }

  @Test func actorPropertyObserversArrivingWhileATaskWritesOnlyMoveForwardAndEndOnTheValue() async {
    let property = ActorProperty(0)
    let recorders = (0..<8).map { _ in Recorder<Int>() }
    let writer = Task {
      for value in 1...400 { await property.setValue(value) }
    }
    var subscriptions: [Subscription] = []
    for recorder in recorders {
      subscriptions.append(
        await property.observe { value in
          if value.isMultiple(of: 3) { await Task.yield() }
          recorder.append(value)
        })
      await Task.yield()
    }
    await writer.value
    for recorder in recorders {
      #expect(await settles { recorder.values.last == 400 })
      let values = recorder.values
      #expect(values == values.sorted() && Set(values).count == values.count, "\(values.prefix(10))")
    }
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test func actorPropertyHandlersWritingTheirOwnPropertyAfterSuspendingSeeChangesChainInOrder() async {
    let property = ActorProperty(0)
    let seen = Recorder<Change<Int>>()
    let subscription = await property.observeChanges { change in
      seen.append(change)
      await Task.yield()
      if change.newValue < 100 {
        await MainActor.run {}
        await property.modify { $0 = max($0, change.newValue + 1) }
      }
    }
    await property.setValue(1)
    #expect(await settles { seen.values.last?.newValue == 100 })
    let changes = seen.values
    #expect(changes.first?.oldValue == 0)
    for (before, after) in zip(changes, changes.dropFirst()) {
      #expect(after.oldValue == before.newValue && after.newValue > after.oldValue)
    }
    subscription.cancel()
  }

  // MARK: Bad input inside a transaction

  @Test func anOutOfRangeIndexInsideATransactionStopsWithAMessageBeforeAnythingIsDelivered() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let items = ArrayProperty([1, 2, 3])
      let name = Property("a")
      let events = EventSource<Int>()
      let s1 = items.observeChanges { _ in _ = write(2, "delivered\n", 10) }
      let s2 = name.observeChanges { _ in _ = write(2, "delivered\n", 10) }
      let s3 = events.observe { _ in _ = write(2, "delivered\n", 10) }
      transaction {
        name.value = "b"
        events.send(1)
        items.append(4)
        items.remove(at: 7)
      }
      for subscription in [s1, s2, s3] { subscription.cancel() }
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: ArrayProperty.remove(at: 7): index out of range (count 4)"))
    #expect(!text.contains("delivered"))
  }

  @Test func anOutOfRangeRangeInABatchInsideATransactionStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let items = ArrayProperty([1, 2, 3])
      transaction {
        items.append(4)
        items.batch { array in
          array.removeFirst()
          array.replaceSubrange(2..<9, with: [0])
        }
      }
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: ArrayProperty.batch: replaceSubrange(2..<9, with:): range out of bounds (count 3)"))
  }

  @Test func removingFirstFromAnArrayEmptiedEarlierInTheTransactionNamesItsCountThere() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let items = ArrayProperty([1])
      transaction {
        items.removeAll()
        items.removeFirst()
      }
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(
      text.contains("Evented: ArrayProperty.removeFirst(): can't remove from an empty array (count 0)"), "\(text)")
  }

  @Test func readingPastTheEndOfAnArrayGrownInTheTransactionNamesItsCountThere() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let items = ArrayProperty([1, 2, 3])
      transaction {
        items.append(contentsOf: [4, 5])
        _ = items[4]
        items.move(from: 0, to: 5)
      }
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: ArrayProperty.move(from: 0, to: 5): index out of range (count 5)"), "\(text)")
  }

  @Test func anOutOfRangeIndexInANestedTransactionStopsWithItsCountThere() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let items = ArrayProperty([1, 2, 3])
      transaction {
        items.append(4)
        try? transaction {
          items.removeAll()
          throw Failure()
        }
        items.insert(0, at: 6)
      }
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: ArrayProperty.insert(_:at: 6): index out of range (count 4)"), "\(text)")
  }

  @Test func anArrayAssignmentFromAnotherThreadWaitsForATransactionThatReadTheArray() {
    let items = ArrayProperty(Array(0..<100))
    let total = Property(0)
    let assigned = Gate()
    let writers = Recorder<Spawned>()
    transaction {
      let first = items.value.reduce(0, +)
      writers.append(
        Spawned {
          assigned.open()
          items.value = Array((0..<100).reversed()) + [1_000]
        })
      #expect(assigned.wait())
      for _ in 0..<200 { yieldProcessor() }
      #expect(items.count == 100 && items.value.reduce(0, +) == first, "the assignment landed inside the transaction")
      total.value = first
    }
    #expect(writers.values.allSatisfy { $0.join() })
    #expect(items.value == Array((0..<100).reversed()) + [1_000])
    #expect(total.value == (0..<100).reduce(0, +))
  }

  // MARK: Waits that would deadlock stop with a message

  /// Runs `crossing` in a child process that reports a hang as a success: the
  /// expectation of a failure with the message then fails instead of waiting forever.
  @Test func aTransactionAndABatchThatWaitForEachOtherStopWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let watchdog = Thread {
        Thread.sleep(forTimeInterval: 20)
        _ = write(2, "hung\n", 5)
        exit(0)
      }
      watchdog.start()
      let name = Property(0)
      let items = ArrayProperty([0])
      let written = DispatchSemaphore(value: 0)
      let inBatch = DispatchSemaphore(value: 0)
      let batcher = Spawned {
        written.wait()
        items.batch { array in
          array.append(1)
          inBatch.signal()
          name.value = 1  // waits for the transaction, which waits for this batch
        }
      }
      transaction {
        name.value = 2
        written.signal()
        inBatch.wait()
        items.append(3)
      }
      batcher.join()
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: a transaction and a locked section wait for each other"), "\(text)")
    #expect(!text.contains("hung"))
  }

  @Test func aTransactionAndABatchThatWaitsForWhatItReadStopWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let watchdog = Thread {
        Thread.sleep(forTimeInterval: 20)
        _ = write(2, "hung\n", 5)
        exit(0)
      }
      watchdog.start()
      let first = ArrayProperty([0])
      let second = ArrayProperty([0])
      let read = DispatchSemaphore(value: 0)
      let inBatch = DispatchSemaphore(value: 0)
      let batcher = Spawned {
        read.wait()
        second.batch { array in
          array.append(1)
          inBatch.signal()
          first.append(1)  // waits for the transaction, which read `first`
        }
      }
      transaction {
        _ = first.count
        read.signal()
        inBatch.wait()
        second.append(3)
      }
      batcher.join()
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: a transaction and a locked section wait for each other"), "\(text)")
    #expect(text.contains("which it read"), "\(text)")
    #expect(!text.contains("hung"))
  }

  @Test func readingAPropertyInsideItsOwnModifyInsideATransactionStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let name = Property(0)
      transaction {
        name.value = 1
        name.modify { value in value = name.value + 1 }
      }
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: a source was used from inside its own locked section"), "\(text)")
  }

  @Test func usingAnArrayInsideItsOwnBatchInsideATransactionStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let items = ArrayProperty([1])
      transaction {
        items.append(2)
        items.batch { array in array.append(items.count) }
      }
    }
    let text = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(text.contains("Evented: a source was used from inside its own locked section"), "\(text)")
  }

  // MARK: The main queue

  @Test func transactionsOfAnArrayAndAPropertyAreSeenWholeOnTheMainQueueAndItEndsOnValue() async {
    let items = ArrayProperty<Int>([])
    let count = Property(0)
    let both = items.readOnly.combineLatest(count)
    let torn = Recorder<String>()
    let last = Recorder<Int>()
    let subscription = both.observe(on: .main) { array, count in
      if array.count != count { torn.append("\(array.count) vs \(count)") }
      last.append(count)
    }
    #expect(
      completesOnAnotherThread {
        for step in 1...500 {
          transaction {
            items.append(step)
            count.value = items.count
          }
        }
      })
    #expect(await settles { last.values.last == 500 })
    #expect(torn.values == [])
    #expect(last.values == last.values.sorted())
    subscription.cancel()
  }
}
