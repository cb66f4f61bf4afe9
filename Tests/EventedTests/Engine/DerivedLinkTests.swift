// The links of derived values: a derived node nobody references nor observes is freed
// with its link upstream, `flatMapLatest` replaces its link when it switches, and
// observers of derived values may come and go while upstream delivers on another
// thread. None of these tests sleeps to decide its result.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Evented

@Suite struct DerivedLinkTests {
  // MARK: - Links are removed

  @Test func flatMapLatestSwitchingDoesNotAccumulateSlots() {
    let a = Property(1)
    let b = Property(2)
    let useA = Property(true)
    let chain = useA.flatMapLatest { $0 ? a : b }
    let seen = Recorder<Int>()
    let counts = Recorder<(Int, Int)>()
    let handle = chain.observe { value in
      seen.append(value)
      counts.append((a.observerCount, b.observerCount))
    }
    for index in 0..<4_000 { useA.value = index % 2 == 1 }
    #expect(chain.value == 1)
    #expect(a.observerCount == 1)
    #expect(b.observerCount == 0)
    #expect(slotCount(a.hub) <= 64, "a slots: \(slotCount(a.hub))")
    #expect(slotCount(b.hub) <= 64, "b slots: \(slotCount(b.hub))")
    // Every delivered value came with exactly one target attached.
    for (index, pair) in counts.values.enumerated() where pair.0 + pair.1 != 1 {
      Issue.record("delivery \(index): observerCounts \(pair)")
      break
    }
    withExtendedLifetime(handle) {}
  }

  @Test func unobservedDerivedNodeIsFreedAndItsLinkRemoved() {
    let source = Property(0)
    weak var weakNode: AnyObject?
    do {
      let mapped = source.map { $0 * 2 }
      weakNode = mapped.derived
      let handle = mapped.observe { _ in }
      source.value = 1
      #expect(source.observerCount == 1)
      handle.cancel()
    }
    #expect(weakNode == nil, "a derived value nobody references nor observes was kept")
    #expect(source.observerCount == 0)
    for _ in 0..<1_000 { _ = source.map { $0 + 1 } }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
  }

  // MARK: - Under concurrency

  /// Handles of a derived value's observers are dropped and remade on one thread while
  /// another sends upstream: every delivery visits entries unretained, and the node is
  /// kept alive only by its observers. Nothing may crash, and when everything is
  /// dropped the node is freed and the upstream count returns to zero.
  @Test func derivedObserversMayChurnWhileUpstreamDelivers() {
    for round in 0..<20 {
      let upstream = EventSource<Int>()
      let property = Property(0)
      let stop = Atomic<Bool>(false)
      let calls = Counter()
      let nodes = Monitor<[WeakReference]>([])
      let sender = Spawned {
        var event = 0
        while !stop.load(ordering: .relaxed) {
          upstream.send(event)
          property.value = event
          event += 1
        }
      }
      let churn = Spawned {
        for index in 0..<200 {
          let mapped = upstream.map { $0 + 1 }.filter { $0 % 2 == 0 }
          let derived = property.map { $0 * 2 }.combineLatest(property.map { $0 + 1 })
          let node = WeakReference(derived.derived)
          nodes.withLock { $0.append(node) }
          var handles = [
            mapped.observe { _ in calls.increment() },
            derived.observe { _ in calls.increment() },
          ]
          if (index + round) % 3 == 0 {
            // Drop one from inside its own handler, on the delivering thread.
            let box = SubscriptionBox()
            box.subscription = derived.observeChanges { _ in box.subscription = nil }
          }
          handles.removeFirst((index + round) % 2)
          handles.removeAll()
        }
      }
      #expect(churn.join())
      stop.store(true, ordering: .relaxed)
      #expect(sender.join())
      upstream.send(-1)
      property.value = -1
      #expect(upstream.observerCount == 0)
      #expect(property.observerCount == 0)
      let kept = nodes.withLock { $0.filter { $0.value != nil }.count }
      #expect(kept == 0, "\(kept) derived nodes kept after all observers were dropped")
    }
  }

  /// flatMapLatest switches on one thread while both targets are written on others.
  /// When writers stop, the observer ends on the chain's value, and only the current
  /// target is observed.
  @Test func flatMapLatestEndsOnItsValueWhenSwitchedUnderConcurrentWrites() {
    for round in 0..<10 {
      let a = Property(0)
      let b = Property(1_000_000)
      let useA = Property(true)
      let chain = useA.flatMapLatest { $0 ? a : b }
      let last = Monitor<Int?>(nil)
      let handle = chain.observe { value in last.withLock { $0 = value } }
      #expect(
        onThreads(3) { thread in
          for index in 0..<2_000 {
            switch thread {
            case 0: useA.value = (index + round) % 3 != 0
            case 1: a.value = index
            default: b.value = 1_000_000 + index
            }
          }
        })
      let expected = chain.value
      #expect(last.current == expected, "observer ended on \(String(describing: last.current)), value \(expected)")
      #expect(a.observerCount + b.observerCount == 1)
      #expect(useA.value ? a.observerCount == 1 : b.observerCount == 1)
      #expect(slotCount(a.hub) <= 64 && slotCount(b.hub) <= 64)
      withExtendedLifetime(handle) {}
    }
  }
}
