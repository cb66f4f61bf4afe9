// A source that deinitializes ends its subscriptions: deliveries still queued never
// run, a handler running on a queue is released when it returns, handles report the
// end, and a cycle through a handle is broken. None of these tests sleeps to decide
// its result.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Evented

@Suite struct SourceLifetimeTests {
  // MARK: - The source deinitialized with deliveries pending or running

  @Test func queuedDeliveriesOfADeinitializedSourceNeverRun() {
    let queue = DispatchQueue(label: "probe-dead-source")
    let blocker = Gate()
    queue.async { _ = blocker.wait() }
    let live = LiveCount()
    let calls = Counter()
    let owner = Owner()
    var source: EventSource<Int>? = EventSource<Int>()
    var property: Property<Int>? = Property(0)
    let handles: [Subscription]
    do {
      let tracked = Tracked(live)
      let handler: @Sendable (Int) -> Void = { _ in
        withExtendedLifetime(tracked) {}
        calls.increment()
      }
      handles = [
        source!.observe(on: .queue(queue), handler),
        source!.observe(with: owner, on: .queue(queue)) { _, event in handler(event) },
        source!.observeOnce(on: .queue(queue), handler),
        property!.observe(on: .queue(queue), handler),  // its replay is queued too
        property!.observeChanges(with: owner, on: .queue(queue)) { _, change in handler(change.newValue) },
      ]
    }
    for event in 1...5 {
      source!.send(event)
      property!.value = event
    }
    source = nil
    property = nil
    for (index, handle) in handles.enumerated() {
      #expect(!handle.isActive, "subscription \(index) active after its source is gone")
    }
    // Nothing ran (the queue is blocked), so the sources' deinit released every handler.
    #expect(live.value == 0, "captures kept after the source was deinitialized")
    blocker.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(calls.value == 0, "a source that is gone delivered")
    for handle in handles { handle.cancel() }
    withExtendedLifetime(owner) {}
  }

  @Test func queueHandlerRunningWhenItsSourceDeinitializesIsReleasedWhenItReturns() {
    let queue = DispatchQueue(label: "probe-running")
    let entered = Gate()
    let go = Gate()
    let live = LiveCount()
    let calls = Counter()
    var source: EventSource<Int>? = EventSource<Int>()
    let handle: Subscription
    do {
      let tracked = Tracked(live)
      handle = source!.observe(on: .queue(queue)) { event in
        withExtendedLifetime(tracked) {}
        calls.increment()
        if event == 1 {
          entered.open()
          _ = go.wait()
        }
      }
    }
    source!.send(1)
    source!.send(2)
    #expect(entered.wait())
    source = nil
    #expect(!handle.isActive)
    // Running on the queue: the runner releases it when it returns.
    #expect(live.value == 1)
    go.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(calls.value == 1)
    #expect(live.wait(for: 0))
    handle.cancel()  // safe and idempotent after the source is gone
    #expect(!handle.isActive)
  }

  @Test func subscriptionIsInactiveOnceItsSourceIsGone() {
    let owner = Owner()
    var source: EventSource<Int>? = EventSource<Int>()
    var property: Property<Int>? = Property(0)
    var array: ArrayProperty<Int>? = ArrayProperty([1])
    let handles = [
      source!.observe { _ in },
      source!.observe(with: owner) { _, _ in },
      source!.observeOnce { _ in },
      source!.observeOnce(with: owner) { _, _ in },
      property!.observe { _ in },
      property!.observe(with: owner) { _, _ in },
      property!.observeChanges { _ in },
      property!.observeOnce { _ in },
      array!.observe { _ in },
      array!.observeChanges(with: owner) { _, _ in },
    ]
    for handle in handles { #expect(handle.isActive) }
    source = nil
    property = nil
    array = nil
    for (index, handle) in handles.enumerated() {
      #expect(!handle.isActive, "handle \(index) active after its source is gone")
    }
    withExtendedLifetime(owner) {}
  }

  // MARK: - Cycles through a handle

  /// A handler that captures its own handle is a cycle (handle, entry, handler); the
  /// source's deinit ends the subscription and must break it.
  @Test func sourceDeinitBreaksACycleThroughAHandle() {
    let live = LiveCount()
    var source: EventSource<Int>? = EventSource<Int>()
    do {
      let box = SubscriptionBox()
      let tracked = Tracked(live)
      box.subscription = source!.observe { _ in
        withExtendedLifetime(tracked) {}
        withExtendedLifetime(box) {}
      }
    }
    source!.send(1)
    #expect(live.value == 1)
    source = nil
    #expect(live.value == 0, "the handle cycle outlived its source")
  }
}
