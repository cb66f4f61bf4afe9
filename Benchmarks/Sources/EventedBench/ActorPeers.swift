// Evented's actor variant, and the AsyncSequences of both variants. Actor handlers run
// in tasks of their own, after `send` returns, so a sample ends when the last expected
// delivery has happened, not when the last send returns.

import Dispatch
import Evented
import Foundation
import Synchronization

/// Runs `body` in a detached task and blocks the calling thread until it returns.
func runBlocking(_ body: @escaping @Sendable () async -> Void) {
  let done = DispatchSemaphore(value: 0)
  Task.detached {
    await body()
    done.signal()
  }
  done.wait()
}

/// Counts deliveries made from any task, and wakes the measuring thread when a target
/// count is reached.
final class DeliveryCounter: Sendable {
  private let count = Atomic<Int>(0)
  private let target = Atomic<Int>(Int.max)
  private let reached = DispatchSemaphore(value: 0)

  func add(_ deliveries: Int = 1) {
    let old = count.wrappingAdd(deliveries, ordering: .acquiringAndReleasing).oldValue
    let target = target.load(ordering: .acquiring)
    if old < target && old + deliveries >= target { reached.signal() }
  }

  var value: Int { count.load(ordering: .acquiring) }

  /// Runs `work` (in a detached task) and waits until `expected` more deliveries.
  func measure(expecting expected: Int, _ work: @escaping @Sendable () async -> Void) -> Sample {
    target.store(count.load(ordering: .acquiring) + expected, ordering: .releasing)
    return measureProcess {
      Task.detached { await work() }
      reached.wait()
    }
  }

  /// Waits until at least `expected` deliveries have happened in all.
  func waitFor(_ expected: Int) {
    while value < expected { usleep(100) }
  }
}

/// `subscribers` async handlers; one operation is one send.
func actorSendBench(subscribers: Int) -> Bench {
  let counter = DeliveryCounter()
  let source = ActorEventSource<Int>()
  nonisolated(unsafe) var subscriptions: [Subscription] = []
  runBlocking {
    var made: [Subscription] = []
    for _ in 0..<subscribers { made.append(await source.observe { _ in counter.add() }) }
    subscriptions = made
  }
  return Bench(
    measure: { n in
      counter.measure(expecting: n * subscribers) {
        for i in 0..<n { await source.send(i) }
      }
    }, keepAlive: [source, subscriptions])
}

/// A property with one async handler; one operation is one write of a new value. The
/// handler skips to the newest value when it is behind, so a delivery counts for every
/// write up to the value it received, and a sample ends when the last one is received.
func actorWriteBench() -> Bench {
  let counter = DeliveryCounter()
  let property = ActorProperty(0)
  let received = Atomic<Int>(0)
  nonisolated(unsafe) var subscription: Subscription?
  runBlocking {
    subscription = await property.observe { value in
      counter.add(Swift.max(1, value - received.exchange(value, ordering: .relaxed)))
    }
  }
  counter.waitFor(1)  // the replay of the current value
  let next = Atomic<Int>(0)
  return Bench(
    measure: { n in
      counter.measure(expecting: n) {
        for _ in 0..<n { await property.setValue(next.wrappingAdd(1, ordering: .relaxed).newValue) }
      }
    }, keepAlive: [property, subscription as Any])
}

/// Subscribing and cancelling with `others` present; one operation is one pair.
func actorSubscribeCancelBench(others: Int) -> Bench {
  let source = ActorEventSource<Int>()
  nonisolated(unsafe) var subscriptions: [Subscription] = []
  runBlocking {
    var made: [Subscription] = []
    for _ in 0..<others { made.append(await source.observe { _ in }) }
    subscriptions = made
  }
  return Bench(
    measure: { n in
      measureProcess {
        runBlocking {
          for _ in 0..<n {
            let subscription = await source.observe { _ in }
            subscription.cancel()
          }
        }
      }
    }, keepAlive: [source, subscriptions])
}

/// Writing the current value again with duplicates skipped; one async handler.
func actorEqualWriteBench() -> Bench {
  let counter = DeliveryCounter()
  let property = ActorProperty(5)
  nonisolated(unsafe) var subscription: Subscription?
  runBlocking { subscription = await property.observe { _ in counter.add() } }
  counter.waitFor(1)
  return Bench(
    measure: { n in
      measureProcess {
        runBlocking {
          for _ in 0..<n { await property.setValue(5) }
        }
      }
    }, keepAlive: [property, subscription as Any])
}

/// Ten async handlers; two tasks send `n / 2` values each.
func actorConcurrentSendBench() -> Bench {
  let subscribers = 10
  let counter = DeliveryCounter()
  let source = ActorEventSource<Int>()
  nonisolated(unsafe) var subscriptions: [Subscription] = []
  runBlocking {
    var made: [Subscription] = []
    for _ in 0..<subscribers { made.append(await source.observe { _ in counter.add() }) }
    subscriptions = made
  }
  return Bench(
    measure: { n in
      let half = max(1, n / 2)
      let sample = counter.measure(expecting: 2 * half * subscribers) {
        await withTaskGroup(of: Void.self) { group in
          for thread in 0..<2 {
            group.addTask {
              for i in (thread * half)..<(thread * half + half) { await source.send(i) }
            }
          }
        }
      }
      return Sample(wall: sample.wall * UInt64(n) / UInt64(2 * half), cpu: sample.cpu * UInt64(n) / UInt64(2 * half))
    }, keepAlive: [source, subscriptions])
}

/// W7 for Evented: a producer thread sends into an `EventSource` (or a task into an
/// `ActorEventSource`); the consumer iterates `events()`. A negative value ends it.
func eventedEventsSample(actor: Bool, received: Received) -> Sample {
  let total = asyncValueCount
  if actor {
    let source = ActorEventSource<Int>()
    nonisolated(unsafe) var events: AsyncEvents<Int>?
    runBlocking { events = await source.events() }
    let sequence = events!
    return asyncSample(
      consume: { ready in
        ready()
        var count = 0
        for await value in sequence {
          if value < 0 { break }
          count += 1
        }
        return count
      },
      produce: {
        runBlocking {
          for i in 0..<total { await source.send(i) }
          await source.send(-1)
        }
      }, received: received)
  }
  let source = EventSource<Int>()
  let sequence = source.events()
  return asyncSample(
    consume: { ready in
      ready()
      var count = 0
      for await value in sequence {
        if value < 0 { break }
        count += 1
      }
      return count
    },
    produce: {
      for i in 0..<total { source.send(i) }
      source.send(-1)
    }, received: received)
}
