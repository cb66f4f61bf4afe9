import Dispatch
import Synchronization
import Testing

@testable import Evented

/// A queue that can tell whether the current code runs on it (or on a queue that
/// targets it).
private final class MarkedQueue: Sendable {
  private static let key = DispatchSpecificKey<String>()
  let queue: DispatchQueue
  let name: String

  init(_ name: String, concurrent: Bool = false) {
    self.name = name
    queue = DispatchQueue(label: name, attributes: concurrent ? .concurrent : [])
    queue.setSpecific(key: Self.key, value: name)
  }

  var isCurrent: Bool { DispatchQueue.getSpecific(key: Self.key) == name }
}

@MainActor final class Screen {
  private(set) var shown: [Int] = []
  private var finished: CheckedContinuation<Void, Never>?

  func show(_ value: Int) {
    shown.append(value)
    if value == 3 { finished?.resume() }
  }

  func waitForThree() async {
    if shown.contains(3) { return }
    await withCheckedContinuation { finished = $0 }
  }
}

@Suite struct DeliveryTests {
  @Test func synchronousDeliveryRunsOnTheSendingThreadBeforeSendReturns() {
    let source = EventSource<Int>()
    let threads = Recorder<UInt>()
    let subscription = source.observe { _ in threads.append(currentThreadID()) }
    source.send(1)
    #expect(threads.values == [currentThreadID()])
    #expect(completesOnAnotherThread { source.send(2) })
    #expect(threads.count == 2)
    #expect(threads.values[1] != currentThreadID())
    subscription.cancel()
  }

  @Test(arguments: [false, true])
  func queueDeliveryRunsOnThatQueueInCommitOrder(concurrent: Bool) {
    let marked = MarkedQueue("delivery", concurrent: concurrent)
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    let offQueue = Atomic<Int>(0)
    let subscription = source.observe(on: .queue(marked.queue)) { event in
      if !marked.isCurrent { offQueue.add(1, ordering: .relaxed) }
      seen.append(event)
    }
    for event in 0..<500 { source.send(event) }
    #expect(seen.wait(forCount: 500))
    #expect(seen.values == Array(0..<500))
    #expect(offQueue.load(ordering: .relaxed) == 0)
    subscription.cancel()
  }

  @Test func concurrentTargetQueueStillDeliversEachSubscriptionSerially() {
    let marked = MarkedQueue("concurrent-target", concurrent: true)
    let source = EventSource<Int>()
    let detectors = (0..<4).map { _ in OverlapDetector() }
    let logs = (0..<4).map { _ in Recorder<Int>() }
    let subscriptions = zip(detectors, logs).map { detector, log in
      source.observe(on: .queue(marked.queue)) { event in
        detector.invocation { spin() }
        log.append(event)
      }
    }
    #expect(
      onThreads { index in
        for step in 0..<200 { source.send(index * 1_000 + step) }
      })
    for log in logs { #expect(log.wait(forCount: 4 * 200)) }
    for detector in detectors { #expect(detector.overlapCount == 0) }
    let first = logs[0].values
    for log in logs.dropFirst() { #expect(log.values == first) }
    for subscription in subscriptions { subscription.cancel() }
  }

  /// `.global()` returns a new `DispatchQueue` of the same queue on each call: threads
  /// subscribing on it at once, directly or through a derived value, each find the
  /// queue's one mark (replacing it while another thread read it crashed the process).
  @Test func threadSafetySubscribingOnTheGlobalQueueFromSeveralThreadsAtOnce() {
    let p = Property(0)
    let mapped = p.map { $0 + 1 }
    let delivered = Atomic<Int>(0)
    #expect(
      onThreads(3) { index in
        for _ in 0..<2_000 {
          let source = index == 0 ? mapped : p.readOnly
          let subscription = source.observe(on: .queue(.global())) { _ in
            delivered.add(1, ordering: .relaxed)
          }
          subscription.cancel()
        }
      })
    let last = p.observe(on: .queue(.global())) { _ in delivered.add(1, ordering: .relaxed) }
    let received = Recorder<Int>()
    let check = mapped.observe(on: .queue(.global())) { received.append($0) }
    p.value = 1
    // The replay may be replaced by the newer state while it waits on the queue.
    #expect(received.wait { $0.last == 2 })
    #expect(received.values == [1, 2] || received.values == [2])
    last.cancel()
    check.cancel()
    #expect(p.observerCount == 0)
  }

  @Test func propertyOnAQueueDeliversTheCurrentValueThenChangesOnThatQueue() {
    let marked = MarkedQueue("property-delivery")
    let property = Property(0)
    let owner = Owner()
    let seen = Recorder<Int>()
    let changes = Recorder<Change<Int>>()
    let offQueue = Atomic<Int>(0)
    property.observe(with: owner, on: .queue(marked.queue)) { _, value in
      if !marked.isCurrent { offQueue.add(1, ordering: .relaxed) }
      seen.append(value)
    }
    property.observeChanges(with: owner, on: .queue(marked.queue)) { _, change in
      if !marked.isCurrent { offQueue.add(1, ordering: .relaxed) }
      changes.append(change)
    }
    // Each write waits for its delivery: the queue never falls behind, so no state is
    // replaced by a newer one.
    #expect(seen.wait(forCount: 1))
    for value in 1...100 {
      property.value = value
      #expect(seen.wait(forCount: value + 1))
      #expect(changes.wait(forCount: value))
    }
    #expect(seen.values == Array(0...100))
    #expect(changes.values == (1...100).map { Change(oldValue: $0 - 1, newValue: $0) })
    #expect(offQueue.load(ordering: .relaxed) == 0)
  }

  @Test func queueDeliverySkipsAnOwnerThatDiedBeforeItsTurn() {
    let marked = MarkedQueue("dead-owner")
    let source = EventSource<Int>()
    let seen = Recorder<Int>()
    let blocked = Gate()
    let release = Gate()
    marked.queue.async {
      blocked.open()
      release.wait()
    }
    #expect(blocked.wait())
    var owner: Owner? = Owner()
    source.observe(with: owner!, on: .queue(marked.queue)) { _, event in seen.append(event) }
    source.send(1)
    owner = nil
    source.send(2)
    release.open()
    let drained = Gate()
    marked.queue.async { drained.open() }
    #expect(drained.wait())
    #expect(seen.values.isEmpty)
    #expect(source.observerCount == 0)
  }

  @MainActor
  @Test func mainDeliveryRunsAMainActorHandlerThatCallsIsolatedCode() async {
    let source = EventSource<Int>()
    let property = Property(0)
    let screen = Screen()
    let changes = Screen()
    // The handlers are @MainActor: they call `show` directly, no assumeIsolated.
    source.observe(with: screen, on: .main) { screen, event in screen.show(event) }
    let subscription = property.observeChanges(with: changes, on: .main) { changes, change in
      changes.show(change.newValue)
    }
    let sender = Spawned {
      for event in 1...3 { source.send(event) }
      for value in 1...3 { property.value = value }
    }
    #expect(sender.join())
    await screen.waitForThree()
    await changes.waitForThree()
    #expect(screen.shown == [1, 2, 3])
    // State coalesces on the main queue: the changes end on the last value.
    #expect(changes.shown.last == 3 && changes.shown == changes.shown.sorted())
    subscription.cancel()
  }

  @MainActor
  @Test func mainDeliveryOfAPropertyStartsWithTheCurrentValue() async {
    let property = Property(3)
    let screen = Screen()
    property.observe(with: screen, on: .main) { screen, value in screen.show(value) }
    await screen.waitForThree()
    #expect(screen.shown == [3])
  }
}
