import Testing

@testable import Evented

@Suite struct RemoveAllObserversTests {
  @Test func removeAllObserversEndsEverySubscriptionOfAProperty() {
    let name = Property("a")
    let owner = Owner()
    let seen = Recorder<String>()
    let owned = name.observe(with: owner) { _, value in seen.append(value) }
    let kept = name.observeChanges { seen.append("\($0.oldValue)>\($0.newValue)") }
    let throughView = name.readOnly.observe { seen.append("view \($0)") }
    #expect(name.observerCount == 3)
    name.removeAllObservers()
    #expect(name.observerCount == 0)
    #expect(!owned.isActive && !kept.isActive && !throughView.isActive)
    name.value = "b"
    #expect(seen.values == ["a", "view a"])
  }

  @Test func propertySubscriptionsMadeAfterRemoveAllObserversAreDelivered() {
    let count = Property(0)
    count.observe { _ in }.cancel()
    count.removeAllObservers()
    let seen = Recorder<Int>()
    let subscription = count.observe { seen.append($0) }
    count.value = 1
    #expect(seen.values == [0, 1])
    withExtendedLifetime(subscription) {}
  }

  @Test func handlerMayRemoveAllObserversOfItsOwnProperty() {
    let count = Property(0)
    let seen = Recorder<Int>()
    let first = count.observeChanges { change in
      seen.append(change.newValue)
      count.removeAllObservers()
    }
    let second = count.observeChanges { seen.append($0.newValue * 10) }
    count.value = 1
    count.value = 2
    #expect(seen.values == [1])
    #expect(count.observerCount == 0)
    withExtendedLifetime((first, second)) {}
  }

  @Test func removeAllObserversWaitsForAHandlerRunningOnAnotherThread() {
    let count = Property(0)
    let entered = Gate()
    let release = Gate()
    let finished = Gate()
    let subscription = count.observeChanges { _ in
      entered.open()
      release.wait()
      finished.open()
    }
    let writer = Spawned { count.value = 1 }
    #expect(entered.wait())
    let remover = Spawned {
      count.removeAllObservers()
      #expect(finished.isOpened)
    }
    release.open()
    #expect(remover.join())
    #expect(writer.join())
    withExtendedLifetime(subscription) {}
  }

  @Test func removeAllObserversReleasesTheHandlersCaptures() {
    let live = LiveCount()
    let count = Property(0)
    let owner = Owner()
    do {
      let tracked = Tracked(live)
      count.observe(with: owner) { _, _ in withExtendedLifetime(tracked) {} }
    }
    #expect(live.value == 1)
    count.removeAllObservers()
    #expect(live.value == 0)
  }

  @Test func removeAllObserversEndsEverySubscriptionOfAnArray() {
    let friends = ArrayProperty(["Ann"])
    let owner = Owner()
    let seen = Recorder<String>()
    friends.observe(with: owner) { _, array in seen.append(array.joined()) }
    let changes = friends.observeChanges { _ in seen.append("change") }
    let once = friends.observeOnce { _ in seen.append("once") }
    let throughView = friends.readOnly.observe { seen.append("view \($0.joined())") }
    #expect(friends.observerCount == 4, "three, and the view that is observed")
    friends.removeAllObservers()
    #expect(friends.observerCount == 0)
    #expect(friends.readOnly.observerCount == 0)
    #expect(!changes.isActive && !once.isActive && !throughView.isActive)
    friends.append("Bob")
    #expect(seen.values == ["Ann", "view Ann"])
  }

  @Test func arrayReadOnlyViewKeepsFollowingAfterRemoveAllObservers() {
    let friends = ArrayProperty(["Ann"])
    let view = friends.readOnly
    friends.removeAllObservers()
    let seen = Recorder<[String]>()
    let subscription = view.observe { seen.append($0) }
    friends.append("Bob")
    #expect(seen.values == [["Ann"], ["Ann", "Bob"]])
    #expect(view.value == ["Ann", "Bob"])
    #expect(friends.observerCount == 1, "the view, observed again")
    withExtendedLifetime(subscription) {}
  }
}

@Suite struct RemoveAllObserversLeavesDerivedValuesTests {
  @Test func removeAllObserversLeavesDerivedValuesFollowing() {
    let count = Property(1)
    let doubled = count.map { $0 * 2 }
    let seen = Recorder<Int>()
    let derived = doubled.observe { seen.append($0) }
    let direct = count.observe { _ in }
    count.removeAllObservers()
    #expect(!direct.isActive)
    #expect(derived.isActive)
    count.value = 3
    #expect(seen.values == [2, 6])
    #expect(doubled.value == 6)
    let later = Recorder<Int>()
    let laterSubscription = doubled.observe { later.append($0) }
    count.value = 4
    #expect(later.values == [6, 8])
    #expect(seen.values == [2, 6, 8])
    withExtendedLifetime((derived, laterSubscription)) {}
  }

  @Test func removeAllObserversLeavesDerivedEventSourcesFollowing() {
    let taps = EventSource<Int>()
    let doubled = taps.map { $0 * 2 }
    let seen = Recorder<Int>()
    let derived = doubled.observe { seen.append($0) }
    let direct = taps.observe { _ in }
    taps.removeAllObservers()
    #expect(!direct.isActive)
    taps.send(5)
    #expect(seen.values == [10])
    withExtendedLifetime(derived) {}
  }

  @Test func removeAllObserversOfAnArrayLeavesValuesDerivedFromItsViewFollowing() {
    let friends = ArrayProperty(["Ann"])
    let title = friends.readOnly.map { "\($0.count) friends" }
    let seen = Recorder<String>()
    let subscription = title.observe { seen.append($0) }
    friends.removeAllObservers()
    friends.append("Bob")
    #expect(seen.values == ["1 friends", "2 friends"])
    withExtendedLifetime(subscription) {}
  }
}
