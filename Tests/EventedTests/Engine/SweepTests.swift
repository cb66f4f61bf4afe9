// Subscriptions removed by a sweep (their owner is gone, or they already ended) are
// ended without waiting, and a once-only handler is released exactly once even when a
// cancel lands between its start and its own end.

import Dispatch
import Testing

@testable import Evented

@Suite struct SweepTests {
  @Test func countingObserversDoesNotWaitForAOnceHandlerNobodyCancelled() {
    let source = EventSource<Int>()
    let queue = DispatchQueue(label: "once-handler")
    let entered = Gate()
    let release = Gate()
    let owner = Owner()
    source.observeOnce(with: owner, on: .queue(queue)) { _, _ in
      entered.open()
      release.wait()
    }
    source.send(1)
    #expect(entered.wait())
    // The once-only handler has ended itself and is still running on the queue. The
    // sweeps of observerCount and of the subscribes below must not wait for it.
    #expect(
      completesOnAnotherThread {
        _ = source.observerCount
        let owners = (0..<100).map { _ in Owner() }
        for owner in owners { source.observe(with: owner) { _, _ in } }
        _ = source.observerCount
      })
    release.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    withExtendedLifetime(owner) {}
  }

  @Test func sendingDoesNotWaitForAHandlerWhoseOwnerWasSwept() {
    let source = EventSource<Int>()
    let queue = DispatchQueue(label: "swept-handler")
    let entered = Gate()
    let release = Gate()
    let keeper = Owner()
    source.observe(with: keeper) { _, _ in }
    var owner: Owner? = Owner()
    source.observeOnce(with: owner!, on: .queue(queue)) { _, _ in
      entered.open()
      release.wait()
    }
    source.send(1)
    #expect(entered.wait())
    owner = nil
    #expect(
      completesOnAnotherThread {
        for event in 2...50 { source.send(event) }
        _ = source.observerCount
      })
    release.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(source.observerCount == 1)
  }

  @Test func onceHandlerRacingCancelIsReleasedExactlyOnce() {
    let live = LiveCount()
    for round in 0..<500 {
      let source = EventSource<Int>()
      let captured = Tracked(live, id: round)
      let subscription = source.observeOnce { _ in _ = captured }
      let start = Gate()
      let sender = Spawned {
        _ = start.wait()
        source.send(round)
      }
      let canceller = Spawned {
        _ = start.wait()
        subscription.cancel()
      }
      start.open()
      #expect(sender.join())
      #expect(canceller.join())
    }
    // Every handler, and with it every capture, was released once: a second release
    // would crash or drive the count below zero.
    #expect(live.wait(for: 0))
  }
}
