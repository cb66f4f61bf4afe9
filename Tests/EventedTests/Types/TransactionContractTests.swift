import Observation
import Synchronization
import Testing

@testable import Evented

/// The transaction contract: atomic for every reader, one commit per source,
/// serializable against other writers, rolled back on a throw.
@Suite struct TransactionContractTests {
  struct Failure: Error {}

  @Test func transactionsOfTwoThreadsOnTheSameSourcesAreNeverSeenInPart() {
    let a = Property(0)
    let b = Property(0)
    let pair = a.combineLatest(b)
    let torn = Atomic<Int>(0)
    let delivered = Recorder<Int>()
    let subscription = pair.observe { value in
      if value.0 != value.1 { torn.add(1, ordering: .relaxed) }
      delivered.append(value.0)
    }
    let rounds = 400
    let writing = Atomic<Int>(2)
    let finished = onThreads(4) { index in
      switch index {
      case 0, 1:
        for _ in 0..<rounds {
          transaction {
            a.value += 1
            yieldProcessor()
            b.value += 1
          }
        }
        writing.subtract(1, ordering: .releasing)
      default:
        while writing.load(ordering: .acquiring) > 0 {
          // `a` is written first: a later read of `b` never finds it behind.
          let first = a.value
          let second = b.value
          if second < first { torn.add(1, ordering: .relaxed) }
          let whole = pair.value
          if whole.0 != whole.1 { torn.add(1, ordering: .relaxed) }
          yieldProcessor()
        }
      }
    }
    #expect(finished)
    #expect(torn.load(ordering: .relaxed) == 0)
    #expect(a.value == 2 * rounds && b.value == 2 * rounds)
    #expect(delivered.wait { $0.last == 2 * rounds })
    subscription.cancel()
  }

  @Test func modifyFromAnotherThreadWaitsForTheTransactionAndLosesNothing() {
    let counter = Property(0)
    let changes = Recorder<[Int]>()
    let subscription = counter.observeChanges { changes.append([$0.oldValue, $0.newValue]) }
    let wrote = Gate()
    let release = Gate()
    let modifying = Gate()
    let owner = Spawned {
      transaction {
        counter.value += 1
        wrote.open()
        #expect(release.wait())
        counter.value += 10
      }
    }
    #expect(wrote.wait())
    let other = Spawned {
      #expect(counter.value == 0)  // the open transaction's write is not seen
      modifying.open()
      counter.modify { $0 += 100 }
    }
    #expect(modifying.wait())
    release.open()
    #expect(owner.join() && other.join())
    #expect(counter.value == 111)
    #expect(changes.wait { $0.count == 2 })
    #expect(changes.values == [[0, 11], [11, 111]])
    subscription.cancel()
  }

  @Test func modifyAndTransactionsFromSeveralThreadsAddUp() {
    let counter = Property(0)
    let other = Property(0)
    let rounds = 500
    let finished = onThreads(4) { index in
      for _ in 0..<rounds {
        switch index {
        case 0, 1:
          transaction {
            counter.value += 1
            other.modify { $0 += 1 }
            counter.modify { $0 += 1 }
          }
        default:
          counter.modify { $0 += 1 }
          other.value += 1
        }
      }
    }
    #expect(finished)
    #expect(counter.value == 2 * rounds * 2 + 2 * rounds)
    #expect(other.value == 4 * rounds)
  }

  @Test func throwingTransactionLeavesNoTrace() {
    let x = Property(0)
    let items = ArrayProperty([1, 2])
    let events = EventSource<String>()
    let seen = Recorder<String>()
    let s1 = x.observe { seen.append("x\($0)") }
    let s2 = items.observeChanges { seen.append("items \($0.array)") }
    let s3 = events.observe { seen.append($0) }
    let s4 = x.map { $0 * 2 }.observe { seen.append("doubled \($0)") }
    let inside = Gate()
    let readOutside = Gate()
    let outside = Spawned {
      #expect(inside.wait())
      #expect(x.value == 0)
      #expect(items.value == [1, 2] && items.count == 2 && items[0] == 1)
      readOutside.open()
    }
    #expect(throws: Failure.self) {
      try transaction {
        x.value = 1
        items.append(3)
        items[0] = 9
        items.value = [7]
        events.send("sent")
        inside.open()
        #expect(readOutside.wait())
        throw Failure()
      }
    }
    #expect(outside.join())
    #expect(x.value == 0)
    #expect(items.value == [1, 2])
    #expect(seen.values == ["x0", "doubled 0"])
    // Later writes commit as usual.
    x.value = 2
    items.append(3)
    #expect(seen.values == ["x0", "doubled 0", "x2", "doubled 4", "items [1, 2, 3]"])
    for subscription in [s1, s2, s3, s4] { subscription.cancel() }
  }

  @Test func nestedThrowDiscardsOnlyItsOwnWrites() {
    let x = Property(0)
    let y = Property(0)
    let items = ArrayProperty<Int>([])
    let events = EventSource<String>()
    let seen = Recorder<String>()
    let s1 = x.observeChanges { seen.append("x \($0.oldValue)→\($0.newValue)") }
    let s2 = y.observeChanges { seen.append("y \($0.oldValue)→\($0.newValue)") }
    let s3 = items.observeChanges { seen.append("items \($0.array)") }
    let s4 = events.observe { seen.append($0) }
    transaction {
      x.value = 1
      items.append(1)
      events.send("outer")
      #expect(throws: Failure.self) {
        try transaction {
          x.value = 2
          y.value = 2
          items.append(2)
          events.send("inner")
          #expect(x.value == 2 && items.value == [1, 2])
          throw Failure()
        }
      }
      #expect(x.value == 1 && y.value == 0 && items.value == [1])
      x.value += 10
    }
    #expect(x.value == 11 && y.value == 0 && items.value == [1])
    #expect(seen.values == ["x 0→11", "items [1]", "outer"])
    for subscription in [s1, s2, s3, s4] { subscription.cancel() }
  }

  @Test func transactionCommitsOncePerSource() {
    let x = Property(0)
    let y = Property(0)
    let items = ArrayProperty([5])
    let events = EventSource<String>()
    let changes = Recorder<[Int]>()
    let changesets = Recorder<ArrayChangeset<Int>>()
    let sent = Recorder<String>()
    let pairs = Recorder<[Int]>()
    let s1 = x.observeChanges { changes.append([$0.oldValue, $0.newValue]) }
    let s2 = items.observeChanges { changesets.append($0) }
    let s3 = events.observe { sent.append($0) }
    let s4 = x.combineLatest(y).observe { pairs.append([$0.0, $0.1]) }
    transaction {
      x.value = 1
      y.value = 1
      items.append(6)
      events.send("a")
      x.value = 2
      items.remove(at: 0)
      items.batch { $0.append(7) }
      events.send("b")
      x.modify { $0 += 1 }
    }
    #expect(changes.values == [[0, 3]])
    #expect(changesets.values.count == 1)
    #expect(changesets.values.first?.array == [6, 7])
    #expect(changesets.values.first?.applied(to: [5]) == [6, 7])
    #expect(sent.values == ["a", "b"])
    #expect(pairs.values == [[0, 0], [3, 1]])
    for subscription in [s1, s2, s3, s4] { subscription.cancel() }
  }

  @Test func transactionThatEndsWhereItBeganCommitsNothing() {
    let x = Property(0)
    let seen = Recorder<Int>()
    let subscription = x.map { $0 }.observe { seen.append($0) }
    transaction {
      x.value = 1
      x.value = 0
    }
    x.value = 2
    #expect(seen.values == [0, 2])
    subscription.cancel()
  }

  @Test func transactionsHaveNoWriteSkew() {
    let a = Property(0)
    let b = Property(0)
    for _ in 0..<200 {
      a.value = 0
      b.value = 0
      let finished = onThreads(2) { index in
        transaction {
          if a.value + b.value == 0 {
            yieldProcessor()
            if index == 0 { a.value = 1 } else { b.value = 1 }
          }
        }
      }
      #expect(finished)
      #expect(a.value + b.value == 1)
    }
  }

  /// A transaction reads three sources (one through a derived value), and another
  /// thread writes one of them, in each way a plain writer can, between the
  /// transaction's two reads: the write waits for the transaction, which reads the same
  /// state twice.
  @Test func plainWriteToASourceATransactionReadWaitsForIt() {
    let a = Property(0)
    let b = Property(0)
    let c = Property(0)
    let doubled = c.map { $0 * 2 }
    let items = ArrayProperty([0])
    let changed = Recorder<Int>()
    #expect(doubled.value == 0)  // remembered: a later read only checks the version
    for round in 1...40 {
      let read = Gate()
      let writing = Gate()
      let owner = Spawned {
        transaction {
          let first = [b.value, items.count, doubled.value]
          read.open()
          #expect(writing.wait())
          // Room for a write that does not wait to land.
          for _ in 0..<50 { yieldProcessor() }
          if [b.value, items.count, doubled.value] != first { changed.append(round) }
          a.value = first[0] + first[1]
        }
      }
      #expect(read.wait())
      let writer = Spawned {
        writing.open()
        switch round % 6 {
        case 0: b.value = round
        case 5: c.value = round
        case 1: b.modify { $0 = round }
        case 2: b.value += round
        case 3: items.append(round)
        default: items.batch { $0.append(round) }
        }
      }
      #expect(owner.join() && writer.join())
    }
    #expect(changed.values == [], "a plain write landed inside the transaction in rounds \(changed.values)")
  }

  /// `if a + b == 0 { a = 1 }` in a transaction against `if a + b == 0 { b = 1 }` in a
  /// `modify` of `b`: one of them runs first, and the other sees its write.
  @Test func transactionAndPlainWriterHaveNoWriteSkew() {
    let a = Property(0)
    let b = Property(0)
    var skewed = 0
    for _ in 0..<200 {
      a.value = 0
      b.value = 0
      let finished = onThreads(2) { index in
        if index == 0 {
          transaction {
            if a.value + b.value == 0 {
              yieldProcessor()
              a.value = 1
            }
          }
        } else {
          b.modify { value in
            if a.value + value == 0 {
              yieldProcessor()
              value = 1
            }
          }
        }
      }
      #expect(finished)
      if a.value + b.value != 1 { skewed += 1 }
    }
    #expect(skewed == 0)
  }

  /// A transaction that throws changed nothing, so no Observation scope that read what
  /// it wrote fires; the scope still fires at the next real change.
  @Test func throwingTransactionNotifiesNoObservationScope() {
    let x = Property(0)
    let items = ArrayProperty([0])
    let fired = Counter()
    _ = withObservationTracking {
      x.value + items.count
    } onChange: {
      fired.increment()
    }
    #expect(throws: Failure.self) {
      try transaction {
        x.value = 1
        items.append(1)
        throw Failure()
      }
    }
    #expect(throws: Failure.self) {
      try transaction {
        x.modify { $0 = 5 }
        x.value += 1
        throw Failure()
      }
    }
    #expect(fired.value == 0)
    x.value = 2
    #expect(fired.wait(for: 1))
  }

  /// A transaction's writes notify Observation when it commits, once, and not while it
  /// runs: `onChange` reads the final value.
  @Test func transactionNotifiesObservationOnceWhenItCommits() {
    let x = Property(0)
    let seen = Recorder<Int>()
    let fired = Counter()
    _ = withObservationTracking {
      x.value
    } onChange: {
      seen.append(x.value)
      fired.increment()
    }
    transaction {
      x.value = 1
      #expect(fired.value == 0)
      x.value = 2
    }
    #expect(fired.value == 1)
    #expect(seen.values == [2])
  }

  @Test func transactionOfAnotherThreadWaitsForTheOpenOne() {
    let x = Property(0)
    let entered = Gate()
    let release = Gate()
    let first = Spawned {
      transaction {
        x.value = 1
        entered.open()
        #expect(release.wait())
        x.value = 2
      }
    }
    #expect(entered.wait())
    let read = Atomic<Int>(-1)
    let second = Spawned {
      transaction { read.store(x.value, ordering: .relaxed) }
    }
    release.open()
    #expect(first.join() && second.join())
    // Either before the first began (it had, so no) or after it ended.
    #expect(read.load(ordering: .relaxed) == 2)
  }
}
