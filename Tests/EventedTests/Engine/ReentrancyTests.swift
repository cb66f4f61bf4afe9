// The reentrancy matrix for synchronous delivery: inside a handler, send, write,
// subscribe, cancel and read, on the same source and on another one. Each scenario
// runs on a thread of its own, so that a deadlock fails the test instead of hanging.

import Synchronization
import Testing

@testable import Evented

/// Runs `scenario` on another thread; fails the test if it does not return.
private func withoutDeadlock(
  _ scenario: @escaping @Sendable () -> Void, sourceLocation: SourceLocation = #_sourceLocation
) {
  #expect(completesOnAnotherThread(scenario), "deadlocked", sourceLocation: sourceLocation)
}

@Suite struct ReentrancyTests {
  // MARK: Same source

  @Test func sendFromHandlerIsDeliveredAfterTheCurrentPassToEverySubscriber() {
    let source = EventSource<Int>()
    let log = Recorder<String>()
    withoutDeadlock {
      let subscriptions = ["a", "b", "c"].map { name in
        source.observe { event in
          log.append("\(name)\(event)")
          if name == "a", event < 3 { source.send(event + 1) }
        }
      }
      source.send(1)
      for subscription in subscriptions { subscription.cancel() }
    }
    #expect(log.values == ["a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3"])
  }

  @Test func writeFromHandlerIsDeliveredAfterTheCurrentPassToEverySubscriber() {
    let property = Property(0)
    let log = Recorder<String>()
    let reads = Recorder<Int>()
    withoutDeadlock {
      let a = property.observeChanges { change in
        log.append("a\(change.newValue)")
        if change.newValue == 1 {
          property.value = 2
          // Committed at once, though not delivered yet.
          reads.append(property.value)
        }
      }
      let b = property.observe { log.append("b\($0)") }
      property.value = 1
      a.cancel()
      b.cancel()
    }
    #expect(log.values == ["b0", "a1", "b1", "a2", "b2"])
    #expect(reads.values == [2])
  }

  @Test func modifyFromHandlerOfTheSamePropertyIsDeliveredAfterThePass() {
    let property = Property(1)
    let seen = Recorder<Int>()
    withoutDeadlock {
      let a = property.observe { value in
        seen.append(value)
        if value < 4 { property.modify { $0 *= 2 } }
      }
      a.cancel()
    }
    #expect(seen.values == [1, 2, 4])
    #expect(property.value == 4)
  }

  @Test func readInHandlerSeesTheLatestCommittedValue() {
    let property = Property(0)
    let reads = Recorder<String>()
    withoutDeadlock {
      let a = property.observe { value in
        reads.append("\(value):\(property.value):\(property.observerCount)")
        if value == 1 {
          property.value = 2
          property.value = 3
        }
      }
      property.value = 1
      a.cancel()
    }
    // Delivering 1, 2 and 3 in turn while `value` is already 3.
    #expect(reads.values == ["0:0:1", "1:1:1", "2:3:1", "3:3:1"])
  }

  @Test func subscriptionAddedInHandlerDoesNotReceiveTheInFlightEvent() {
    let source = EventSource<Int>()
    let log = Recorder<String>()
    let added = SubscriptionBox()
    withoutDeadlock {
      let a = source.observe { event in
        log.append("a\(event)")
        if event == 1 { added.subscription = source.observe { log.append("new\($0)") } }
      }
      let b = source.observe { log.append("b\($0)") }
      source.send(1)
      source.send(2)
      a.cancel()
      b.cancel()
      added.cancel()
    }
    #expect(log.values == ["a1", "b1", "a2", "b2", "new2"])
  }

  @Test func propertySubscriptionAddedInHandlerGetsTheCurrentValueAfterThePass() {
    let property = Property(0)
    let log = Recorder<String>()
    let added = SubscriptionBox()
    withoutDeadlock {
      let a = property.observeChanges { change in
        log.append("a\(change.newValue)")
        if change.newValue == 1 {
          added.subscription = property.observe { log.append("new\($0)") }
          property.value = 2
        }
      }
      let b = property.observeChanges { log.append("b\($0.newValue)") }
      property.value = 1
      a.cancel()
      b.cancel()
      added.cancel()
    }
    #expect(log.values == ["a1", "b1", "new1", "a2", "b2", "new2"])
  }

  @Test func subscriptionCancelledInHandlerIsNotCalledLaterInTheSamePass() {
    let source = EventSource<Int>()
    let log = Recorder<String>()
    let later = SubscriptionBox()
    withoutDeadlock {
      let a = source.observe { event in
        log.append("a\(event)")
        later.cancel()
      }
      later.subscription = source.observe { log.append("b\($0)") }
      source.send(1)
      source.send(2)
      a.cancel()
    }
    #expect(log.values == ["a1", "a2"])
  }

  @Test func subscriptionCancelledInHandlerMissesEventsAlreadyCommitted() {
    let source = EventSource<Int>()
    let log = Recorder<String>()
    let other = SubscriptionBox()
    withoutDeadlock {
      let a = source.observe { event in
        log.append("a\(event)")
        if event == 1 {
          source.send(2)
          other.cancel()
        }
      }
      other.subscription = source.observe { log.append("b\($0)") }
      source.send(1)
      a.cancel()
    }
    // 2 was committed while b was still subscribed, but b was cancelled before its turn.
    #expect(log.values == ["a1", "a2"])
  }

  @Test func handlerMayCancelItsOwnSubscription() {
    let source = EventSource<Int>()
    let log = Recorder<Int>()
    let own = SubscriptionBox()
    withoutDeadlock {
      own.subscription = source.observe { event in
        log.append(event)
        own.cancel()
        source.send(event + 1)
      }
      source.send(1)
    }
    #expect(log.values == [1])
  }

  @Test func removeAllObserversInHandlerStopsTheRestOfThePass() {
    let source = EventSource<Int>()
    let log = Recorder<String>()
    let active = Recorder<Bool>()
    withoutDeadlock {
      let a = source.observe { event in
        log.append("a\(event)")
        source.removeAllObservers()
      }
      let b = source.observe { log.append("b\($0)") }
      source.send(1)
      source.send(2)
      active.append(a.isActive || b.isActive)
    }
    #expect(log.values == ["a1"])
    #expect(active.values == [false])
  }

  @Test func onceOnlyHandlerThatSubscribesAgainGetsOnlyLaterEvents() {
    let source = EventSource<Int>()
    let owner = Owner()
    let log = Recorder<String>()
    withoutDeadlock {
      source.observeOnce(with: owner) { owner, event in
        log.append("first\(event)")
        source.observeOnce(with: owner) { _, event in log.append("second\(event)") }
        source.send(event + 1)
        source.send(event + 2)
      }
      source.send(1)
    }
    #expect(log.values == ["first1", "second2"])
  }

  // MARK: Another source

  @Test func sendToAnotherSourceFromHandlerIsDeliveredAfterTheHandlerReturns() {
    let first = EventSource<Int>()
    let second = EventSource<Int>()
    let log = Recorder<String>()
    withoutDeadlock {
      let a = first.observe { event in
        log.append("first\(event)")
        second.send(event * 10)
        log.append("after\(event)")
      }
      let b = second.observe { log.append("second\($0)") }
      first.send(1)
      a.cancel()
      b.cancel()
    }
    // Deliveries never nest: the send is committed at once and delivered once the
    // handler has returned.
    #expect(log.values == ["first1", "after1", "second10"])
  }

  @Test func deliveriesNeverNestAWriteFromAHandlerReachesADerivedValueAfterTheHandlerReturns() {
    let first = Property(0)
    let second = Property(0)
    let doubled = second.map { $0 * 2 }
    let log = Recorder<String>()
    let running = Atomic<Int>(0)
    withoutDeadlock {
      let a = first.observe { value in
        guard value > 0 else { return }
        running.add(1, ordering: .sequentiallyConsistent)
        log.append("first\(value)")
        second.value = value
        log.append("after\(value)")
        running.subtract(1, ordering: .sequentiallyConsistent)
      }
      // A map of `first` too: its observer is called from `first`'s pass, never from
      // inside the handler above.
      let b = first.map { $0 + 100 }.observe { value in
        log.append("mapped\(value)\(running.load(ordering: .sequentiallyConsistent) == 0 ? "" : " nested")")
      }
      let c = doubled.observe { value in
        log.append("doubled\(value)\(running.load(ordering: .sequentiallyConsistent) == 0 ? "" : " nested")")
      }
      first.value = 1
      a.cancel()
      b.cancel()
      c.cancel()
    }
    #expect(log.values.filter { $0.hasSuffix("nested") } == [])
    #expect(log.values.filter { !$0.hasPrefix("mapped") } == ["doubled0", "first1", "after1", "doubled2"])
    #expect(log.values.filter { $0.hasPrefix("mapped") } == ["mapped100", "mapped101"])
  }

  @Test func deliveriesNeverNestAChainOfFiveThousandSourcesRunsOnAOneMegabyteStack() {
    // Each source's handler sends to the next: nested deliveries would need a pass per
    // source on the stack at once.
    let sources = (0..<5_000).map { _ in EventSource<Int>() }
    let received = Recorder<Int>()
    var subscriptions: [Subscription] = []
    for (index, source) in sources.enumerated() {
      if index + 1 < sources.count {
        let next = sources[index + 1]
        subscriptions.append(source.observe { next.send($0 + 1) })
      } else {
        subscriptions.append(source.observe { received.append($0) })
      }
    }
    let first = sources[0]
    let thread = Spawned { first.send(0) }  // a thread with a 1 MB stack
    #expect(thread.join())
    #expect(received.values == [4_999])
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test func deliveriesNeverNestAChainOfFiveThousandMapsRunsOnAOneMegabyteStack() {
    let root = Property(0)
    let received = Recorder<Int>()
    // Made, observed, written and freed on a thread with a 1 MB stack.
    let thread = Spawned {
      var chain = root.readOnly
      for _ in 0..<5_000 { chain = chain.map { $0 + 1 } }
      let subscription = chain.observe { received.append($0) }
      root.value = 1
      subscription.cancel()
    }
    #expect(thread.join())
    #expect(received.values == [5_000, 5_001])
    #expect(root.observerCount == 0)
  }

  @Test func sourcesThatSendToEachOtherFromHandlersKeepOrder() {
    let ping = EventSource<Int>()
    let pong = EventSource<Int>()
    let log = Recorder<String>()
    withoutDeadlock {
      let a = ping.observe { event in
        log.append("ping\(event)")
        if event < 3 { pong.send(event) }
      }
      let b = pong.observe { event in
        log.append("pong\(event)")
        ping.send(event + 1)
      }
      let c = ping.observe { log.append("ping-late\($0)") }
      ping.send(1)
      a.cancel()
      b.cancel()
      c.cancel()
    }
    #expect(
      log.values == [
        "ping1", "ping-late1", "pong1", "ping2", "ping-late2", "pong2", "ping3", "ping-late3",
      ])
  }

  @Test func writeReadSubscribeAndCancelOnAnotherPropertyFromHandler() {
    let source = Property(0)
    let target = Property("")
    let log = Recorder<String>()
    let reads = Recorder<String>()
    let targetSubscription = SubscriptionBox()
    withoutDeadlock {
      let a = source.observeChanges { change in
        switch change.newValue {
        case 1: targetSubscription.subscription = target.observe { log.append("target \($0)") }
        case 2:
          target.value = "two"
          reads.append(target.value)
          target.modify { $0 += "!" }
        default:
          targetSubscription.cancel()
          target.value = "gone"
          reads.append(target.value)
        }
      }
      for value in 1...3 { source.value = value }
      a.cancel()
    }
    #expect(log.values == ["target ", "target two", "target two!"])
    #expect(reads.values == ["two", "gone"])
    #expect(target.observerCount == 0)
  }

  @Test func cancelSubscriptionOfAnotherSourceFromHandler() {
    let first = EventSource<Int>()
    let second = EventSource<Int>()
    let log = Recorder<String>()
    let onSecond = SubscriptionBox()
    withoutDeadlock {
      onSecond.subscription = second.observe { event in
        log.append("second\(event)")
        first.send(event)
      }
      let a = first.observe { event in
        log.append("first\(event)")
        onSecond.cancel()
        second.send(event + 1)
      }
      second.send(1)
      a.cancel()
    }
    #expect(log.values == ["second1", "first1"])
  }
}
