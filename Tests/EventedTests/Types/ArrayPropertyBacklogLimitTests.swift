import Synchronization
import Testing

@testable import Evented

@Suite struct ArrayPropertyBacklogLimitTests {
  @Test func everyInitializerTakesABacklogLimit() {
    let plain = ArrayProperty<Owner>([], backlogLimit: 3)
    let equatable = ArrayProperty<Double>([], backlogLimit: 4)
    let hashable = ArrayProperty<String>(["a"])
    #expect(plain.hub.storage.withLock { $0.queue.backlogLimit } == 3)
    #expect(equatable.hub.storage.withLock { $0.queue.backlogLimit } == 4)
    #expect(hashable.hub.storage.withLock { $0.queue.backlogLimit } == 1_024)
  }

  @Test func theBacklogOfAnArrayStaysWithinItsLimitAndEveryChangesetIsDelivered() {
    let limit = 2
    let numbers = ArrayProperty<Int>([], backlogLimit: limit)
    let peakBacklog = Atomic<Int>(0)
    let counts = Recorder<Int>()
    let subscription = numbers.observeChanges { changeset in
      peakBacklog.max(numbers.hub.storage.withLock { $0.queue.backlog }, ordering: .relaxed)
      counts.append(changeset.array.count)
    }
    #expect(
      onThreads(3) { _ in
        for i in 0..<200 { numbers.append(i) }
      })
    #expect(counts.values == Array(1...600))
    #expect(peakBacklog.load(ordering: .relaxed) <= limit)
    subscription.cancel()
  }
}
