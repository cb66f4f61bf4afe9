import Testing

@testable import Evented

@Suite struct SubscriptionTests {
  @Test func storeInSetKeepsTheSubscriptionAndRemovingItEndsIt() {
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    var subscriptions = Set<Subscription>()
    source.observe { seen.append($0) }.store(in: &subscriptions)
    source.observe { seen.append($0 * 10) }.store(in: &subscriptions)
    #expect(subscriptions.count == 2)
    source.send(1)
    subscriptions.removeAll()
    source.send(2)
    #expect(seen.values.sorted() == [1, 10])
    #expect(source.observerCount == 0)
  }

  @Test func subscriptionsAreHashableByIdentity() {
    let source = EventSource<Int>()
    let a = source.observe { _ in }
    let b = source.observe { _ in }
    var set = Set<Subscription>()
    a.store(in: &set)
    a.store(in: &set)
    b.store(in: &set)
    #expect(a == a)
    #expect(a != b)
    #expect(set.count == 2)
  }

  @Test func isActiveUntilCancelled() {
    let property = Property(0)
    let handle = property.observe { _ in }
    #expect(handle.isActive)
    handle.cancel()
    #expect(!handle.isActive)
  }

  @Test func isActiveUntilTheOwnerDeinitializes() {
    let property = Property(0)
    var owner: Owner? = Owner()
    let handle = property.observe(with: owner!) { _, _ in }
    #expect(handle.isActive)
    owner = nil
    #expect(!handle.isActive)
  }

  @Test func isActiveUntilAOnceOnlySubscriptionHasFired() {
    let source = EventSource<Int>()
    let handle = source.observeOnce { _ in }
    #expect(handle.isActive)
    source.send(1)
    #expect(!handle.isActive)
  }

  @Test func cancelIsIdempotent() {
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    let handle = source.observe { seen.append($0) }
    let other = source.observe { seen.append($0 * 10) }
    handle.cancel()
    handle.cancel()
    handle.cancel()
    source.send(1)
    #expect(seen.values == [10])
    #expect(source.observerCount == 1)
    other.cancel()
  }

  @Test func cancelIsSafeAfterThePropertyIsGone() {
    var property: Property<Int>? = Property(0)
    let handle = property!.observeChanges { _ in }
    let owned = property!.observe(with: Owner()) { _, _ in }
    property = nil
    handle.cancel()
    owned.cancel()
    handle.cancel()
    #expect(!handle.isActive)
    #expect(!owned.isActive)
  }

  @Test func capturesAreReleasedWhenTheSubscriptionIsCancelled() {
    let source = EventSource<Int>()
    let live = LiveCount()
    let handle: Subscription
    do {
      let captured = Tracked(live)
      handle = source.observe { _ in _ = captured }
    }
    #expect(live.value == 1)
    handle.cancel()
    #expect(live.value == 0)
  }

  @Test func capturesAreReleasedWhenTheHandleOfAnOwnerlessSubscriptionIsReleased() {
    let property = Property(0)
    let live = LiveCount()
    var handle: Subscription?
    do {
      let captured = Tracked(live)
      handle = property.observe { _ in _ = captured }
    }
    #expect(live.value == 1)
    #expect(handle?.isActive == true)
    handle = nil
    #expect(live.value == 0)
    #expect(property.observerCount == 0)
  }

  @Test func capturesAreReleasedByTheNextSendAfterTheOwnerDies() {
    let source = EventSource<Int>()
    let live = LiveCount()
    let keeper = Owner()
    source.observe(with: keeper) { _, _ in }
    var owner: Owner? = Owner()
    do {
      let captured = Tracked(live)
      source.observe(with: owner!) { _, _ in _ = captured }
    }
    owner = nil
    #expect(live.value == 1)
    #expect(slotCount(source.hub) == 2)
    source.send(1)
    #expect(live.value == 0)
    #expect(slotCount(source.hub) == 1)
  }

  @Test func capturesAreReleasedByTheNextWriteAfterTheOwnerDies() {
    let property = Property(0)
    let live = LiveCount()
    var owner: Owner? = Owner()
    do {
      let captured = Tracked(live)
      property.observeChanges(with: owner!) { _, _ in _ = captured }
    }
    owner = nil
    #expect(live.value == 1)
    property.value = 1
    #expect(live.value == 0)
    #expect(slotCount(property.hub) == 0)
  }

  @Test func capturesAreReleasedAfterAOnceOnlySubscriptionFires() {
    let source = EventSource<Int>()
    let live = LiveCount()
    let owner = Owner()
    do {
      let captured = Tracked(live)
      source.observeOnce(with: owner) { _, _ in _ = captured }
    }
    #expect(live.value == 1)
    source.send(1)
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }

  @Test func capturesAreReleasedWhenAHandlerCancelsItsOwnSubscription() {
    let source = EventSource<Int>()
    let live = LiveCount()
    let box = SubscriptionBox()
    let released = Recorder<Int>()
    do {
      let captured = Tracked(live)
      box.subscription = source.observe { _ in
        _ = captured
        box.cancel()
        // Still held: this very invocation is running.
        released.append(live.value)
      }
    }
    source.send(1)
    #expect(released.values == [1])
    #expect(live.value == 0)
  }

  @Test func deadOwnersArePurgedAndObserverCountReturnsToLiveOwners() {
    let source = EventSource<Int>()
    let property = Property(0)
    let live = LiveCount()
    let kept = Recorder<Owner>()
    #expect(
      onThreads { index in
        for step in 0..<500 {
          let owner = Tracked(live, id: step)
          source.observe(with: owner) { owner, _ in _ = owner.id }
          property.observe(with: owner) { owner, _ in _ = owner.id }
          if step % 50 == 0 {
            let keeper = Owner()
            kept.append(keeper)
            source.observe(with: keeper) { _, _ in }
            property.observeChanges(with: keeper) { _, _ in }
          }
          if step % 7 == 0 { source.send(index) }
          if step % 11 == 0 { property.value = step }
        }
      })
    #expect(live.value == 0)
    #expect(source.observerCount == kept.count)
    #expect(property.observerCount == kept.count)
    #expect(slotCount(source.hub) == kept.count)
    #expect(slotCount(property.hub) == kept.count)
  }

  @Test func memoryForDeadOwnersIsReclaimedBySends() {
    let source = EventSource<Int>()
    let keepers = (0..<10).map { _ in Owner() }
    for keeper in keepers { source.observe(with: keeper) { _, _ in } }
    var largest = 0
    for step in 0..<10_000 {
      source.observe(with: Owner()) { _, _ in }
      if step % 100 == 0 { source.send(step) }
      largest = max(largest, slotCount(source.hub))
    }
    #expect(largest <= keepers.count + 100)
    #expect(source.observerCount == keepers.count)
  }

  @Test func memoryForDeadOwnersStaysBoundedWithoutSends() {
    let source = EventSource<Int>()
    let property = Property(0)
    let live = LiveCount()
    let keepers = (0..<10).map { _ in Owner() }
    for keeper in keepers {
      source.observe(with: keeper) { _, _ in }
      property.observe(with: keeper) { _, _ in }
    }
    var largest = (source: 0, property: 0)
    for _ in 0..<10_000 {
      let owner = Owner()
      let captured = Tracked(live)
      source.observe(with: owner) { _, _ in _ = captured }
      property.observeChanges(with: owner) { _, _ in _ = captured }
      largest.source = max(largest.source, slotCount(source.hub))
      largest.property = max(largest.property, slotCount(property.hub))
    }
    // Live subscriptions plus a constant, and so are the captures still held.
    #expect(largest.source <= 2 * keepers.count + 64)
    #expect(largest.property <= 2 * keepers.count + 64)
    #expect(live.value <= 2 * (keepers.count + 64))
    #expect(source.observerCount == keepers.count)

    // The same with no live subscription at all.
    let empty = EventSource<Int>()
    var emptyLargest = 0
    for _ in 0..<10_000 {
      empty.observe(with: Owner()) { _, _ in }
      emptyLargest = max(emptyLargest, slotCount(empty.hub))
    }
    #expect(emptyLargest <= 64)
  }

  @Test func memoryForCancelledSubscriptionsStaysBounded() {
    let source = EventSource<Int>()
    let kept = (0..<10).map { _ in source.observe { _ in } }
    var largest = 0
    for _ in 0..<10_000 {
      source.observe { _ in }.cancel()
      largest = max(largest, slotCount(source.hub))
    }
    #expect(largest <= 2 * kept.count + 64)
    #expect(source.observerCount == kept.count)
  }

  /// A subscription made and cancelled before the next subscribe is replaced where it
  /// was: the slots do not grow, and the others keep their order.
  @Test func subscribeReplacesACancelledSubscriptionAtTheEndInPlace() {
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    let kept = (0..<3).map { index in source.observe { seen.append(index * 100 + $0) } }
    for round in 0..<1_000 {
      source.observe { seen.append(-1 - $0) }.cancel()
      #expect(slotCount(source.hub) <= kept.count + 1, "round \(round): \(slotCount(source.hub)) slots")
    }
    let last = source.observe { seen.append(1_000 + $0) }
    #expect(slotCount(source.hub) == kept.count + 1)
    source.send(7)
    #expect(seen.values == [7, 107, 207, 1_007])
    withExtendedLifetime((kept, last)) {}
  }
}
