// Lazy removal: an ended subscription stays listed until its source next meets it (a
// send, a subscribe, a count), and no longer. Slots never accumulate, and the
// documented consequences hold: a listed `.queue` subscription keeps its queue until
// then, and `removeAllObservers()` waits for a listed handler that cancelled itself.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Evented

@Suite struct LazyRemovalTests {
  // MARK: - Ended subscriptions that stay listed are removed

  @Test func subscribeAndCancelDoNotAccumulateSlots() {
    let source = EventSource<Int>()
    let keeper = source.observe { _ in }
    for _ in 0..<10_000 { source.observe { _ in }.cancel() }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
    for _ in 0..<10_000 { _ = source.observe { _ in } }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
    let property = Property(0)
    for _ in 0..<10_000 { property.observe { _ in }.cancel() }
    #expect(slotCount(property.hub) <= 64, "slots: \(slotCount(property.hub))")
    // Owners that die, never sent to.
    for _ in 0..<10_000 { source.observe(with: Owner()) { _, _ in } }
    #expect(slotCount(source.hub) <= 64, "slots: \(slotCount(source.hub))")
    #expect(source.observerCount == 1)
    withExtendedLifetime(keeper) {}
  }

  @Test func sendsAloneRemoveEndedSubscriptions() {
    let source = EventSource<Int>()
    let keeper = source.observe { _ in }
    var handles = (0..<1_000).map { _ in source.observe { _ in } }
    for handle in handles { handle.cancel() }
    let owner = Owner()
    for _ in 0..<100 { source.observeOnce(with: owner) { _, _ in } }
    source.send(1)
    source.send(2)
    #expect(slotCount(source.hub) == 1, "slots after sends: \(slotCount(source.hub))")
    handles.removeAll()
    withExtendedLifetime(keeper) {}
  }

  // MARK: - Documented consequences of lazy removal

  /// An ended subscription stays listed until its source next meets it, and a `.queue`
  /// subscription holds its private serial queue (which retains the given queue) until
  /// then, as Guarantees.md says: after `cancel()` the queue lives on until a send, a
  /// scan or `observerCount` removes the entry, and no longer.
  @Test func endedQueueSubscriptionKeepsItsQueueUntilItsSourceRemovesIt() {
    let source = EventSource<Int>()
    let keeper = source.observe { _ in }
    let privateQueue = WeakReference(nil)
    do {
      let handle = source.observe(on: .queue(DispatchQueue(label: "probe-retained"))) { _ in }
      privateQueue.value = (handle.core as? Entry<Int>)?.target?.queue
      #expect(privateQueue.value != nil)
      handle.cancel()
    }
    #expect(privateQueue.value != nil, "the listed entry keeps its queue until its source removes it")
    _ = source.observerCount  // sweeps
    #expect(privateQueue.value == nil, "the queue outlived the removal of its subscription")
    withExtendedLifetime(keeper) {}
  }

  /// A handler that cancelled itself stays listed while it runs (at 87f417c `cancel()`
  /// removed it at once, and `removeAllObservers()` on another thread returned without
  /// waiting for it). Now `removeAllObservers()` waits for it, as its documentation
  /// says ("a handler that is running on another thread is waited for"). The other
  /// side of this change: a handler that cancels itself and then waits for the thread
  /// calling `removeAllObservers()` deadlocks now, where it did not before.
  @Test func removeAllObserversWaitsForAHandlerThatCancelledItself() {
    let source = EventSource<Int>()
    let box = SubscriptionBox()
    let entered = Gate()
    let release = Gate()
    box.subscription = source.observe { _ in
      box.cancel()  // ends itself, from inside
      entered.open()
      _ = release.wait()
    }
    let sender = Spawned { source.send(1) }
    #expect(entered.wait())
    let removed = Gate()
    let remover = Spawned {
      source.removeAllObservers()
      removed.open()
    }
    let returnedWhileItRan = removed.wait(timeout: .milliseconds(300))
    release.open()
    #expect(remover.join())
    #expect(sender.join())
    #expect(!returnedWhileItRan, "removeAllObservers() returned while a handler of the source ran on another thread")
  }
}
