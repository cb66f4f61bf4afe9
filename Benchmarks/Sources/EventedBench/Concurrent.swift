// Two threads sending at once (W5) and values through an AsyncSequence (W7).

import Dispatch
import Evented
import Foundation
import Observation
@preconcurrency import OpenCombine
import Synchronization

/// Runs `body(0)` and `body(1)` on two new threads released together; measures from
/// the release until both return.
func onTwoThreads(_ body: @escaping @Sendable (Int) -> Void) -> Sample {
  let ready = DispatchSemaphore(value: 0)
  let go = DispatchSemaphore(value: 0)
  let done = DispatchSemaphore(value: 0)
  for index in 0..<2 {
    let thread = Thread {
      ready.signal()
      go.wait()
      body(index)
      done.signal()
    }
    thread.start()
  }
  ready.wait()
  ready.wait()
  return measureProcess {
    go.signal()
    go.signal()
    done.wait()
    done.wait()
  }
}

/// Ten handlers; two threads send `n / 2` values each. One operation is one send.
func concurrentSendBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let subscribers = 10
  let sink = Sink()
  func bench(keepAlive: [Any], send: @escaping @Sendable (Int) -> Void) -> Bench {
    Bench(
      measure: { n in
        let half = max(1, n / 2)
        let sample = onTwoThreads { thread in
          let base = thread * half
          for i in base..<(base + half) { send(i) }
        }
        return Sample(wall: sample.wall * UInt64(n) / UInt64(2 * half), cpu: sample.cpu * UInt64(n) / UInt64(2 * half))
      }, keepAlive: keepAlive)
  }
  switch peer {
  case .floor:
    let source = FloorSource<Int>()
    for _ in 0..<subscribers { _ = source.subscribe { sink.touch($0) } }
    return .success(bench(keepAlive: [source]) { source.send($0) })
  case .evented:
    let source = EventSource<Int>()
    let subscriptions = (0..<subscribers).map { _ in source.observe { sink.touch($0) } }
    return .success(bench(keepAlive: [source, subscriptions]) { source.send($0) })
  case .eventedActor:
    return .success(actorConcurrentSendBench())
  case .openCombine:
    let subject = PassthroughSubject<Int, Never>()
    let cancellables = (0..<subscribers).map { _ in subject.sink { sink.touch($0) } }
    return .success(bench(keepAlive: [subject, cancellables]) { subject.send($0) })
  case .notificationCenter:
    let center = NotificationCenter()
    let tokens = (0..<subscribers).map { _ in
      center.addObserver(forName: benchNotification, object: nil, queue: nil) { sink.touch(receivedValue($0)) }
    }
    return .success(bench(keepAlive: [center, tokens]) { post(center, $0) })
  case .observation:
    return .failure(Unavailable("n/a (@Observable is not thread-safe)"))
  case .asyncStream:
    return .failure(Unavailable("n/a (async only)"))
  }
}

// MARK: - W7

let asyncValueCount = 1_000_000

/// Counts what a consumer task received, and the samples whose consumer never ended.
final class Received: Sendable {
  let count = Atomic<Int>(0)
  let stalls = Atomic<Int>(0)
}

/// How long a consumer may take to see the end of one sample before it counts as stalled.
let stallTimeout = 60.0

/// An `Observable` integer that may be written from any thread: a `Mutex` around the
/// storage, with the registrar called as the `@Observable` macro would.
final class SharedObservedInt: Observable, Sendable {
  private let registrar = ObservationRegistrar()
  private let storage = Mutex((value: 0, isDone: false))

  var value: Int {
    registrar.access(self, keyPath: \.value)
    return storage.withLock { $0.value }
  }

  var isDone: Bool {
    registrar.access(self, keyPath: \.isDone)
    return storage.withLock { $0.isDone }
  }

  func set(_ newValue: Int) {
    registrar.withMutation(of: self, keyPath: \.value) { storage.withLock { $0.value = newValue } }
  }

  func finish() {
    registrar.withMutation(of: self, keyPath: \.isDone) { storage.withLock { $0.isDone = true } }
  }
}

/// One sample of W7: `consume` runs as a task and returns how many values it got;
/// `produce` runs on a new thread once `consume` has called `ready`.
func asyncSample(
  consume: @escaping @Sendable (_ ready: @escaping @Sendable () -> Void) async -> Int,
  produce: @escaping @Sendable () -> Void,
  received: Received
) -> Sample {
  let ready = DispatchSemaphore(value: 0)
  let done = DispatchSemaphore(value: 0)
  return measureProcess {
    let consumer = Task.detached {
      let count = await consume { ready.signal() }
      received.count.store(count, ordering: .releasing)
      done.signal()
    }
    ready.wait()
    Thread { produce() }.start()
    if done.wait(timeout: .now() + stallTimeout) == .timedOut {
      // The end of the sequence never arrived: count everything as lost.
      received.stalls.add(1, ordering: .relaxed)
      received.count.store(0, ordering: .releasing)
      consumer.cancel()
    }
  }
}

/// One million values from a producer thread to one `for await` consumer; one
/// operation is one value.
func asyncBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let total = asyncValueCount
  let received = Received()
  func bench(_ measure: @escaping (Int) -> Sample) -> Bench {
    Bench(
      measure: measure, fixedCount: total,
      lost: { total - received.count.load(ordering: .acquiring) }, maxRepetitions: 9,
      note: {
        let stalls = received.stalls.load(ordering: .relaxed)
        return stalls == 0 ? nil : "\(stalls) sample(s) never ended (\(Int(stallTimeout)) s timeout)"
      })
  }
  switch peer {
  case .asyncStream:
    return .success(
      bench { _ in
        let (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .unbounded)
        return asyncSample(
          consume: { ready in
            ready()
            var count = 0
            for await _ in stream { count += 1 }
            return count
          },
          produce: {
            for i in 0..<total { continuation.yield(i) }
            continuation.finish()
          }, received: received)
      })
  case .floor:
    // The floor's closure array with one handler that feeds an AsyncStream.
    return .success(
      bench { _ in
        let (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .unbounded)
        let source = FloorSource<Int>()
        _ = source.subscribe { continuation.yield($0) }
        return asyncSample(
          consume: { ready in
            ready()
            var count = 0
            for await _ in stream { count += 1 }
            return count
          },
          produce: {
            for i in 0..<total { source.send(i) }
            continuation.finish()
          }, received: received)
      })
  case .evented:
    return .success(bench { _ in eventedEventsSample(actor: false, received: received) })
  case .eventedActor:
    return .success(bench { _ in eventedEventsSample(actor: true, received: received) })
  case .openCombine:
    return .success(
      bench { _ in
        let subject = PassthroughSubject<Int, Never>()
        return asyncSample(
          consume: { ready in
            var iterator = subject.values.makeAsyncIterator()
            ready()
            var count = 0
            while await iterator.next() != nil { count += 1 }
            return count
          },
          produce: {
            for i in 0..<total { subject.send(i) }
            subject.send(completion: .finished)
          }, received: received)
      })
  case .observation:
    return .success(
      bench { _ in
        let box = SharedObservedInt()
        let observations = Observations.untilFinished { box.isDone ? .finish : .next(box.value) }
        return asyncSample(
          consume: { ready in
            var iterator = observations.makeAsyncIterator()
            ready()
            var count = 0
            while await iterator.next() != nil { count += 1 }
            return count
          },
          produce: {
            for i in 1...total { box.set(i) }
            box.finish()
          }, received: received)
      })
  case .notificationCenter:
    return .failure(Unavailable("n/a (no async sequence here)"))
  }
}
