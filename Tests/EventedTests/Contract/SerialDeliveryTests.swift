// Promise 3: one subscription's handler never runs concurrently with itself, whether
// events come from many threads at once, from a handler, or through a concurrent queue.

import Dispatch
import Synchronization
import Testing

@testable import Evented

@Suite struct SerialDeliveryContract {
  static let deliveries: [Delivery] = [
    .synchronous,
    .queue(DispatchQueue(label: "serial-delivery")),
    .queue(DispatchQueue(label: "serial-delivery-concurrent", attributes: .concurrent)),
  ]

  @Test(arguments: EventSubjectKind.allCases, deliveries)
  func serialDeliveryHandlerNeverRunsConcurrentlyWithItself(_ kind: EventSubjectKind, _ delivery: Delivery) {
    let subject = kind.make()
    let detectors = (0..<3).map { _ in OverlapDetector() }
    let lasts = detectors.map { _ in Monitor(0) }
    let received = Counter()
    let subscriptions = zip(detectors, lasts).map { detector, last in
      subject.observe(on: delivery) { event in
        detector.invocation { spin() }
        last.withLock { $0 = event }
        received.increment()
      }
    }
    let perThread = 250
    #expect(
      onThreads { index in
        for step in 0..<perThread { subject.send(index * perThread + step) }
      })
    if kind.isState && delivery.queue != nil {
      // A state observer on a queue receives the newest state, not every one: it ends
      // on the final write.
      subject.send(-7)
      for last in lasts { #expect(last.wait { $0 == -7 }) }
      for detector in detectors { #expect(detector.overlapCount == 0) }
    } else {
      let total = contentionThreads * perThread * detectors.count
      #expect(received.wait(for: total))
      for detector in detectors {
        #expect(detector.overlapCount == 0)
        #expect(detector.callCount == contentionThreads * perThread)
      }
    }
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test(arguments: deliveries)
  func serialDeliveryHoldsForAPropertyWrittenFromManyThreads(_ delivery: Delivery) {
    let property = Property(0)
    let detector = OverlapDetector()
    let last = Monitor(-1)
    let subscription = property.observe(on: delivery) { value in
      detector.invocation { spin() }
      last.withLock { $0 = value }
    }
    #expect(
      onThreads { _ in
        for _ in 0..<250 { property.modify { $0 += 1 } }
      })
    let final = contentionThreads * 250
    #expect(last.wait { $0 == final })
    #expect(detector.overlapCount == 0)
    subscription.cancel()
  }

  @Test func serialDeliveryHoldsWhenAHandlerSendsWhileOthersSend() {
    let source = EventSource<Int>()
    let detector = OverlapDetector()
    let received = Counter()
    let subscription = source.observe { event in
      detector.invocation {
        if event >= 0 { source.send(-1) }
        spin()
      }
      received.increment()
    }
    #expect(
      onThreads { index in
        for step in 0..<200 { source.send(index * 200 + step) }
      })
    #expect(received.wait(for: 2 * contentionThreads * 200))
    #expect(detector.overlapCount == 0)
    subscription.cancel()
  }

  // MARK: - Actor variants

  @Test(arguments: ActorEventSubjectKind.allCases)
  func serialDeliveryActorHandlerNeverRunsConcurrentlyWithItself(_ kind: ActorEventSubjectKind) async {
    let source = kind.make()
    let probe = OverlapDetector()
    let seen = Recorder<Int>()
    let subscription = await source.observe { event in
      probe.enter()
      for _ in 0..<3 { await Task.yield() }
      seen.append(event)
      probe.leave()
    }
    await withTaskGroup(of: Void.self) { group in
      for sender in 0..<4 {
        group.addTask {
          for event in 0..<100 { await source.send(sender * 1000 + event) }
        }
      }
    }
    await source.send(-1)
    if kind.coalesces {
      // State: the handler skips to the newest value; it ends on the last one written.
      #expect(await settles { seen.values.last == -1 })
    } else {
      #expect(await settles { seen.count == 401 })
    }
    #expect(probe.overlapCount == 0)
    subscription.cancel()
  }
}
