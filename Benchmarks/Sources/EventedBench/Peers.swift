// The libraries compared, and the workloads each one can run.

import Evented
import Foundation
import Observation
@preconcurrency import OpenCombine

enum Peer: String, CaseIterable, Codable {
  case floor
  case evented
  case eventedActor = "evented-actor"
  case openCombine = "opencombine"
  case notificationCenter = "notificationcenter"
  case observation
  case asyncStream = "asyncstream"

  var title: String {
    switch self {
    case .floor: "floor"
    case .evented: "Evented"
    case .eventedActor: "Evented actor"
    case .openCombine: "OpenCombine"
    case .notificationCenter: "NotificationCenter"
    case .observation: "Observation"
    case .asyncStream: "AsyncStream"
    }
  }
}

/// An `@Observable` integer, for the Observation module's single-threaded rows.
@Observable final class ObservedInt: @unchecked Sendable {
  // @unchecked Sendable: used from one thread at a time only.
  var value: Int

  init(_ value: Int) {
    self.value = value
  }
}

/// Observes every change of `box` with `withObservationTracking`, registering again
/// after each change (the tracking fires once per registration).
func trackEveryChange(_ box: ObservedInt, _ sink: Sink) {
  withObservationTracking {
    _ = box.value
  } onChange: {
    sink.add(0)
    trackEveryChange(box, sink)
  }
}

let benchNotification = Notification.Name("EventedBench.value")

/// Posts `value` in the notification's user info, as code passing a value does.
@inline(__always)
func post(_ center: NotificationCenter, _ value: Int) {
  center.post(name: benchNotification, object: nil, userInfo: ["v": value])
}

@inline(__always)
func receivedValue(_ note: Notification) -> Int {
  note.userInfo?["v"] as? Int ?? -1
}

// MARK: - Sending to synchronous subscribers (W1, W2 and its scaling row)

/// `subscribers` handlers; one operation is one send.
func sendBench(_ peer: Peer, subscribers: Int) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let source = FloorSource<Int>()
    for _ in 0..<subscribers { _ = source.subscribe { sink.add($0) } }
    return .success(
      .onThisThread(sink: sink, deliveries: subscribers, keepAlive: [source]) { n in
        for i in 0..<n { source.send(i) }
      })
  case .evented:
    let source = EventSource<Int>()
    let subscriptions = (0..<subscribers).map { _ in source.observe { sink.add($0) } }
    return .success(
      .onThisThread(sink: sink, deliveries: subscribers, keepAlive: [source, subscriptions]) { n in
        for i in 0..<n { source.send(i) }
      })
  case .eventedActor:
    return .success(actorSendBench(subscribers: subscribers))
  case .openCombine:
    let subject = PassthroughSubject<Int, Never>()
    let cancellables = (0..<subscribers).map { _ in subject.sink { sink.add($0) } }
    return .success(
      .onThisThread(sink: sink, deliveries: subscribers, keepAlive: [subject, cancellables]) { n in
        for i in 0..<n { subject.send(i) }
      })
  case .notificationCenter:
    let center = NotificationCenter()
    let tokens = (0..<subscribers).map { _ in
      center.addObserver(forName: benchNotification, object: nil, queue: nil) { sink.add(receivedValue($0)) }
    }
    return .success(
      .onThisThread(sink: sink, deliveries: subscribers, keepAlive: [center, tokens]) { n in
        for i in 0..<n { post(center, i) }
      })
  case .observation:
    let box = ObservedInt(0)
    for _ in 0..<subscribers { trackEveryChange(box, sink) }
    var next = 1
    return .success(
      .onThisThread(sink: sink, deliveries: subscribers, keepAlive: [box]) { n in
        for _ in 0..<n {
          next &+= 1
          box.value = next
        }
      })
  case .asyncStream:
    return .failure(Unavailable("n/a (async only)"))
  }
}

// MARK: - Writing a new value to a property with one subscriber (W1b)

func writeBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let property = FloorProperty(0)
    property.subscribe { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property]) { n in
        for _ in 0..<n {
          next &+= 1
          property.value = next
        }
      })
  case .evented:
    let property = Property(0)
    let subscription = property.observe { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property, subscription]) { n in
        for _ in 0..<n {
          next &+= 1
          property.value = next
        }
      })
  case .eventedActor:
    return .success(actorWriteBench())
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(0)
    let cancellable = subject.sink { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [subject, cancellable]) { n in
        for _ in 0..<n {
          next &+= 1
          subject.value = next
        }
      })
  case .notificationCenter:
    return .failure(Unavailable("n/a (no stored value)"))
  case .observation:
    return sendBench(.observation, subscribers: 1)
  case .asyncStream:
    return .failure(Unavailable("n/a (async only)"))
  }
}

// MARK: - Subscribing and cancelling with others present (W3 and its scaling row)

func subscribeCancelBench(_ peer: Peer, others: Int) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let source = FloorSource<Int>()
    for _ in 0..<others { _ = source.subscribe { sink.add($0) } }
    return .success(
      .onThisThread(sink: nil, deliveries: 0, keepAlive: [source]) { n in
        for _ in 0..<n {
          let id = source.subscribe { sink.add($0) }
          source.cancel(id)
        }
      })
  case .evented:
    let source = EventSource<Int>()
    let subscriptions = (0..<others).map { _ in source.observe { sink.add($0) } }
    return .success(
      .onThisThread(sink: nil, deliveries: 0, keepAlive: [source, subscriptions]) { n in
        for _ in 0..<n {
          let subscription = source.observe { sink.add($0) }
          subscription.cancel()
        }
      })
  case .eventedActor:
    return .success(actorSubscribeCancelBench(others: others))
  case .openCombine:
    let subject = PassthroughSubject<Int, Never>()
    let cancellables = (0..<others).map { _ in subject.sink { sink.add($0) } }
    return .success(
      .onThisThread(sink: nil, deliveries: 0, keepAlive: [subject, cancellables]) { n in
        for _ in 0..<n {
          let cancellable = subject.sink { sink.add($0) }
          cancellable.cancel()
        }
      })
  case .notificationCenter:
    let center = NotificationCenter()
    let tokens = (0..<others).map { _ in
      center.addObserver(forName: benchNotification, object: nil, queue: nil) { sink.add(receivedValue($0)) }
    }
    return .success(
      .onThisThread(sink: nil, deliveries: 0, keepAlive: [center, tokens]) { n in
        for _ in 0..<n {
          let token = center.addObserver(forName: benchNotification, object: nil, queue: nil) {
            sink.add(receivedValue($0))
          }
          center.removeObserver(token)
        }
      })
  case .observation:
    return .failure(Unavailable("n/a (no cancel)"))
  case .asyncStream:
    return .failure(Unavailable("n/a (async only)"))
  }
}

// MARK: - Writing an equal value with duplicates skipped, one subscriber (W4)

func equalWriteBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let property = FloorProperty(5)
    property.subscribe { sink.add($0) }
    return .success(
      .onThisThread(sink: sink, deliveries: 0, keepAlive: [property]) { n in
        for _ in 0..<n { property.value = 5 }
      })
  case .evented:
    let property = Property(5)
    let subscription = property.observe { sink.add($0) }
    return .success(
      .onThisThread(sink: sink, deliveries: 0, keepAlive: [property, subscription]) { n in
        for _ in 0..<n { property.value = 5 }
      })
  case .eventedActor:
    return .success(actorEqualWriteBench())
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(5)
    let cancellable = subject.removeDuplicates().sink { sink.add($0) }
    return .success(
      .onThisThread(sink: sink, deliveries: 0, keepAlive: [subject, cancellable]) { n in
        for _ in 0..<n { subject.value = 5 }
      })
  case .notificationCenter:
    return .failure(Unavailable("n/a (no duplicate skipping)"))
  case .observation:
    let box = ObservedInt(5)
    trackEveryChange(box, sink)
    return .success(
      .onThisThread(sink: sink, deliveries: 0, keepAlive: [box]) { n in
        for _ in 0..<n { box.value = 5 }
      })
  case .asyncStream:
    return .failure(Unavailable("n/a (async only)"))
  }
}

struct Unavailable: Error {
  let reason: String
  init(_ reason: String) { self.reason = reason }
}
