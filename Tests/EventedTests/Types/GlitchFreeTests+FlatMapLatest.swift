// A `flatMapLatest` is a derived value like the others: values built on it read its
// outer source and its target in one consistent state, a transaction through it
// arrives in one step, and one commit reaches its observer once, also while other
// threads write its roots and subscribe to it.

import Testing

@testable import Evented

/// A value that is not `Equatable`, so that no delivery of it is skipped as a duplicate.
struct Tagged: Sendable {
  let number: Int
  let isEven: Bool
}

extension GlitchFreeTests {
  @Test func glitchFreeAValueBuiltOnAFlatMapLatestPairsItsTargetWithTheOuterStateThatPickedIt() {
    let selector = Property(0)
    let first = Property(10)
    let second = Property(20)
    let followed = selector.flatMapLatest { $0 == 0 ? first : second }
    let pairs = followed.combineLatest(selector)
    let seen = Recorder<String>()
    let observer = pairs.observe { seen.append("\($0.0), \($0.1)") }
    selector.value = 1
    #expect(seen.values == ["10, 0", "20, 1"])
    second.value = 21
    first.value = 11  // no longer followed
    selector.value = 0
    #expect(seen.values == ["10, 0", "20, 1", "21, 1", "11, 0"])
    #expect(pairs.value == (11, 0))
    observer.cancel()
  }

  @Test func glitchFreeATransactionThroughAFlatMapLatestArrivesInOneStep() {
    let selector = Property(0)
    let first = Property(10)
    let second = Property(20)
    let pairs = selector.flatMapLatest { $0 == 0 ? first : second }.combineLatest(selector)
    let seen = Recorder<String>()
    let observer = pairs.observe { seen.append("\($0.0), \($0.1)") }
    transaction {
      selector.value = 1
      second.value = 22
    }
    #expect(seen.values == ["10, 0", "22, 1"])
    transaction {
      first.value = 12
      selector.value = 0
    }
    #expect(seen.values == ["10, 0", "22, 1", "12, 0"])
    observer.cancel()
  }

  /// Two writers and a thread that subscribes and cancels: each commit the observer
  /// receives is a new one (nothing skipped as a duplicate hides a repeat: the value
  /// is not `Equatable`), picked by its own parity, and the last is the value.
  @Test func oncePerCommitAFlatMapLatestOverADerivedOuterSourceDeliversNoCommitTwiceWhileOthersWrite() {
    let b = Property(0)
    let evens = b.map { Tagged(number: $0, isEven: true) }
    let odds = b.map { Tagged(number: $0, isEven: false) }
    let followed = b.map { $0 % 2 == 0 }.flatMapLatest { $0 ? evens : odds }
    let seen = Recorder<Int>()
    let wrong = Recorder<Int>()
    let observer = followed.observe { value in
      if value.isEven != (value.number % 2 == 0) { wrong.append(value.number) }
      seen.append(value.number)
    }
    let writers = (0..<2).map { _ in Spawned { for _ in 0..<5_000 { b.modify { $0 += 1 } } } }
    let subscriber = Spawned { for _ in 0..<500 { followed.observe { _ in }.cancel() } }
    for thread in writers + [subscriber] { #expect(thread.join()) }
    #expect(seen.wait { $0.last == 10_000 })
    let values = seen.values
    let repeats = zip(values, values.dropFirst()).filter { $0 >= $1 }.count
    #expect(repeats == 0, "\(repeats) of \(values.count) deliveries repeated or went back")
    #expect(wrong.count == 0, "\(wrong.count) states that never existed")
    #expect(followed.value.number == 10_000)
    observer.cancel()
  }
}

extension GlitchFreeTests {
  /// Values above a `flatMapLatest` switch cleanly with it: after the switch, nothing
  /// above it follows the old target, whether that target's memo held or was stale.
  @Test(arguments: [false, true])
  func chainsSwitchCleanlyAValueAboveAFlatMapLatestStopsFollowingTheOldTarget(oldTargetStale: Bool) {
    let selector = Property(true)
    let a = Property(0)
    let b = Property(100)
    let first = a.map { $0 }
    let second = b.map { $0 }
    let runs = Counter()
    let above = selector.flatMapLatest { $0 ? first : second }.map { value in
      runs.increment()
      return (value, "not Equatable")
    }
    let seen = Recorder<Int>()
    let observer = above.observe { seen.append($0.0) }
    if oldTargetStale {
      transaction {
        a.value = 1
        selector.value = false
      }
    } else {
      selector.value = false
    }
    #expect(seen.values == [0, 100])
    #expect(a.observerCount == 0, "the old target's root is no longer followed")
    #expect(b.observerCount == 1)
    let ranBefore = runs.value
    a.value = 5
    #expect(runs.value == ranBefore, "a commit of the old target's root ran the transform above")
    #expect(seen.values.count == 2, "a commit of the old target's root reached the observer")
    observer.cancel()
  }

  /// A lazy source that only the old target read stops when a value above the
  /// `flatMapLatest` switches away from it.
  @Test func chainsSwitchCleanlyALazySourceOfTheOldTargetStopsAfterTheSwitch() {
    let started = Counter()
    let a = Property(0, onFirstObserver: { started.increment() }, onLastObserverGone: { started.decrement() })
    let b = Property(100)
    let selector = Property(true)
    let first = a.map { $0 }
    let second = b.map { $0 }
    let above = selector.flatMapLatest { $0 ? first : second }.map { $0 + 1 }
    let observer = above.observe { _ in }
    #expect(started.value == 1)
    selector.value = false
    #expect(started.value == 0)
    observer.cancel()
  }
}
