import Observation
import Synchronization
import Testing

@testable import Evented

@Suite struct PromiseEdgeTests {
  struct Failure: Error {}

  // MARK: Rollback and memoized derived values

  @Test func rollbackAMemoizedDerivedValueReadInsideAThrowingTransactionIsCurrentAfterALaterWrite() {
    let x = Property(0)
    let tens = x.map { $0 * 10 }
    #expect(tens.value == 0)
    #expect(throws: Failure.self) {
      try transaction {
        x.value = 5
        #expect(tens.value == 50)
        throw Failure()
      }
    }
    #expect(tens.value == 0)
    x.value = 7
    #expect(tens.value == 70)
    x.value = 5
    #expect(tens.value == 50)
  }

  @Test func rollbackANestedThrowDiscardsItsWritesFromDerivedValuesReadInTheOuterTransaction() {
    let x = Property(0)
    let tens = x.map { $0 * 10 }
    let seen = Recorder<Int>()
    let observer = tens.observe { seen.append($0) }
    transaction {
      x.value = 1
      #expect(tens.value == 10)
      #expect(throws: Failure.self) {
        try transaction {
          x.value = 5
          #expect(tens.value == 50)
          throw Failure()
        }
      }
      #expect(x.value == 1)
      #expect(tens.value == 10)
      x.value = 7
      #expect(tens.value == 70)
    }
    #expect(tens.value == 70)
    #expect(seen.values == [0, 70])
    observer.cancel()
  }

  @Test func rollbackANestedThrowOfAModifyDiscardsItFromDerivedValuesReadInTheOuterTransaction() {
    let x = Property(0)
    let y = Property(0)
    let sum = x.combineLatest(y).map { $0 + $1 }
    transaction {
      x.value = 1
      #expect(sum.value == 1)
      #expect(throws: Failure.self) {
        try transaction {
          x.modify { $0 += 100 }
          y.value = 1000
          #expect(sum.value == 1101)
          throw Failure()
        }
      }
      #expect(sum.value == 1)
    }
    #expect(sum.value == 1)
    y.value = 2
    #expect(sum.value == 3)
  }

  @Test func rollbackANestedThrowThatSwitchedAFlatMapLatestSwitchesItBack() {
    let selector = Property(0)
    let first = Property(10)
    let second = Property(20)
    let followed = selector.flatMapLatest { $0 == 0 ? first : second }
    let seen = Recorder<Int>()
    let observer = followed.observe { seen.append($0) }
    transaction {
      first.value = 11
      #expect(followed.value == 11)
      #expect(throws: Failure.self) {
        try transaction {
          selector.value = 1
          second.value = 21
          #expect(followed.value == 21)
          throw Failure()
        }
      }
      #expect(followed.value == 11)
      first.value = 12
      #expect(followed.value == 12)
    }
    #expect(followed.value == 12)
    #expect(seen.values == [0 + 10, 12])
    second.value = 22
    #expect(seen.values == [10, 12])
    first.value = 13
    #expect(seen.values == [10, 12, 13])
    observer.cancel()
  }

  // MARK: Nested rollback of sources first written inside the nested transaction

  @Test func commitOrderASourceWrittenFirstInANestedThrowCommitsInTheOrderOfItsFirstKeptWrite() {
    let x = Property(0)
    let y = Property(0)
    let changes = Recorder<String>()
    let s1 = x.observeChanges { changes.append("x \($0.oldValue)→\($0.newValue)") }
    let s2 = y.observeChanges { changes.append("y \($0.oldValue)→\($0.newValue)") }
    transaction {
      #expect(throws: Failure.self) {
        try transaction {
          x.value = 5
          y.value = 5
          throw Failure()
        }
      }
      #expect(x.value == 0 && y.value == 0)
      y.value = 7
      x.value = 7
    }
    #expect(changes.values == ["y 0→7", "x 0→7"])
    s1.cancel()
    s2.cancel()
  }

  @Test func rollbackAnArrayChangedInTheOuterAndANestedThrowCommitsOnlyTheOuterChanges() {
    let items = ArrayProperty([5])
    let changesets = Recorder<ArrayChangeset<Int>>()
    let observer = items.observeChanges { changesets.append($0) }
    transaction {
      items.append(1)
      #expect(throws: Failure.self) {
        try transaction {
          items.remove(at: 0)
          items.append(2)
          items[0] = 99
          #expect(items.value == [99, 2])
          throw Failure()
        }
      }
      #expect(items.value == [5, 1])
      #expect(items.count == 2 && items[1] == 1)
      items.append(3)
    }
    #expect(items.value == [5, 1, 3])
    #expect(changesets.values.count == 1)
    #expect(changesets.values.first?.array == [5, 1, 3])
    #expect(changesets.values.first?.applied(to: [5]) == [5, 1, 3])
    observer.cancel()
  }

  @Test func rollbackAnArrayFirstChangedInANestedThrowCommitsOnlyTheOuterChanges() {
    let items = ArrayProperty([5, 6])
    let changesets = Recorder<ArrayChangeset<Int>>()
    let observer = items.observeChanges { changesets.append($0) }
    transaction {
      #expect(throws: Failure.self) {
        try transaction {
          items.removeAll()
          items.append(2)
          throw Failure()
        }
      }
      #expect(items.value == [5, 6])
      items.insert(4, at: 0)
    }
    #expect(items.value == [4, 5, 6])
    #expect(changesets.values.count == 1)
    #expect(changesets.values.first?.applied(to: [5, 6]) == [4, 5, 6])
    observer.cancel()
  }

  @Test func rollbackANestedThrowDropsOnlyItsEventsAlsoThroughDerivedEventSources() {
    let events = EventSource<Int>()
    let seen = Recorder<String>()
    let s1 = events.observe { seen.append("e\($0)") }
    let s2 = events.map { $0 * 10 }.filter { $0 > 0 }.observe { seen.append("m\($0)") }
    transaction {
      events.send(1)
      #expect(throws: Failure.self) {
        try transaction {
          events.send(2)
          throw Failure()
        }
      }
      events.send(3)
    }
    #expect(seen.values == ["e1", "e3", "m10", "m30"] || seen.values == ["e1", "m10", "e3", "m30"])
    #expect(!seen.values.contains("e2") && !seen.values.contains("m20"))
    s1.cancel()
    s2.cancel()
  }

  @Test func rollbackANestedThrowNotifiesNoObservationScopeOfWhatOnlyItWrote() {
    let x = Property(0)
    let y = Property(0)
    let firedX = Counter()
    let firedY = Counter()
    _ = withObservationTracking {
      x.value
    } onChange: {
      firedX.increment()
    }
    _ = withObservationTracking {
      y.value
    } onChange: {
      firedY.increment()
    }
    transaction {
      x.value = 1
      #expect(throws: Failure.self) {
        try transaction {
          y.value = 1
          throw Failure()
        }
      }
    }
    #expect(firedX.value == 1)
    #expect(firedY.value == 0)
    y.value = 2
    #expect(firedY.wait(for: 1))
  }

  @Test func rollbackANestedThrowThatRestoredTheStartingValueCommitsNothingForThatSource() {
    let x = Property(0)
    let seen = Recorder<String>()
    let s1 = x.observeChanges { seen.append("x \($0.oldValue)→\($0.newValue)") }
    let s2 = x.map { $0 }.observe { seen.append("mapped \($0)") }
    transaction {
      x.value = 0
      #expect(throws: Failure.self) {
        try transaction {
          x.value = 3
          throw Failure()
        }
      }
    }
    #expect(seen.values == ["mapped 0"])
    s1.cancel()
    s2.cancel()
  }

  // MARK: Subscribing inside transactions

  @Test func subscribingInsideANestedThrowReceivesOnlyTheOuterCommit() {
    let x = Property(0)
    let y = Property(0)
    let pair = x.combineLatest(y)
    let seen = Recorder<String>()
    let holder = Monitor<[Subscription]>([])
    transaction {
      x.value = 1
      #expect(throws: Failure.self) {
        try transaction {
          y.value = 1
          holder.withLock { $0.append(pair.observe { seen.append("\($0.0),\($0.1)") }) }
          holder.withLock { $0.append(y.observe { seen.append("y\($0)") }) }
          throw Failure()
        }
      }
    }
    #expect(seen.values.first == "0,0" || seen.values.first == "y0")
    #expect(Set(seen.values) == ["0,0", "1,0", "y0"], "\(seen.values)")
    #expect(seen.values.filter { $0 == "1,0" }.count == 1)
    for s in holder.current { s.cancel() }
  }

  @Test func subscribingInsideAThrowingTransactionReceivesOnlyTheStateBefore() {
    let x = Property(0)
    let items = ArrayProperty([1])
    let seen = Recorder<String>()
    let holder = Monitor<[Subscription]>([])
    #expect(throws: Failure.self) {
      try transaction {
        x.value = 1
        items.append(2)
        holder.withLock { $0.append(x.map { $0 * 10 }.observe { seen.append("m\($0)") }) }
        holder.withLock { $0.append(items.observe { seen.append("items \($0)") }) }
        throw Failure()
      }
    }
    #expect(seen.values == ["m0", "items [1]"])
    x.value = 2
    #expect(seen.values == ["m0", "items [1]", "m20"])
    for s in holder.current { s.cancel() }
  }

  // MARK: Transactions in handlers

  @Test func aThrowingTransactionInsideAHandlerDeliversNothing() {
    let trigger = Property(0)
    let x = Property(0)
    let seen = Recorder<String>()
    let s1 = x.observe { seen.append("x\($0)") }
    let s2 = x.combineLatest(trigger).observe { seen.append("pair \($0.0),\($0.1)") }
    let s3 = trigger.observe { value in
      guard value == 1 else { return }
      try? transaction {
        x.value = 9
        throw Failure()
      }
      transaction { x.value = 2 }
    }
    trigger.value = 1
    #expect(x.value == 2)
    #expect(!seen.values.contains("x9"))
    #expect(!seen.values.contains { $0.hasPrefix("pair 9") })
    #expect(seen.values.last == "pair 2,1" || seen.values.last == "x2")
    for s in [s1, s2, s3] { s.cancel() }
  }

  // MARK: More nested rollback

  @Test func rollbackAnObserverArrivingAfterANestedThrowOfItsOnlyWriteReceivesOnlyTheStateBefore() {
    let y = Property(0)
    let seen = Recorder<String>()
    let holder = Monitor<[Subscription]>([])
    transaction {
      #expect(throws: Failure.self) {
        try transaction {
          y.value = 5
          throw Failure()
        }
      }
      holder.withLock { $0.append(y.observe { seen.append("y\($0)") }) }
      holder.withLock { $0.append(y.map { $0 * 10 }.observe { seen.append("m\($0)") }) }
    }
    #expect(seen.values == ["y0", "m0"])
    y.value = 1
    #expect(seen.values == ["y0", "m0", "y1", "m10"])
    for s in holder.current { s.cancel() }
  }

  // MARK: Serializable through derived values

  /// `if x + followed == 0 { x = 1 }` in a transaction, where `followed` follows `p`
  /// through a `flatMapLatest` read before (so remembered), against
  /// `p.modify { if x + $0 == 0 { $0 = 1 } }`: never both.
  @Test func serializableATransactionReadingAMemoizedFlatMapLatestHasNoWriteSkewWithAPlainWriterOfItsTarget() {
    let x = Property(0)
    let selector = Property(0)
    let p = Property(0)
    let q = Property(100)
    let followed = selector.flatMapLatest { $0 == 0 ? p : q }
    var skewed = 0
    for _ in 0..<200 {
      x.value = 0
      p.value = 0
      #expect(followed.value == 0)
      let finished = onThreads(2) { index in
        if index == 0 {
          transaction {
            if x.value + followed.value == 0 {
              yieldProcessor()
              x.value = 1
            }
          }
        } else {
          p.modify { value in
            if x.value + value == 0 {
              yieldProcessor()
              value = 1
            }
          }
        }
      }
      #expect(finished)
      if x.value + p.value != 1 { skewed += 1 }
    }
    #expect(skewed == 0)
  }

  @Test func serializableATransactionReadingAMemoizedMapOfAnArrayHasNoWriteSkewWithAPlainAppend() {
    let x = Property(0)
    let items = ArrayProperty<Int>([])
    let count = items.readOnly.map { $0.count }
    var skewed = 0
    for _ in 0..<200 {
      x.value = 0
      items.removeAll()
      #expect(count.value == 0)
      let finished = onThreads(2) { index in
        if index == 0 {
          transaction {
            if x.value + count.value == 0 {
              yieldProcessor()
              x.value = 1
            }
          }
        } else {
          items.batch { array in
            if x.value == 0 {
              yieldProcessor()
              array.append(1)
            }
          }
        }
      }
      #expect(finished)
      if x.value + items.count > 1 { skewed += 1 }
    }
    #expect(skewed == 0)
  }

  // MARK: Rollback under concurrency

  /// One thread runs transactions that write -1 and throw; another increments; readers
  /// and observers of derived values never see -1, and only see the counter move
  /// forward.
  @Test func rollbackNoThreadEverSeesAThrownWriteAndDerivedValuesOnlyMoveForward() {
    let a = Property(0)
    let tens = a.map { $0 * 10 }
    let pair = a.combineLatest(tens)
    let bad = Recorder<String>()
    let seen = Recorder<Int>()
    let observer = pair.observe { value in
      if value.0 < 0 || value.1 != value.0 * 10 { bad.append("observed \(value)") }
      seen.append(value.0)
    }
    let rounds = isThreadSanitized ? 300 : 2_000
    let writing = Atomic<Int>(2)
    let finished = onThreads(4) { index in
      switch index {
      case 0:
        for _ in 0..<rounds {
          try? transaction {
            a.value = -1
            if tens.value != -10 { bad.append("own write not read") }
            throw Failure()
          }
        }
        writing.subtract(1, ordering: .releasing)
      case 1:
        for _ in 0..<rounds { a.modify { $0 += 1 } }
        writing.subtract(1, ordering: .releasing)
      default:
        var last = 0
        while writing.load(ordering: .acquiring) > 0 {
          let t = tens.value
          let p = pair.value
          if t < 0 || p.0 < 0 { bad.append("read \(t) \(p)") }
          if t < last { bad.append("went back \(last) → \(t)") }
          if p.1 != p.0 * 10 { bad.append("torn \(p)") }
          last = t
          yieldProcessor()
        }
      }
    }
    #expect(finished)
    #expect(bad.values.isEmpty, "\(bad.values.prefix(5))")
    #expect(a.value == rounds)
    #expect(tens.value == rounds * 10)
    #expect(seen.wait { $0.last == rounds })
    let values = seen.values
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 })
    observer.cancel()
  }

  // MARK: flatMapLatest under concurrency

  /// Two writers and a subscriber: `followed` follows `evens` (even numbers only) while
  /// the selector is even and `odds` (odd numbers) while it is odd; every pair of it
  /// with the selector agrees on parity.
  @Test func glitchFreeAFlatMapLatestPairedWithItsSelectorAgreesOnParityWhileTwoThreadsWrite() {
    let selector = Property(0)
    let evens = Property(0)
    let odds = Property(1)
    let followed = selector.map { $0 % 2 == 0 }.flatMapLatest { $0 ? evens.readOnly : odds.readOnly }
    let pairs = followed.combineLatest(selector)
    let bad = Recorder<String>()
    let seen = Recorder<[Int]>()
    let observer = pairs.observe { value in
      if (value.0 % 2 == 0) != (value.1 % 2 == 0) { bad.append("observed \(value)") }
      seen.append([value.0, value.1])
    }
    let rounds = isThreadSanitized ? 300 : 3_000
    let writing = Atomic<Int>(2)
    let finished = onThreads(4) { index in
      switch index {
      case 0:
        for _ in 0..<rounds { selector.modify { $0 += 1 } }
        writing.subtract(1, ordering: .releasing)
      case 1:
        for i in 1...rounds {
          if i % 2 == 0 { evens.value = 2 * i } else { odds.value = 2 * i + 1 }
          if i % 7 == 0 {
            transaction {
              evens.value += 2
              odds.value += 2
              selector.value += 1
            }
          }
        }
        writing.subtract(1, ordering: .releasing)
      case 2:
        while writing.load(ordering: .acquiring) > 0 {
          let s = pairs.observe { value in
            if (value.0 % 2 == 0) != (value.1 % 2 == 0) { bad.append("second observer \(value)") }
          }
          let v = pairs.value
          if (v.0 % 2 == 0) != (v.1 % 2 == 0) { bad.append("read \(v)") }
          s.cancel()
        }
      default:
        while writing.load(ordering: .acquiring) > 0 {
          let v = pairs.value
          if (v.0 % 2 == 0) != (v.1 % 2 == 0) { bad.append("read \(v)") }
          let f = followed.value
          _ = f
          yieldProcessor()
        }
      }
    }
    #expect(finished)
    #expect(bad.values.isEmpty, "\(bad.values.prefix(5))")
    let final = pairs.value
    #expect(seen.wait { $0.last == [final.0, final.1] }, "last \(String(describing: seen.values.last)) value \(final)")
    observer.cancel()
  }

  // MARK: Lifetime

  @Test func lifetimeDerivedValuesBuiltObservedAndFreedWhileAnotherThreadWritesTheRoot() {
    let root = Property(0)
    let writing = Atomic<Bool>(true)
    let bad = Recorder<String>()
    let finished = onThreads(3) { index in
      switch index {
      case 0:
        for _ in 0..<(isThreadSanitized ? 500 : 5_000) { root.modify { $0 += 1 } }
        writing.store(false, ordering: .releasing)
      default:
        var round = 0
        while writing.load(ordering: .acquiring) {
          round += 1
          let doubled = root.map { $0 * 2 }
          let pair = doubled.combineLatest(root)
          let followed = root.map { $0 % 2 == 0 }.flatMapLatest { $0 ? doubled : pair.map { $0.0 } }
          let s = followed.combineLatest(pair).observe { value in
            if value.0 != value.1.0 || value.1.0 != 2 * value.1.1 { bad.append("\(value)") }
          }
          if round % 2 == 0 { s.cancel() }
        }
      }
    }
    #expect(finished)
    #expect(bad.values.isEmpty, "\(bad.values.prefix(5))")
  }

  @Test func cancellationIsFinalADerivedObserverCancelledInsideItsHandlerWhileAnotherThreadWrites() {
    let root = Property(0)
    let after = Atomic<Int>(0)
    let finished = onThreads(2) { index in
      if index == 0 {
        for _ in 0..<(isThreadSanitized ? 300 : 3_000) { root.modify { $0 += 1 } }
      } else {
        for _ in 0..<(isThreadSanitized ? 50 : 300) {
          let cancelled = Atomic<Bool>(false)
          let holder = Monitor<Subscription?>(nil)
          let s = root.map { $0 + 1 }.combineLatest(root).observe { _ in
            if cancelled.load(ordering: .acquiring) { after.add(1, ordering: .relaxed) }
            if let s = holder.current {
              cancelled.store(true, ordering: .releasing)
              s.cancel()
            }
          }
          holder.withLock { $0 = s }
          root.modify { $0 += 0 }
          _ = s
        }
      }
    }
    #expect(finished)
    #expect(after.load(ordering: .relaxed) == 0)
  }

  // MARK: Arrays in transactions under concurrency

  /// Replicas subscribed with `fromEmpty` while two threads mutate the array, one of
  /// them in transactions that sometimes throw (also in a nested transaction): each
  /// replica ends equal to `value`, and no replica ever holds a thrown element.
  @Test func arrayReplicasEndOnValueWhileTransactionsWithRollbacksMutateTheArray() {
    let items = ArrayProperty<Int>([])
    let x = Property(0)
    let bad = Recorder<String>()
    let replicas = Monitor<[Monitor<[Int]>]>([])
    let subscriptions = Monitor<[Subscription]>([])
    let rounds = isThreadSanitized ? 300 : 1_500
    let writing = Atomic<Int>(2)
    let finished = onThreads(3) { index in
      switch index {
      case 0:
        var random = SplitMix(seed: 1)
        for i in 0..<rounds {
          let choice = Int.random(in: 0..<4, using: &random)
          do {
            try transaction {
              items.append(i)
              x.value = i
              if choice == 0 { throw Failure() }
              if choice == 1 {
                try? transaction {
                  items.append(-1)
                  if items.count > 3 { items.remove(at: 0) }
                  items[items.count - 1] = -2
                  throw Failure()
                }
              }
              if choice == 2, items.count > 5 { items.replaceSubrange(0..<2, with: [Int]()) }
              if items.value.contains(-1) || items.value.contains(-2) {
                bad.append("inner rollback kept \(items.value)")
              }
            }
          } catch {}
        }
        writing.subtract(1, ordering: .releasing)
      case 1:
        for i in 0..<rounds {
          if i % 3 == 0, !items.isEmpty { _ = items.popLast() } else { items.append(10_000 + i) }
        }
        writing.subtract(1, ordering: .releasing)
      default:
        while writing.load(ordering: .acquiring) > 0 {
          let replica = Monitor<[Int]>([])
          replicas.withLock { $0.append(replica) }
          let s = items.observeChanges(fromEmpty: true) { changeset in
            replica.withLock { array in
              array = changeset.applied(to: array)
              if array.contains(where: { $0 < 0 }) { bad.append("replica holds \(array)") }
              if array != changeset.array { bad.append("replica \(array) != changeset.array") }
            }
          }
          subscriptions.withLock { $0.append(s) }
          for _ in 0..<20 { yieldProcessor() }
          if replicas.current.count > 40 { break }
        }
      }
    }
    #expect(finished)
    #expect(bad.values.isEmpty, "\(bad.values.prefix(3))")
    let final = items.value
    for replica in replicas.current {
      #expect(replica.wait { $0 == final })
    }
    for s in subscriptions.current { s.cancel() }
  }

  // MARK: observeChanges continuity of derived values

  /// Each change an observer of a derived value receives starts where the one before
  /// ended, is a real change, and the last ends on `value`, while two threads write,
  /// one in transactions, and another subscribes and cancels.
  @Test func orderedDerivedChangesStartWhereTheLastEndedWhileThreadsWriteAndSubscribe() {
    let a = Property(0)
    let b = Property(0)
    let sum = a.combineLatest(b).map { $0 + $1 }
    let followed = a.map { $0 % 3 == 0 }.flatMapLatest { $0 ? sum : b.map { $0 * 2 } }
    let bad = Recorder<String>()
    let lastSum = Monitor<Int?>(nil)
    let lastFollowed = Monitor<Int?>(nil)
    let s1 = sum.observeChanges { change in
      lastSum.withLock { last in
        if let previous = last, previous != change.oldValue {
          bad.append("sum \(previous) then \(change.oldValue)→\(change.newValue)")
        }
        if change.oldValue == change.newValue { bad.append("sum repeat \(change.newValue)") }
        if change.newValue < change.oldValue { bad.append("sum back \(change.oldValue)→\(change.newValue)") }
        last = change.newValue
      }
    }
    let s2 = followed.observeChanges { change in
      lastFollowed.withLock { last in
        if let previous = last, previous != change.oldValue {
          bad.append("followed \(previous) then \(change.oldValue)→\(change.newValue)")
        }
        if change.oldValue == change.newValue { bad.append("followed repeat \(change.newValue)") }
        last = change.newValue
      }
    }
    let rounds = isThreadSanitized ? 300 : 2_000
    let writing = Atomic<Int>(2)
    let finished = onThreads(3) { index in
      switch index {
      case 0:
        for _ in 0..<rounds { a.modify { $0 += 1 } }
        writing.subtract(1, ordering: .releasing)
      case 1:
        for i in 0..<rounds {
          if i % 2 == 0 {
            transaction {
              b.value += 1
              a.value += 1
            }
          } else {
            b.modify { $0 += 1 }
          }
        }
        writing.subtract(1, ordering: .releasing)
      default:
        while writing.load(ordering: .acquiring) > 0 {
          let start = Monitor<Int?>(nil)
          let s = sum.observeChanges { change in
            start.withLock { last in
              if let previous = last, previous != change.oldValue {
                bad.append("late sum \(previous) then \(change.oldValue)→\(change.newValue)")
              }
              last = change.newValue
            }
          }
          for _ in 0..<10 { yieldProcessor() }
          s.cancel()
        }
      }
    }
    #expect(finished)
    #expect(bad.values.isEmpty, "\(bad.values.prefix(5))")
    let finalSum = sum.value
    let finalFollowed = followed.value
    #expect(finalSum == a.value + b.value)
    // The observers may never have received a change if nothing changed; here everything did.
    #expect(lastSum.wait { $0 == finalSum }, "sum ended on \(String(describing: lastSum.current)), value \(finalSum)")
    #expect(
      lastFollowed.wait { $0 == finalFollowed },
      "followed ended on \(String(describing: lastFollowed.current)), value \(finalFollowed)")
    s1.cancel()
    s2.cancel()
  }

  // MARK: Several nested transactions

  @Test func rollbackTwoNestedThrowsOfTheSameSourceLeaveNoTraceOnANonEquatableProperty() {
    let x = Property(Tagged(number: 0, isEven: true))
    let seen = Recorder<Int>()
    let fired = Counter()
    _ = withObservationTracking {
      x.value.number
    } onChange: {
      fired.increment()
    }
    let s1 = x.observe { seen.append($0.number) }
    let s2 = x.map { $0.number * 10 }.observe { seen.append($0) }
    transaction {
      #expect(throws: Failure.self) {
        try transaction {
          x.value = Tagged(number: 1, isEven: false)
          throw Failure()
        }
      }
      #expect(throws: Failure.self) {
        try transaction {
          x.value = Tagged(number: 2, isEven: true)
          throw Failure()
        }
      }
      #expect(x.value.number == 0)
    }
    #expect(x.value.number == 0)
    #expect(seen.values == [0, 0])
    #expect(fired.value == 0)
    s1.cancel()
    s2.cancel()
  }

  @Test func rollbackTwoNestedThrowsOfTheSameArrayLeaveNoTrace() {
    let items = ArrayProperty([1])
    let changesets = Recorder<ArrayChangeset<Int>>()
    let observer = items.observeChanges { changesets.append($0) }
    transaction {
      try? transaction {
        items.append(2)
        throw Failure()
      }
      try? transaction {
        items.append(3)
        items.remove(at: 0)
        throw Failure()
      }
      #expect(items.value == [1])
    }
    #expect(items.value == [1])
    #expect(changesets.values.isEmpty, "\(changesets.values.map(\.array))")
    items.append(4)
    #expect(changesets.values.count == 1)
    #expect(changesets.values.last?.applied(to: [1]) == [1, 4])
    observer.cancel()
  }

  @Test func rollbackThreeLevelsRestoreEachLevelsState() {
    let x = Property(0)
    let items = ArrayProperty<Int>([])
    let changes = Recorder<String>()
    let s1 = x.observeChanges { changes.append("x \($0.oldValue)→\($0.newValue)") }
    let s2 = items.observeChanges { changes.append("items \($0.array)") }
    transaction {
      x.value = 1
      items.append(1)
      try? transaction {
        x.value = 2
        items.append(2)
        try? transaction {
          x.value = 3
          items.append(3)
          throw Failure()
        }
        #expect(x.value == 2 && items.value == [1, 2])
        throw Failure()
      }
      #expect(x.value == 1 && items.value == [1])
      transaction {
        x.value = 4
        items.append(4)
        try? transaction {
          x.value = 5
          items.append(5)
          throw Failure()
        }
        #expect(x.value == 4 && items.value == [1, 4])
      }
      #expect(x.value == 4 && items.value == [1, 4])
    }
    #expect(changes.values == ["x 0→4", "items [1, 4]"])
    s1.cancel()
    s2.cancel()
  }

  @Test func rollbackANestedThrowOfASourceFirstWrittenInALevelThatCommittedRestoresThatLevelsValue() {
    let y = Property(0)
    let doubled = y.map { $0 * 2 }
    let seen = Recorder<Int>()
    let observer = doubled.observe { seen.append($0) }
    transaction {
      transaction {
        y.value = 1
      }
      try? transaction {
        y.value = 2
        #expect(doubled.value == 4)
        throw Failure()
      }
      #expect(y.value == 1)
      #expect(doubled.value == 2)
    }
    #expect(y.value == 1)
    #expect(seen.values == [0, 2])
    observer.cancel()
  }

  @Test func rollbackAThrowingNestedWriteOfASourceTheOuterReadLeavesNoTraceAndLaterWritesApply() {
    let y = Property(0)
    let doubled = y.map { $0 * 2 }
    let seen = Recorder<Int>()
    let observer = doubled.observe { seen.append($0) }
    #expect(doubled.value == 0)
    let read = Gate()
    let writer = Gate()
    let owner = Spawned {
      transaction {
        #expect(doubled.value == 0)
        try? transaction {
          y.value = 5
          #expect(doubled.value == 10)
          throw Failure()
        }
        read.open()
        #expect(writer.wait())
        for _ in 0..<50 { yieldProcessor() }
        #expect(y.value == 0 && doubled.value == 0)
      }
    }
    #expect(read.wait())
    let other = Spawned {
      writer.open()
      y.value = 6
    }
    #expect(owner.join() && other.join())
    #expect(y.value == 6 && doubled.value == 12)
    #expect(seen.wait { $0.last == 12 })
    #expect(seen.values == [0, 12])
    observer.cancel()
  }

  @Test func rollbackAMemoOfANestedThrowIsNotReadAfterALaterPlainWrite() {
    let x = Property(0)
    let y = Property(0)
    let tens = y.map { $0 * 10 }
    let seen = Recorder<Int>()
    let observer = tens.observe { seen.append($0) }
    transaction {
      x.value = 1
      try? transaction {
        y.value = 5
        #expect(tens.value == 50)
        throw Failure()
      }
    }
    #expect(tens.value == 0)
    y.value = 6
    #expect(tens.value == 60)
    y.value = 5
    #expect(tens.value == 50)
    #expect(seen.values == [0, 60, 50])
    observer.cancel()
  }

  @Test func rollbackTwoNestedThrowsOfTheSameEquatableSourceNotifyNoObservationScopeAndNoDerivedObserver() {
    let x = Property(0)
    let fired = Counter()
    _ = withObservationTracking {
      x.value
    } onChange: {
      fired.increment()
    }
    let seen = Recorder<Int>()
    let observer = x.map { Tagged(number: $0, isEven: $0 % 2 == 0) }.observe { seen.append($0.number) }
    transaction {
      try? transaction {
        x.value = 1
        throw Failure()
      }
      try? transaction {
        x.value = 2
        throw Failure()
      }
    }
    #expect(seen.values == [0])
    #expect(fired.value == 0)
    observer.cancel()
  }
}

extension PromiseEdgeTests {
  // MARK: Memos made by other threads during a transaction that throws

  @Test func rollbackAMemoMadeByAnotherThreadDuringAThrowingTransactionIsNotReadAfterALaterWrite() {
    let a = Property(0)
    let b = Property(0)
    let tens = a.map { $0 * 10 }
    let pair = a.combineLatest(b)
    let followed = b.map { $0 >= 0 }.flatMapLatest { $0 ? tens : b.readOnly }
    #expect(tens.value == 0 && followed.value == 0)
    for round in 1...20 {
      let wrote = Gate()
      let read = Gate()
      let owner = Spawned {
        try? transaction {
          a.value = -round
          #expect(tens.value == -10 * round)
          wrote.open()
          #expect(read.wait())
          throw Failure()
        }
      }
      #expect(wrote.wait())
      let other = Spawned {
        #expect(tens.value == 10 * (round - 1))
        #expect(pair.value.0 == round - 1)
        #expect(followed.value == 10 * (round - 1))
        read.open()
      }
      #expect(owner.join() && other.join())
      a.value = round
      #expect(tens.value == 10 * round)
      #expect(pair.value.0 == round)
      #expect(followed.value == 10 * round)
      let elsewhere = Spawned {
        #expect(tens.value == 10 * round)
        #expect(pair.value.0 == round)
        #expect(followed.value == 10 * round)
      }
      #expect(elsewhere.join())
    }
  }

  @Test func rollbackAMemoMadeByAnotherThreadDuringATransactionWhoseNestedWriteThrewIsNotReadAfterALaterWrite() {
    let a = Property(0)
    let x = Property(0)
    let tens = a.map { $0 * 10 }
    #expect(tens.value == 0)
    for round in 1...20 {
      let wrote = Gate()
      let read = Gate()
      let owner = Spawned {
        transaction {
          x.value = round
          try? transaction {
            a.value = -round
            throw Failure()
          }
          wrote.open()
          #expect(read.wait())
        }
      }
      #expect(wrote.wait())
      let other = Spawned {
        #expect(tens.value == 10 * (round - 1))
        read.open()
      }
      #expect(owner.join() && other.join())
      #expect(tens.value == 10 * (round - 1))
      a.value = round
      #expect(tens.value == 10 * round)
      let fresh = completesOnAnotherThread {
        #expect(tens.value == 10 * round)
      }
      #expect(fresh)
    }
  }

  // MARK: Switching under concurrency

  /// The selector switches from a target another thread keeps writing (negative
  /// numbers) to one holding positive numbers: once the observer received the new
  /// target, nothing of the old one follows.
  @Test func chainsSwitchCleanlyNothingFromTheOldTargetFollowsWhileAnotherThreadWritesIt() {
    for _ in 0..<(isThreadSanitized ? 10 : 30) {
      let selector = Property(0)
      let old = Property(-1)
      let new = Property(1)
      let followed = selector.flatMapLatest { $0 == 0 ? old : new }
      let seen = Recorder<Int>()
      let attached = Recorder<Int>()
      let observer = followed.observe { value in
        if value > 0 { attached.append(old.observerCount) }
        seen.append(value)
      }
      let stop = Atomic<Bool>(false)
      let started = Gate()
      let writer = Spawned {
        var i = -1
        started.open()
        while !stop.load(ordering: .acquiring) {
          i -= 1
          old.value = i
        }
      }
      #expect(started.wait())
      for _ in 0..<20 { yieldProcessor() }
      selector.value = 1
      new.value = 2
      stop.store(true, ordering: .releasing)
      #expect(writer.join())
      #expect(attached.values.allSatisfy { $0 == 0 }, "old target still observed: \(attached.values)")
      #expect(seen.wait { $0.last == 2 })
      let values = seen.values
      if let firstNew = values.firstIndex(where: { $0 > 0 }) {
        #expect(values[firstNew...].allSatisfy { $0 > 0 }, "\(values.suffix(5))")
      }
      observer.cancel()
    }
  }

  // MARK: Subscribing from another thread during a transaction

  @Test func transactionsAreSeenWholeByObserversSubscribingOnAnotherThreadWhileTheyRun() {
    let a = Property(0)
    let b = Property(0)
    let pair = a.combineLatest(b)
    let bad = Recorder<String>()
    let subscriptions = Monitor<[Subscription]>([])
    let rounds = 150
    let done = Atomic<Bool>(false)
    let finished = onThreads(3) { index in
      switch index {
      case 0:
        for i in 1...rounds {
          transaction {
            a.value = i
            yieldProcessor()
            b.value = i
          }
        }
        done.store(true, ordering: .releasing)
      default:
        while !done.load(ordering: .acquiring) {
          let last = Monitor<Int>(-1)
          let s = pair.observe { value in
            if value.0 != value.1 { bad.append("torn \(value)") }
            last.withLock { last in
              if value.0 <= last { bad.append("went back \(last) → \(value.0)") }
              last = value.0
            }
          }
          let once = a.map { $0 }.combineLatest(b).observe { value in
            if value.0 != value.1 { bad.append("torn map \(value)") }
          }
          subscriptions.withLock { $0.append(s) }
          once.cancel()
          if subscriptions.current.count > 100 {
            let old = subscriptions.withLock { $0.removeFirst() }
            old.cancel()
          }
        }
      }
    }
    #expect(finished)
    #expect(bad.values.isEmpty, "\(bad.values.prefix(5))")
    for s in subscriptions.current { s.cancel() }
  }
}
extension PromiseEdgeTests {
  @Test func readYourWritesInsideATransactionThroughAChainOfTenThousandMapsOnAOneMegabyteStack() {
    let root = Property(0)
    let read = Recorder<Int>()
    let thread = Spawned {
      var chain = root.readOnly
      for _ in 0..<10_000 { chain = chain.map { $0 + 1 } }
      read.append(chain.value)
      transaction {
        root.value = 1
        read.append(chain.value)
      }
    }
    #expect(thread.join())
    #expect(read.values == [10_000, 10_001])
  }
}

extension PromiseEdgeTests {
  @Test func memoizedInsideATransactionOneReadOfAChainRunsEachTransformOnce() {
    for length in [2, 5, 10, 20, 40] {
      let root = Property(0)
      let calls = Atomic<Int>(0)
      var chain = root.readOnly
      for _ in 0..<length {
        chain = chain.map { value in
          calls.add(1, ordering: .relaxed)
          return value + 1
        }
      }
      #expect(chain.value == length)
      calls.store(0, ordering: .relaxed)
      transaction {
        root.value = 1
        #expect(chain.value == length + 1)
      }
      let inside = calls.load(ordering: .relaxed)
      #expect(inside <= length, "a chain of \(length) maps ran \(inside) transforms for one read")
    }
  }
}

extension PromiseEdgeTests {
  @Test func reentrancyATransactionInAHandlerOfADerivedValueWritingItsRootDeliversEachStateInOrder() {
    let a = Property(0)
    let b = Property(0)
    let pair = a.combineLatest(b)
    let seen = Recorder<[Int]>()
    let other = Recorder<[Int]>()
    let s1 = pair.observe { value in
      seen.append([value.0, value.1])
      if value.0 < 10 {
        transaction {
          a.value += 1
          b.value = a.value * 2
        }
      }
    }
    let s2 = pair.observe { other.append([$0.0, $0.1]) }
    #expect(a.value == 10 && b.value == 20)
    #expect(seen.values == (0...10).map { [$0, $0 * 2] })
    #expect(other.values.last == [10, 20])
    #expect(other.values.allSatisfy { $0[1] == $0[0] * 2 })
    s1.cancel()
    s2.cancel()
  }

  @Test func subscribingInsideATransactionToAFlatMapLatestItSwitchedStartsFromTheStateBefore() {
    let selector = Property(0)
    let first = Property(10)
    let second = Property(20)
    let followed = selector.flatMapLatest { $0 == 0 ? first : second }
    let seen = Recorder<Int>()
    let holder = Monitor<[Subscription]>([])
    transaction {
      selector.value = 1
      second.value = 21
      holder.withLock { $0.append(followed.observe { seen.append($0) }) }
      #expect(followed.value == 21)
      first.value = 11
    }
    #expect(seen.values == [10, 21])
    first.value = 12
    second.value = 22
    #expect(seen.values == [10, 21, 22])
    #expect(first.observerCount == 0)
    for s in holder.current { s.cancel() }
  }

  @Test func observeOnceInsideATransactionReceivesItsCommitOnce() {
    let x = Property(0)
    let seen = Recorder<Int>()
    let holder = Monitor<[Subscription]>([])
    transaction {
      x.value = 1
      holder.withLock { $0.append(x.observeOnce { seen.append($0) }) }
      holder.withLock { $0.append(x.map { $0 * 10 }.observeOnce { seen.append($0) }) }
      x.value = 2
    }
    x.value = 3
    #expect(seen.values == [2, 20], "\(seen.values)")
    for s in holder.current { s.cancel() }
  }

  @Test func eventsSentInATransactionThroughAMergeArriveOnceAfterItSourceBySourceInTheOrderOfTheirFirstSends() {
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    let merged = a.merge(with: b).map { $0 * 10 }
    let seen = Recorder<Int>()
    let s = merged.observe { seen.append($0) }
    transaction {
      a.send(1)
      b.send(2)
      try? transaction {
        a.send(3)
        throw Failure()
      }
      a.send(4)
      #expect(seen.values.isEmpty)
    }
    #expect(seen.values == [10, 40, 20])
    s.cancel()
  }
}

extension PromiseEdgeTests {
  /// A ladder of diamonds: each level combines the level below with itself. Read once
  /// inside a transaction that wrote the root, each transform should run once.
  @Test func memoizedInsideATransactionALadderOfDiamondsRunsEachTransformOnce() {
    let levels = 12
    let root = Property(1)
    let calls = Atomic<Int>(0)
    var top = root.readOnly
    for _ in 0..<levels {
      let below = top
      top = below.combineLatest(below).map { pair in
        calls.add(1, ordering: .relaxed)
        return (pair.0 + pair.1) % 1_000_003
      }
    }
    let ladder = top
    _ = ladder.value
    calls.store(0, ordering: .relaxed)
    transaction {
      root.value = 2
      _ = ladder.value
    }
    let inside = calls.load(ordering: .relaxed)
    #expect(inside <= levels, "a ladder of \(levels) diamonds ran \(inside) transforms for one read in a transaction")
    calls.store(0, ordering: .relaxed)
    root.value = 3
    _ = ladder.value
    let outside = calls.load(ordering: .relaxed)
    #expect(outside <= levels, "outside a transaction: \(outside)")
  }

  @Test func memoizedInsideATransactionAChainOfFlatMapLatestsRunsEachTransformOnce() {
    let length = 10
    let root = Property(0)
    let calls = Atomic<Int>(0)
    var chain = root.readOnly
    for _ in 0..<length {
      chain = chain.flatMapLatest { value in
        calls.add(1, ordering: .relaxed)
        return ReadOnlyProperty(constant: value + 1)
      }
    }
    let top = chain
    #expect(top.value == length)
    calls.store(0, ordering: .relaxed)
    transaction {
      root.value = 1
      #expect(top.value == length + 1)
    }
    let inside = calls.load(ordering: .relaxed)
    #expect(
      inside <= length, "a chain of \(length) flatMapLatests ran \(inside) transforms for one read in a transaction")
  }
}
