// Promise 5: inside a handler one may send, write, subscribe, cancel and read, on the
// same source or another, without deadlock; a send made inside a handler is delivered
// after the current pass, in order; a subscription added inside a handler does not
// get the in-flight event; one cancelled inside a handler is not called again, not
// even later in the same pass. The full matrix is in ReentrancyTests.swift.

import Testing

@testable import Evented

@Suite struct ReentrancyContract {
  @Test(arguments: EventSubjectKind.allCases)
  func reentrancyWithoutDeadlockOrReordering(_ kind: EventSubjectKind) {
    let subject = kind.make()
    let log = Recorder<String>()
    let counts = Recorder<Int>()
    let late = SubscriptionBox()
    let third = SubscriptionBox()
    let finished = completesOnAnotherThread {
      let a = subject.observe { event in
        log.append("a\(event)")
        if event == 1 { subject.send(2) }
      }
      let b = subject.observe { event in
        log.append("b\(event)")
        if event == 1 {
          late.subscription = subject.observe { log.append("d\($0)") }
          third.cancel()
          counts.append(subject.observerCount)
          subject.send(3)
        }
      }
      third.subscription = subject.observe { log.append("c\($0)") }
      subject.send(1)
      a.cancel()
      b.cancel()
      late.cancel()
    }
    #expect(finished)
    // c was cancelled by b before its turn for 1. d subscribed after 2 was committed, so
    // it does not receive 2, derived sources included: a derived value computes the
    // state each commit of its root made, and commits it in the root's order.
    if kind == .eventSourceMapped || kind == .eventSourceMerged {
      // Events stay messages: a derived event source commits 2 only when its source
      // delivers it (after the current pass), so d receives 2 as well, in order.
      #expect(log.values == ["a1", "b1", "a2", "b2", "d2", "a3", "b3", "d3"])
    } else {
      #expect(log.values == ["a1", "b1", "a2", "b2", "a3", "b3", "d3"])
    }
    #expect(counts.values == [3])
  }

  @Test func reentrancyAcrossTwoSourcesOnTwoThreadsDoesNotDeadlock() {
    let left = EventSource<Int>()
    let right = EventSource<Int>()
    let leftSeen = Counter()
    let rightSeen = Counter()
    let l = left.observe { event in
      leftSeen.increment()
      if event > 0 { right.send(-event) }
    }
    let r = right.observe { event in
      rightSeen.increment()
      if event > 0 { left.send(-event) }
    }
    #expect(
      onThreads { index in
        for step in 1...300 {
          if index % 2 == 0 { left.send(step) } else { right.send(step) }
        }
      })
    let perSide = (contentionThreads / 2) * 300
    #expect(leftSeen.wait(for: 2 * perSide))
    #expect(rightSeen.wait(for: 2 * perSide))
    l.cancel()
    r.cancel()
  }

  // MARK: - Actor variants

  @Test(arguments: ActorEventSubjectKind.allCases)
  func reentrancyActorHandlerMaySendSubscribeAndCancelWithoutDeadlockOrReordering(_ kind: ActorEventSubjectKind) async {
    let source = kind.make()
    let property = ActorProperty(0)
    let log = Recorder<String>()
    let own = SubscriptionBox()
    let late = SubscriptionBox()
    let subscription = await source.observe { event in
      log.append("a\(event)")
      switch event {
      case 1:
        await property.setValue(await property.value + 1)
        let added = await source.observe { event in log.append("late\(event)") }
        late.subscription = added
        await source.send(2)
      case 2:
        own.cancel()
        await source.send(3)
      default:
        break
      }
    }
    own.subscription = subscription
    await source.send(1)
    #expect(await settles { log.values.contains("late3") })
    let all = log.values
    #expect(all.filter { $0.hasPrefix("a") } == ["a1", "a2"], "in order, and not called after its own cancel")
    let late2and3 = all.filter { $0.hasPrefix("late") }
    if kind.coalesces {
      // State: 2 may wait and be replaced by 3 before the late handler runs.
      #expect(late2and3 == ["late2", "late3"] || late2and3 == ["late3"], "added during 1, so 1 is not delivered to it")
    } else {
      #expect(late2and3 == ["late2", "late3"], "added during 1, so 1 is not delivered to it")
    }
    #expect(await property.value == 1)
    late.cancel()
    #expect(await source.observerCount == 0)
  }
}
