import Dispatch
import Synchronization
import Testing

@testable import Evented

@Suite struct OverloadTests {
  @Test func overloadNoCallDeliversForOthersWithoutEndAndTheBacklogStaysBounded() {
    // Three writers against a slow handler. Measured in handler calls, not time: the
    // handler calls that one `modify` runs on its own thread stay within about twice
    // the limit however long the others write, and the backlog never exceeds the limit.
    let limit = 16
    let property = Property(0, backlogLimit: limit)
    let callsByThread = Monitor<[UInt: Int]>([:])
    let peakBacklog = Atomic<Int>(0)
    let outOfOrder = Atomic<Int>(0)
    let last = Atomic<Int>(-1)
    let subscription = property.observe { value in
      callsByThread.withLock { $0[currentThreadID(), default: 0] += 1 }
      let backlog = property.hub.storage.withLock { $0.queue.backlog }
      peakBacklog.max(backlog, ordering: .relaxed)
      if value <= last.load(ordering: .relaxed) { outOfOrder.add(1, ordering: .relaxed) }
      last.store(value, ordering: .relaxed)
      work(microseconds: 20)
    }
    let longest = Atomic<Int>(0)
    #expect(
      onThreads(3, timeout: .seconds(60)) { _ in
        let me = currentThreadID()
        for _ in 0..<1_000 {
          let before = callsByThread.withLock { $0[me, default: 0] }
          property.modify { $0 += 1 }
          let after = callsByThread.withLock { $0[me, default: 0] }
          longest.max(after - before, ordering: .relaxed)
        }
      })
    #expect(property.value == 3_000)
    #expect(last.load(ordering: .relaxed) == 3_000)
    #expect(outOfOrder.load(ordering: .relaxed) == 0)
    #expect(peakBacklog.load(ordering: .relaxed) <= limit)
    #expect(longest.load(ordering: .relaxed) <= 2 * limit + 4, "handler calls run by the longest modify")
    subscription.cancel()
  }

  @Test func overloadASendFromInsideAHandlerNeverWaits() {
    let source = EventSource<Int>(backlogLimit: 1)
    let seen = Recorder<Int>()
    let subscription = source.observe { event in
      seen.append(event)
      if event == 0 { for next in 1...100 { source.send(next) } }
    }
    #expect(completesOnAnotherThread { source.send(0) })
    #expect(seen.values == Array(0...100))
    subscription.cancel()
  }

  @Test func overloadAHandlerSendingToAnotherFullSourceDoesNotWait() {
    // A handler of `first` sends to `second`, whose backlog is full while another
    // thread's handler of `second` waits for `first`'s handler to finish: waiting
    // there would deadlock, so the send is queued beyond the limit.
    let first = EventSource<Int>()
    let second = EventSource<Int>(backlogLimit: 1)
    let inSecond = Gate()
    let releaseSecond = Gate()
    let seen = Recorder<Int>()
    let a = second.observe { event in
      seen.append(event)
      if event == 0 {
        inSecond.open()
        releaseSecond.wait()
      }
    }
    let secondSender = Spawned { second.send(0) }
    #expect(inSecond.wait())
    second.send(1)  // fills the backlog
    let b = first.observe { _ in
      for next in 2...5 { second.send(next) }
      releaseSecond.open()
    }
    #expect(completesOnAnotherThread { first.send(0) })
    #expect(secondSender.join())
    #expect(seen.wait(forCount: 6))
    #expect(seen.values == [0, 1, 2, 3, 4, 5])
    a.cancel()
    b.cancel()
  }

  @Test func overloadASendAtTheLimitWaitsForRoom() {
    let source = EventSource<Int>(backlogLimit: 2)
    let inHandler = Gate()
    let release = Gate()
    let seen = Recorder<Int>()
    let subscription = source.observe { event in
      seen.append(event)
      if event == 0 {
        inHandler.open()
        release.wait()
      }
    }
    let deliverer = Spawned { source.send(0) }
    #expect(inHandler.wait())
    source.send(1)
    source.send(2)
    let blocked = Spawned { source.send(3) }
    // The backlog is full: the fourth send waits until the deliverer takes one.
    #expect(eventually { source.hub.storage.withLock { $0.queue.roomWaiters } == 1 })
    #expect(!blocked.isFinished)
    release.open()
    #expect(blocked.join())
    #expect(deliverer.join())
    #expect(seen.wait(forCount: 4))
    #expect(seen.values == [0, 1, 2, 3])
    subscription.cancel()
  }

  // MARK: - The per-thread delivering depth

  /// A handler running on a `.queue` target counts as delivering: a send it makes to
  /// another source whose backlog is full must not wait for room (the deliverer of
  /// that source is blocked until this send returns, so waiting would deadlock).
  @Test func queueHandlerSendingToAFullSourceDoesNotWait() {
    let full = EventSource<Int>(backlogLimit: 1)
    let entered = Gate()
    let release = Gate()
    let fullHandle = full.observe { event in
      if event == 1 {
        entered.open()
        _ = release.wait()
      }
    }
    let deliverer = Spawned { full.send(1) }
    #expect(entered.wait())
    full.send(2)  // queued: the backlog is at its limit now
    let source = EventSource<Int>()
    let queue = DispatchQueue(label: "probe-depth")
    let returned = Gate()
    let handle = source.observe(on: .queue(queue)) { _ in
      full.send(3)
      returned.open()
    }
    // Spawned threads too, so the depth counter of fresh and exited threads is used.
    for index in 0..<8 { #expect(completesOnAnotherThread { source.send(index) }) }
    #expect(returned.wait(), "a queued handler waited for room in another source's backlog")
    release.open()
    #expect(deliverer.join())
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    withExtendedLifetime((fullHandle, handle)) {}
  }
}
