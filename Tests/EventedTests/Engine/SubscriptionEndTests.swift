// A subscription has one entry, listed by its source and held by its handle: it ends
// when its last handle is dropped (even from inside its own handler), after its one
// call if it is once-only, when it is cancelled inside a pass, and when all observers
// are removed while others cancel and send. Each end is final and releases the handler
// once. None of these tests sleeps to decide its result.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Evented

@Suite struct SubscriptionEndTests {
  // MARK: - A handle dropped from inside its own handler

  /// The handler drops its own (last) handle while it runs: in an inline pass, a queued
  /// delivery and a property's replay delivered by another thread's drain. The entry is
  /// then kept alive only by what the delivery holds; it must finish cleanly, release
  /// the capture once, and never run again.
  @Test func handlerMayDropItsOwnLastHandle() {
    for mode in 0..<3 {
      let property = Property(0)
      let live = LiveCount()
      let calls = Counter()
      let box = SubscriptionBox()
      let queue = DispatchQueue(label: "probe-self-drop")
      do {
        let tracked = Tracked(live)
        let delivery: Delivery = mode == 1 ? .queue(queue) : .synchronous
        box.subscription = property.observeChanges(on: delivery) { _ in
          withExtendedLifetime(tracked) {}
          calls.increment()
          box.subscription = nil
        }
      }
      property.value = 1
      let drained = Gate()
      queue.async { drained.open() }
      #expect(drained.wait())
      #expect(calls.value == 1)
      #expect(live.wait(for: 0))
      property.value = 2
      property.value = 3
      #expect(calls.value == 1)
      #expect(property.observerCount == 0)
    }
    // Replay delivered by another thread's drain loop, to a handle dropped at once.
    let property = Property(0)
    let entered = Gate()
    let go = Gate()
    let keeper = property.observeChanges { change in
      if change.newValue == 1 {
        entered.open()
        _ = go.wait()
      }
    }
    let writer = Spawned { property.value = 1 }
    #expect(entered.wait())
    let live = LiveCount()
    let calls = Counter()
    do {
      let tracked = Tracked(live)
      // Queued behind the running pass: the replay is delivered by the writer thread.
      let handle = property.observe { _ in
        withExtendedLifetime(tracked) {}
        calls.increment()
      }
      _ = handle
    }
    // The handle is gone: the queued replay must not run.
    go.open()
    #expect(writer.join())
    property.value = 2
    #expect(calls.value == 0, "a replay ran for a subscription whose handle was dropped before it")
    #expect(live.wait(for: 0))
    withExtendedLifetime(keeper) {}
  }

  // MARK: - Once-only handlers

  @Test func onceHandlerRunsAtMostOnceUnderConcurrentSenders() {
    for round in 0..<60 {
      let source = EventSource<Int>()
      let property = Property(0)
      let live = LiveCount()
      let calls = [Counter(), Counter(), Counter(), Counter()]
      let owner = Owner()
      let queue = DispatchQueue(label: "probe-once", attributes: .concurrent)
      let handles: [Subscription]
      do {
        let tracked = Tracked(live)
        let delivery: Delivery = round % 2 == 0 ? .synchronous : .queue(queue)
        handles = [
          source.observeOnce(on: delivery) { _ in
            withExtendedLifetime(tracked) {}
            calls[0].increment()
          },
          source.observeOnce(with: owner, on: delivery) { _, _ in
            withExtendedLifetime(tracked) {}
            calls[1].increment()
          },
          property.observeOnce(on: delivery) { _ in
            withExtendedLifetime(tracked) {}
            calls[2].increment()
          },
          property.observeOnce(with: owner, on: delivery) { _, _ in
            withExtendedLifetime(tracked) {}
            calls[3].increment()
          },
        ]
      }
      #expect(
        onThreads { thread in
          for event in 1...100 {
            source.send(thread * 1000 + event)
            property.value = thread * 1000 + event
            if event == 50, thread == 0 { handles[round % 4].cancel() }
          }
        })
      let drained = Gate()
      queue.async(flags: .barrier) { drained.open() }
      #expect(drained.wait())
      for (index, counter) in calls.enumerated() {
        #expect(counter.value <= 1, "once handler \(index) ran \(counter.value) times")
        if index != round % 4 { #expect(counter.value == 1) }
      }
      #expect(live.wait(for: 0))
      #expect(source.observerCount == 0)
      #expect(property.observerCount == 0)
      for handle in handles { #expect(!handle.isActive) }
      withExtendedLifetime(owner) {}
    }
  }

  // MARK: - removeAllObservers concurrent with cancel and sends

  @Test func removeAllObserversRacingCancelAndSendsIsFinal() {
    for _ in 0..<40 {
      let source = EventSource<Int>()
      let live = LiveCount()
      let calls = Counter()
      let removedAndCancelled = Atomic<Bool>(false)
      let lateStarts = Counter()
      let owner = Owner()
      var handles: [Subscription] = []
      for index in 0..<32 {
        let tracked = Tracked(live)
        let handler: @Sendable (Int) -> Void = { _ in
          if removedAndCancelled.load(ordering: .acquiring) { lateStarts.increment() }
          withExtendedLifetime(tracked) {}
          calls.increment()
        }
        if index % 2 == 0 {
          handles.append(source.observe(handler))
        } else {
          handles.append(source.observe(with: owner) { _, event in handler(event) })
        }
      }
      let stop = Atomic<Bool>(false)
      let fixed = handles
      let sender = Spawned {
        var event = 0
        while !stop.load(ordering: .relaxed) {
          source.send(event)
          event += 1
        }
      }
      #expect(calls.wait { $0 >= 64 })
      #expect(
        onThreads(3) { thread in
          switch thread {
          case 0: source.removeAllObservers()
          case 1: for handle in fixed where handle.hashValue % 2 == 0 { handle.cancel() }
          default: source.removeAllObservers()
          }
        })
      removedAndCancelled.store(true, ordering: .releasing)
      for event in 0..<20 { source.send(event) }
      stop.store(true, ordering: .relaxed)
      #expect(sender.join())
      #expect(lateStarts.value == 0, "a handler started after removeAllObservers() returned")
      #expect(live.wait(for: 0))
      #expect(source.observerCount == 0)
      for handle in handles { #expect(!handle.isActive) }
      withExtendedLifetime(owner) {}
    }
  }

  // MARK: - Reentrant cancel inside a pass

  @Test func subscriptionCancelledInsideAHandlerIsNotCalledLaterInThePassAndIsReleased() {
    let source = EventSource<Int>()
    let live = LiveCount()
    let calls = Counter()
    let victim = SubscriptionBox()
    let me = SubscriptionBox()
    let first = source.observe { _ in
      victim.cancel()
      me.cancel()
    }
    me.subscription = first
    do {
      let tracked = Tracked(live)
      victim.subscription = source.observe { _ in
        withExtendedLifetime(tracked) {}
        calls.increment()
      }
    }
    source.send(1)
    source.send(2)
    #expect(calls.value == 0)
    #expect(live.value == 0)
    #expect(source.observerCount == 0)
  }
}
