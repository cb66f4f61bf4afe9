import Evented
import Observation
import Testing

/// Tracks the reads `apply` makes; counts each time the tracking fires.
private func track<T>(_ apply: () -> T, fired: Counter, reading read: (@Sendable () -> Void)? = nil) -> T {
  withObservationTracking(apply) {
    read?()
    fired.increment()
  }
}

@Suite struct ObservationTests {
  @Test func writeFromAnotherThreadFiresTracking() {
    let name = Property("a")
    let fired = Counter()
    #expect(track({ name.value }, fired: fired) == "a")
    #expect(completesOnAnotherThread { name.value = "b" })
    #expect(fired.wait(for: 1))
  }

  @Test func everyWritePathFiresTracking() {
    let count = Property(0)
    let fired = Counter()
    _ = track({ count.value }, fired: fired)
    count.modify { $0 += 1 }
    #expect(fired.value == 1)
    _ = track({ count.value }, fired: fired)
    count.value += 1
    #expect(fired.value == 2)
    _ = track({ count.value }, fired: fired)
    count.value = 10
    #expect(fired.value == 3)
  }

  @Test func equalWriteNotifiesNobody() {
    let name = Property("a")
    let fired = Counter()
    _ = track({ name.value }, fired: fired)
    name.value = "a"
    name.modify { $0 = "a" }
    #expect(fired.value == 0)
    name.value = "b"
    #expect(fired.value == 1)
  }

  @Test func eachCommitNotifiesOnce() {
    let count = Property(0)
    let fired = Counter()
    _ = track({ count.value + count.value }, fired: fired)
    count.value = 1
    count.value = 2
    #expect(fired.value == 1)
  }

  @Test func onChangeReadsTheNewValue() {
    let name = Property("a")
    let seen = Recorder<String>()
    let fired = Counter()
    _ = track({ name.value }, fired: fired, reading: { seen.append(name.value) })
    name.value = "b"
    #expect(seen.values == ["b"])
  }

  @Test func readOnlyViewSharesTrackingWithItsProperty() {
    let name = Property("a")
    let view = name.readOnly
    let fired = Counter()
    _ = track({ view.value }, fired: fired)
    name.value = "b"
    #expect(fired.value == 1)
  }

  @Test func untrackedReadsDoNotNotify() {
    let name = Property("a")
    _ = name.value
    let fired = Counter()
    _ = track({ 0 }, fired: fired)
    name.value = "b"
    #expect(fired.value == 0)
  }

  @Test func derivedValueFiresTrackingWhenItsSourceChanges() {
    let count = Property(1)
    let doubled = count.map { $0 * 2 }
    let fired = Counter()
    #expect(track({ doubled.value }, fired: fired) == 2)
    #expect(completesOnAnotherThread { count.value = 2 })
    #expect(fired.wait(for: 1))
    #expect(doubled.value == 4)
  }

  /// A derived value's commit is delivered inside its root's pass; its scopes are
  /// notified as a property's are, once the pass is over: after every synchronous
  /// handler of the write, and with the root's delivery released, so that a write from
  /// another thread inside `onChange` does not wait for it.
  @Test(arguments: [false, true])
  func trackingFiresAfterTheSynchronousHandlersOfTheWrite(derived: Bool) {
    let a = Property(0, backlogLimit: 1)
    let mapped = a.map { $0 }
    let log = Recorder<String>()
    let before = a.observe { log.append("before \($0)") }
    let otherThreadWrote = Counter()
    _ = withObservationTracking {
      derived ? mapped.value : a.value
    } onChange: {
      log.append("onChange")
      if completesOnAnotherThread({
        a.value = 100
        a.value = 101
      }) {
        otherThreadWrote.increment()
      }
    }
    let after = a.observe { log.append("after \($0)") }
    a.value = 1
    #expect(Array(log.values.prefix(5)) == ["before 0", "after 0", "before 1", "after 1", "onChange"])
    #expect(otherThreadWrote.value == 1)
    before.cancel()
    after.cancel()
  }

  @Test func combinedValueFiresTrackingOnceForAWriteToBothSides() {
    let a = Property(1)
    let b = Property(2)
    let sum = a.combineLatest(b).map { $0 + $1 }
    let fired = Counter()
    #expect(track({ sum.value }, fired: fired) == 3)
    a.value = 5
    #expect(fired.wait(for: 1))
    #expect(sum.value == 7)
  }

  @Test func arrayViewFiresTrackingThroughItsSubscription() {
    let friends = ArrayProperty(["Ann"])
    let view = friends.readOnly
    let fired = Counter()
    #expect(track({ view.value }, fired: fired) == ["Ann"])
    #expect(completesOnAnotherThread { friends.append("Bob") })
    #expect(fired.wait(for: 1))
  }

  @Test func arrayReadsFireTrackingOnTheNextChangeset() {
    let friends = ArrayProperty(["Ann"])
    let fired = Counter()
    #expect(track({ friends.count }, fired: fired) == 1)
    #expect(completesOnAnotherThread { friends.append("Bob") })
    #expect(fired.wait(for: 1))
    _ = track({ friends[0] }, fired: fired)
    friends.value = ["Cy"]
    #expect(fired.wait(for: 2))
  }

  /// `removeAllObservers()` ends the subscription an array's tracking waits on; the next
  /// tracked read makes a new one.
  @Test func arrayTrackingFiresAgainAfterRemoveAllObservers() {
    let items = ArrayProperty([1])
    let view = items.readOnly
    let first = Counter()
    _ = track({ items.count + view.value.count }, fired: first)
    items.removeAllObservers()
    items.append(2)
    let second = Counter()
    _ = track({ items.count }, fired: second)
    let third = Counter()
    _ = track({ view.value.count }, fired: third)
    items.append(3)
    #expect(second.wait(for: 1))
    #expect(third.wait(for: 1))
  }

  @Test func arrayScopeInstalledBeforeRemoveAllObserversFiresOnTheNextChange() {
    let items = ArrayProperty([1])
    let view = items.readOnly
    let onArray = Counter()
    let onView = Counter()
    let onMap = Counter()
    let counted = view.map { $0.count }
    _ = track({ items.count }, fired: onArray)
    _ = track({ view.value.count }, fired: onView)
    _ = track({ counted.value }, fired: onMap)
    items.removeAllObservers()
    #expect(onArray.value == 0)
    #expect(onView.value == 0)
    items.append(2)
    #expect(onArray.wait(for: 1))
    #expect(onView.wait(for: 1))
    // A value derived through the view keeps following the array after
    // `removeAllObservers()`: its scope is notified too.
    #expect(onMap.wait(for: 1))
  }

  @Test func constantNeverFires() {
    let constant = ReadOnlyProperty(constant: 3)
    let fired = Counter()
    #expect(track({ constant.value }, fired: fired) == 3)
    #expect(fired.value == 0)
  }

  /// `Observations { a.value + b.value }` while another thread writes both ends on the
  /// final sum, in every run.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)
  @Test func observationsEndOnTheFinalStateInEveryRun() async {
    for run in 0..<40 {
      let a = Property(0)
      let b = Property(0)
      let last = 200
      let sums = Observations { a.value + b.value }
      let writer = Spawned {
        for i in 1...last {
          a.value = i
          b.value = i
        }
      }
      let seen = Recorder<Int>()
      let consumer = Task {
        for await sum in sums {
          seen.append(sum)
          if sum == 2 * last { break }
        }
      }
      // Waits without blocking a thread of the cooperative pool, which the consumer needs.
      #expect(await settles { writer.isFinished })
      let ended = await settles { seen.values.last == 2 * last }
      consumer.cancel()
      #expect(ended, "run \(run) ended on \(seen.values.last ?? -1)")
    }
  }
}
