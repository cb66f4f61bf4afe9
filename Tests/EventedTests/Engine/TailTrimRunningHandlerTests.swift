// The tail trim meets handlers still running on another thread: a subscribe that
// trims an ended subscription whose handler still runs never waits for it and keeps
// it listed, a cancel from another thread still waits, and `removeAllObservers()` does
// not return while a handler of the source still runs. Every test passes on correct
// code and fails if its promise breaks; none sleeps to decide its result.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Evented

/// How long a test gives a broken promise to show itself before it lets a blocked
/// handler go. It never decides a result: the result is what the threads recorded.
private let graceForABrokenPromise: Duration = .milliseconds(400)

@Suite struct TailTrimRunningHandlerTests {
  // MARK: - The trim meets a handler still running on another thread

  /// A handler cancels itself and keeps running on the delivering thread; another thread
  /// subscribes. The trim leaves the ended entry listed while it runs (so that
  /// `removeAllObservers()` would wait for it), `observerCount` does not count it, the
  /// subscribe does not wait for the handler (nobody cancelled it from that thread), and
  /// the captures are released once, when it returns; the next send removes the entry.
  @Test(arguments: [false, true]) func trimDoesNotWaitForARunningSelfEndedHandler(once: Bool) {
    let source = EventSource<Int>()
    let live = LiveCount()
    let box = SubscriptionBox()
    let entered = Gate()
    let release = Gate()
    let running = Flag()
    let calls = Counter()
    do {
      let tracked = Tracked(live)
      let handler: @Sendable (Int) -> Void = { _ in
        running.set()
        if !once { box.cancel() }
        entered.open()
        _ = release.wait(timeout: .seconds(3))
        withExtendedLifetime(tracked) {}
        calls.increment()
        running.set(false)
      }
      box.subscription = once ? source.observeOnce(handler) : source.observe(handler)
    }
    let sender = Spawned { source.send(1) }
    #expect(entered.wait())
    let subscribedWhileRunning = Flag()
    let newcomer = Recorder<Int>()
    let handle = Monitor<Subscription?>(nil)
    let subscriber = Spawned {
      let made = source.observe { newcomer.append($0) }
      subscribedWhileRunning.set(running.isSet)
      handle.withLock { $0 = made }
    }
    #expect(subscriber.join())
    #expect(slotCount(source.hub) == 2, "the ended entry was dropped while its handler runs")
    #expect(source.observerCount == 1, "observerCount counted an ended subscription")
    #expect(slotCount(source.hub) == 2, "observerCount dropped the ended entry while its handler runs")
    #expect(live.value == 1, "captures released while the handler runs")
    release.open()
    #expect(sender.join())
    #expect(subscribedWhileRunning.isSet, "a subscribe waited for a handler nobody cancelled")
    #expect(live.wait(for: 0), "captures of the trimmed handler never released")
    source.send(2)
    #expect(calls.value == 1)
    #expect(newcomer.values == [2])
    #expect(slotCount(source.hub) == 1, "the ended entry outlived the first send after it returned")
    checkBookkeeping(source.hub, "end")
    withExtendedLifetime(handle.current) {}
  }

  /// `cancel()` from another thread waits for the running handler; meanwhile a third
  /// thread subscribes, and the trim leaves the ended entry listed while it runs.
  /// `cancel()` must still wait for the invocation to return, and release the captures
  /// before it returns.
  @Test func cancelStillWaitsWhenASubscribeMeetsItsEntry() {
    let source = EventSource<Int>()
    let live = LiveCount()
    let entered = Gate()
    let release = Gate()
    let running = Flag()
    let subscription: Subscription
    do {
      let tracked = Tracked(live)
      subscription = source.observe { _ in
        running.set()
        entered.open()
        _ = release.wait()
        withExtendedLifetime(tracked) {}
        running.set(false)
      }
    }
    let sender = Spawned { source.send(1) }
    #expect(entered.wait())
    let runningAtReturn = Flag()
    runningAtReturn.set()
    let liveAtReturn = Number(-1)
    let cancelled = Gate()
    let canceller = Spawned {
      subscription.cancel()
      runningAtReturn.set(running.isSet)
      liveAtReturn.store(live.value)
      cancelled.open()
    }
    #expect(eventually { !subscription.isActive })
    let replacement = source.observe { _ in }  // meets the ended entry, still running
    #expect(slotCount(source.hub) == 2)
    _ = cancelled.wait(timeout: graceForABrokenPromise)
    release.open()
    #expect(canceller.join())
    #expect(sender.join())
    #expect(!runningAtReturn.isSet, "cancel() returned while the handler ran")
    #expect(liveAtReturn.value == 0, "captures alive when cancel() returned")
    withExtendedLifetime(replacement) {}
  }

  // MARK: - removeAllObservers after a trim

  /// `removeAllObservers()` is final: "when it returns, no handler of the source starts
  /// again, and one running on another thread has been waited for" (Guarantees, 6). A
  /// handler whose subscription has already ended (a once-only handler, or one that
  /// cancelled itself) is running on another thread; a subscribe may meet its entry at
  /// the end of the list or in its scan, then `removeAllObservers()` is called. It must
  /// not return while that handler still runs. The number of other subscriptions moves
  /// the scan's position.
  @Test(arguments: [false, true], 0..<4)
  func removeAllWaitsForARunningEndedHandlerAfterASubscribe(once: Bool, others: Int) {
    let source = EventSource<Int>()
    let keepers = (0..<others).map { _ in source.observe { _ in } }
    let box = SubscriptionBox()
    let entered = Gate()
    let release = Gate()
    let running = Flag()
    let handler: @Sendable (Int) -> Void = { _ in
      running.set()
      if !once { box.cancel() }
      entered.open()
      _ = release.wait()
      running.set(false)
    }
    box.subscription = once ? source.observeOnce(handler) : source.observe(handler)
    let sender = Spawned { source.send(1) }
    #expect(entered.wait())
    let runningAtReturn = Flag()
    let removed = Gate()
    let remover = Spawned {
      _ = source.observe { _ in }  // a screen opened, say
      source.removeAllObservers()
      runningAtReturn.set(running.isSet)
      removed.open()
    }
    _ = removed.wait(timeout: graceForABrokenPromise)
    release.open()
    #expect(remover.join())
    #expect(sender.join())
    #expect(
      !runningAtReturn.isSet,
      "removeAllObservers() returned while a handler of the source ran on another thread")
    withExtendedLifetime(keepers) {}
  }
}
