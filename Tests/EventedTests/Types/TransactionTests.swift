import Synchronization
import Testing

@testable import Evented

/// `transaction { }`: writes to several sources, seen whole by every derived value.
@Suite struct TransactionTests {
  @Test func transactionIsSeenWholeByACombineLatestObserver() {
    let x = Property(0)
    let y = Property(0)
    let seen = Recorder<[Int]>()
    let subscription = x.combineLatest(y).observe { seen.append([$0.0, $0.1]) }
    transaction {
      x.value = 1
      y.value = 1
    }
    transaction {
      x.value = 2
      y.value = 2
    }
    #expect(seen.values == [[0, 0], [1, 1], [2, 2]])
    subscription.cancel()
  }

  @Test func transactionWritesAreReadAtOnceByTheWritingThreadAlsoThroughDerivedValues() {
    let x = Property(0)
    let y = Property(0)
    let pair = x.combineLatest(y)
    let subscription = pair.observe { _ in }
    transaction {
      x.value = 1
      #expect(x.value == 1)
      #expect(pair.value == (1, 0))
      y.modify { $0 += 1 }
      #expect(pair.value == (1, 1))
    }
    #expect(pair.value == (1, 1))
    subscription.cancel()
  }

  @Test func transactionDeliversEachSourceInCommitOrderAfterTheClosureReturns() {
    let x = Property(0)
    let events = EventSource<String>()
    let seen = Recorder<String>()
    let a = x.observe { seen.append("x\($0)") }
    let b = events.observe { seen.append($0) }
    transaction {
      x.value = 1
      events.send("sent")
      x.value = 2
      seen.append("closure ends")
    }
    // One commit of `x`, with its final value, then the event: in the order of their
    // first writes.
    #expect(seen.values == ["x0", "closure ends", "x2", "sent"])
    a.cancel()
    b.cancel()
  }

  @Test func transactionWritingOneSourceTwiceDeliversOnlyTheFinalStateToDerivedValues() {
    let x = Property(0)
    let doubled = x.map { $0 * 2 }
    let derived = Recorder<Int>()
    let direct = Recorder<Int>()
    let a = doubled.observe { derived.append($0) }
    let b = x.observe { direct.append($0) }
    transaction {
      x.value = 1
      x.value = 2
    }
    #expect(derived.values == [0, 4])
    #expect(direct.values == [0, 2])  // one commit per source, with its final value
    a.cancel()
    b.cancel()
  }

  @Test func transactionWritingFortySourcesTwiceRefreshesEachDerivedValueOnce() {
    // More sources than a transaction keeps in its short list, each written twice.
    let sources = (0..<40).map { Property($0 * 0) }
    let maps = sources.map { $0.map { $0 + 1 } }
    let ends = sources[0].combineLatest(sources[39])
    let seenMaps = Recorder<[Int]>()
    let seenEnds = Recorder<[Int]>()
    var subscriptions = maps.enumerated().map { index, map in map.observe { seenMaps.append([index, $0]) } }
    subscriptions.append(ends.observe { seenEnds.append([$0.0, $0.1]) })
    transaction {
      for (index, source) in sources.enumerated() { source.value = index }
      for (index, source) in sources.enumerated() { source.value = index * 10 }
    }
    // Each map: its current value, then one update (none for the first, whose final
    // value equals its initial one).
    for index in 0..<40 {
      let expected = index == 0 ? [1] : [1, index * 10 + 1]
      #expect(seenMaps.values.filter { $0[0] == index }.map { $0[1] } == expected)
    }
    #expect(seenEnds.values == [[0, 0], [0, 390]])
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test func transactionADiamondAndAChainSeeItWhole() {
    let a = Property(1)
    let b = Property(1)
    let diamond = a.map { $0 * 10 }.combineLatest(a.map { $0 + 1 }).combineLatest(b.map { $0 })
    let seen = Recorder<[Int]>()
    let subscription = diamond.observe { seen.append([$0.0.0, $0.0.1, $0.1]) }
    transaction {
      a.value = 2
      b.value = 2
      a.value = 3
    }
    #expect(seen.values == [[10, 2, 1], [30, 4, 2]])
    subscription.cancel()
  }

  @Test func transactionsNestAndTheOutermostCommits() {
    let x = Property(0)
    let y = Property(0)
    let seen = Recorder<[Int]>()
    let subscription = x.combineLatest(y).observe { seen.append([$0.0, $0.1]) }
    transaction {
      x.value = 1
      transaction { y.value = 1 }
      #expect(seen.values == [[0, 0]])  // nothing delivered before the outermost ends
    }
    #expect(seen.values == [[0, 0], [1, 1]])
    subscription.cancel()
  }

  struct Failure: Error {}

  @Test func transactionThatThrowsCommitsNothingAndDeliversNothing() {
    let x = Property(0)
    let y = Property(0)
    let seen = Recorder<[Int]>()
    let subscription = x.combineLatest(y).observe { seen.append([$0.0, $0.1]) }
    #expect(throws: Failure.self) {
      try transaction {
        x.value = 1
        y.value = 1
        throw Failure()
      }
    }
    #expect(x.value == 0 && y.value == 0)
    #expect(seen.values == [[0, 0]])
    // The thread is out of the transaction: a plain write is delivered at once again.
    x.value = 2
    #expect(seen.values == [[0, 0], [2, 0]])
    subscription.cancel()
  }

  @Test func transactionInsideAHandlerIsDeliveredAfterTheHandlerReturns() {
    let trigger = EventSource<Int>()
    let x = Property(0)
    let y = Property(0)
    let seen = Recorder<[Int]>()
    let pairs = x.combineLatest(y).observe { seen.append([$0.0, $0.1]) }
    let handler = trigger.observe { value in
      transaction {
        x.value = value
        y.value = value
      }
    }
    trigger.send(5)
    trigger.send(6)
    #expect(seen.values == [[0, 0], [5, 5], [6, 6]])
    pairs.cancel()
    handler.cancel()
  }

  @Test func transactionIsNeverSeenInPartByObserversOrReadersOnOtherThreads() {
    let x = Property(0)
    let y = Property(0)
    let pair = x.combineLatest(y)
    let sum = x.map { $0 }.combineLatest(y.map { -$0 })
    let torn = Atomic<Int>(0)
    let last = Atomic<Int>(-1)
    let a = pair.observe { value in
      if value.0 != value.1 { torn.add(1, ordering: .relaxed) }
      last.store(value.0, ordering: .releasing)
    }
    let b = sum.observe { value in if value.0 + value.1 != 0 { torn.add(1, ordering: .relaxed) } }
    let rounds = 1_000
    let (finished, tornReads) = whileTransactionsRun(
      rounds: rounds, first: { x.value = $0 }, second: { y.value = $0 },
      late: { x.observe { _ in work(microseconds: 5) } },
      read: { pair.value })
    #expect(finished)
    #expect(tornReads == 0)
    #expect(torn.load(ordering: .relaxed) == 0)
    #expect(last.load(ordering: .acquiring) == rounds)
    a.cancel()
    b.cancel()
  }

  /// A read made inside a transaction sees the transaction's writes, so the state it
  /// computes may never hold for other threads: here `(y: 0, x: 1)`. Remembered, a
  /// thread that read `y`'s version before the transaction ended and `x`'s after would
  /// have found it, and returned part of the transaction.
  @Test func transactionReadsInsideItAreNotRememberedForOtherThreads() {
    let x = Property(0)
    let y = Property(0)
    let pair = y.combineLatest(x)  // roots: y, then x
    let memoVersions = { pair.derived!.memo.withLock { $0.values.isEmpty ? nil : $0.reads.versions } }
    transaction {
      x.value = 1
      #expect(pair.value == (0, 1))  // the writing thread reads its own write
      y.value = 1
    }
    // x and y are written together, so every state other threads see has as many
    // commits of one as of the other.
    let remembered = memoVersions() ?? []
    #expect(Set(remembered).count <= 1, "the memo remembers versions \(remembered), a state only the transaction saw")
    #expect(pair.value == (1, 1))
  }

  /// An observer that arrives inside a transaction, after one of its two writes, must
  /// not make the derived value commit the state the transaction's thread sees then:
  /// neither it nor the observers already there receive `(0, 1)`.
  @Test func transactionWithAnObserverArrivingInsideItIsSeenWholeByEveryObserver() {
    let x = Property(0)
    let y = Property(0)
    let pair = y.combineLatest(x)
    let before = Recorder<[Int]>()
    let arriving = Recorder<[Int]>()
    let first = pair.observe { before.append([$0.0, $0.1]) }
    var second: Subscription?
    transaction {
      x.value = 1
      second = pair.observe { arriving.append([$0.0, $0.1]) }
      y.value = 1
    }
    #expect(before.values == [[0, 0], [1, 1]])
    #expect(arriving.values == [[0, 0], [1, 1]])
    let unobserved = y.combineLatest(x)  // linked by its first observer, inside the transaction
    let late = Recorder<[Int]>()
    var third: Subscription?
    transaction {
      x.value = 2
      third = unobserved.observe { late.append([$0.0, $0.1]) }
      y.value = 2
    }
    #expect(late.values.allSatisfy { $0[0] == $0[1] }, "\(late.values)")
    #expect(late.values.last == [2, 2])
    first.cancel()
    second?.cancel()
    third?.cancel()
  }

  /// An observer that arrives inside a transaction first receives the state other
  /// threads see then (the one before the transaction), not a state the derived value
  /// delivered long before, when nobody observed it: `(5, 5)`, never `(0, 0)`.
  @Test func transactionWithAnObserverArrivingInsideItStartsFromTheStateBeforeIt() {
    let x = Property(0)
    let y = Property(0)
    let pair = y.combineLatest(x)
    #expect(pair.value == (0, 0))
    x.value = 5
    y.value = 5
    let seen = Recorder<[Int]>()
    var subscription: Subscription?
    transaction {
      x.value = 6
      subscription = pair.observe { seen.append([$0.0, $0.1]) }
      y.value = 6
    }
    #expect(seen.values == [[5, 5], [6, 6]])
    let mapped = x.map { $0 * 10 }
    #expect(mapped.value == 60)
    x.value = 7
    let single = Recorder<Int>()
    var other: Subscription?
    transaction {
      x.value = 8
      other = mapped.observe { single.append($0) }
    }
    #expect(single.values == [70, 80])
    subscription?.cancel()
    other?.cancel()
  }

  /// An observer that subscribes inside a transaction, on its thread, after the
  /// transaction wrote the source, first receives the state from before the transaction
  /// (the one every other thread still reads), then the transaction's commit, once:
  /// properties, arrays (whole and as changesets) and derived values alike.
  @Test func observerArrivingInsideATransactionAfterItsWriteReceivesTheCommitOnce() {
    let x = Property(0)
    let items = ArrayProperty([1])
    let values = Recorder<Int>()
    let changes = Recorder<[Int]>()
    let arrays = Recorder<[Int]>()
    let changesets = Recorder<ArrayChangeset<Int>>()
    let mapped = Recorder<Int>()
    let tenfold = x.map { $0 * 10 }
    var subscriptions: [Subscription] = []
    transaction {
      x.value = 1
      items.append(2)
      subscriptions.append(x.observe { values.append($0) })
      subscriptions.append(x.observeChanges { changes.append([$0.oldValue, $0.newValue]) })
      subscriptions.append(items.observe { arrays.append($0) })
      subscriptions.append(items.observeChanges(fromEmpty: true) { changesets.append($0) })
      subscriptions.append(tenfold.observe { mapped.append($0) })
      #expect(x.value == 1 && items.value == [1, 2] && tenfold.value == 10)  // its own writes
    }
    #expect(values.values == [0, 1])
    #expect(changes.values == [[0, 1]])
    #expect(arrays.values == [[1], [1, 2]])
    #expect(mapped.values == [0, 10])
    let replayed = changesets.values
    #expect(replayed.map(\.array) == [[1], [1, 2]])
    if replayed.map(\.array) == [[1], [1, 2]] {
      #expect(replayed[0].applied(to: []) == [1] && replayed[1].applied(to: [1]) == [1, 2])
    }
    for subscription in subscriptions { subscription.cancel() }
  }

  /// A derived value made inside a transaction, after part of its writes, starts from
  /// the state other threads see: its observers never receive the part, and another
  /// thread never reads it back from what the value remembers.
  @Test func transactionWithADerivedValueMadeInsideItIsSeenWholeByItsObservers() {
    let x = Property(0)
    let y = Property(0)
    let seen = Recorder<[Int]>()
    var subscription: Subscription?
    var made: ReadOnlyProperty<(Int, Int)>?
    transaction {
      x.value = 1
      let pair = y.combineLatest(x)
      #expect(pair.value == (0, 1))  // the writing thread reads its own write
      // x and y are written together, so every state other threads see has as many
      // commits of one as of the other.
      let remembered = pair.derived?.memo.withLock { $0.values.isEmpty ? nil : $0.reads.versions } ?? []
      #expect(Set(remembered).count <= 1, "the memo remembers versions \(remembered), a state only this thread saw")
      subscription = pair.observe { seen.append([$0.0, $0.1]) }
      made = pair
      y.value = 1
    }
    let values = seen.values
    #expect(values.allSatisfy { $0[0] == $0[1] }, "\(values)")
    #expect(values.last == [1, 1])
    #expect(made.map { $0.value == (1, 1) } == true)
    subscription?.cancel()
  }

  @Test func transactionWithAFlatMapLatestMadeInsideItIsSeenWholeByItsObservers() {
    let a = Property(0)
    let b = Property(0)
    let pair = a.combineLatest(b)
    let selector = Property(0)
    let here = Recorder<[Int]>()
    let elsewhere = Recorder<[Int]>()
    let box = SubscriptionBox()
    var subscription: Subscription?
    transaction {
      a.value = 1
      let chain = selector.flatMapLatest { _ in pair }
      subscription = chain.observe { here.append([$0.0, $0.1]) }
      #expect(completesOnAnotherThread { box.subscription = chain.observe { elsewhere.append([$0.0, $0.1]) } })
      b.value = 1
    }
    #expect(elsewhere.wait { $0.last == [1, 1] })
    #expect(here.values.allSatisfy { $0[0] == $0[1] }, "this thread's observer: \(here.values)")
    #expect(elsewhere.values.allSatisfy { $0[0] == $0[1] }, "another thread's observer: \(elsewhere.values)")
    #expect(here.values.last == [1, 1])
    subscription?.cancel()
    box.cancel()
  }

  /// A transaction whose array change commits nothing (a `popLast` of an empty array,
  /// a batch that throws) makes no commit a transaction's: the next ones, made outside
  /// it by a thread with nobody else delivering, each reach the array's view as a state.
  @Test func transactionThatCommitsNothingToAnArrayLeavesItsLaterCommitsStatesOfTheirOwn() {
    struct Stop: Error {}
    let attempts: [(ArrayProperty<Int>) -> Void] = [
      { items in transaction { _ = items.popLast() } },
      { items in
        transaction {
          _ = try? items.batch { (array: inout ArrayProperty<Int>.Batch) throws(Stop) in
            array.append(9)
            throw Stop()
          }
        }
      },
    ]
    for attempt in attempts {
      let items = ArrayProperty<Int>([])
      let seen = Recorder<[Int]>()
      let subscription = items.readOnly.observe { seen.append($0) }
      attempt(items)
      let trigger = Property(0)
      let writer = trigger.observe { value in
        guard value == 1 else { return }
        items.append(1)
        items.append(2)
      }
      trigger.value = 1
      #expect(seen.values == [[], [1], [1, 2]])
      subscription.cancel()
      writer.cancel()
    }
  }

  /// A changeset committed inside a transaction is equal to, and hashes as, the same
  /// changes made outside one: that it was made there is not part of its value.
  @Test func transactionChangesetEqualsTheSameChangesMadeOutsideOne() {
    let items = ArrayProperty<Int>([])
    let log = Recorder<ArrayChangeset<Int>>()
    let subscription = items.observeChanges { log.append($0) }
    transaction { items.append(1) }
    let expected = ArrayChangeset(changes: [.insert(index: 0, element: 1)], array: [1])
    #expect(log.values == [expected])
    #expect(Set(log.values + [expected]).count == 1)
    subscription.cancel()
  }

  @Test func transactionWritingAnArrayAndAPropertyIsSeenWholeByADerivedObserver() {
    let items = ArrayProperty<Int>([])
    let count = Property(0)
    let seen = Recorder<[Int]>()
    let subscription = items.readOnly.map(\.count).combineLatest(count).observe { seen.append([$0.0, $0.1]) }
    transaction {
      items.append(1)
      count.value = 1
    }
    transaction {
      items.value = [1, 2]
      items.insert(0, at: 0)
      count.value = 3
    }
    #expect(seen.values == [[0, 0], [1, 1], [3, 3]])
    subscription.cancel()
  }

  @Test func transactionWritingAnArrayIsNeverSeenInPartOnOtherThreads() {
    let items = ArrayProperty<Int>([])
    let count = Property(0)
    let pair = items.readOnly.map(\.count).combineLatest(count)
    let torn = Atomic<Int>(0)
    let last = Atomic<Int>(-1)
    let subscription = pair.observe { value in
      if value.0 != value.1 { torn.add(1, ordering: .relaxed) }
      last.store(value.1, ordering: .releasing)
    }
    let rounds = 1_000
    let (finished, tornReads) = whileTransactionsRun(
      rounds: rounds, first: { items.append($0) }, second: { count.value = $0 },
      late: { items.observe { _ in work(microseconds: 5) } },
      read: { pair.value })
    #expect(finished)
    #expect(tornReads == 0)
    #expect(torn.load(ordering: .relaxed) == 0)
    #expect(last.load(ordering: .acquiring) == rounds)
    subscription.cancel()
  }
}

/// Runs `rounds` transactions on one thread, each `first(round)`, a pause that widens the
/// window in which only the first write is made, then `second(round)`. Meanwhile one
/// thread keeps making and cancelling `late` subscriptions (subscribing delivers the
/// replay on that thread, so the writer's commits are delivered there, late, while the
/// writer is in its next transaction), and two threads keep calling `read`, which
/// returns a pair that is whole when its two sides are equal.
///
/// - Returns: Whether every thread finished, and how many reads found a pair that was
///   not whole.
private func whileTransactionsRun(
  rounds: Int, first: @escaping @Sendable (Int) -> Void, second: @escaping @Sendable (Int) -> Void,
  late: @escaping @Sendable () -> Subscription, read: @escaping @Sendable () -> (Int, Int)
) -> (finished: Bool, tornReads: Int) {
  let writing = Atomic<Bool>(true)
  let torn = Atomic<Int>(0)
  // The readers spin while the writer works, each yielding after every read so that
  // the writer is not starved; the timeout is long because the whole suite runs at once
  // on two cores (only a deadlock reaches it).
  let finished = onThreads(4, timeout: .seconds(60)) { index in
    switch index {
    case 0:
      for round in 1...rounds {
        transaction {
          first(round)
          work(microseconds: 5)
          second(round)
        }
      }
      writing.store(false, ordering: .relaxed)
    case 1:
      while writing.load(ordering: .relaxed) {
        late().cancel()
        yieldProcessor()
      }
    default:
      while writing.load(ordering: .relaxed) {
        let pair = read()
        if pair.0 != pair.1 { torn.add(1, ordering: .relaxed) }
        yieldProcessor()
      }
    }
  }
  return (finished, torn.load(ordering: .relaxed))
}
