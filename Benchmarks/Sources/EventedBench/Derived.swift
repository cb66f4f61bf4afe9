// W1c: a write observed through a derived value (`map`), against the same write
// observed directly (W1b) and against a hand-written map in the floor's subscriber.

import Evented
@preconcurrency import OpenCombine

func mapWriteBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let property = FloorProperty(0)
    property.subscribe { sink.add($0 &* 2) }
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
    let subscription = property.map { $0 &* 2 }.observe { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property, subscription]) { n in
        for _ in 0..<n {
          next &+= 1
          property.value = next
        }
      })
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(0)
    let cancellable = subject.map { $0 &* 2 }.sink { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [subject, cancellable]) { n in
        for _ in 0..<n {
          next &+= 1
          subject.value = next
        }
      })
  case .eventedActor, .notificationCenter, .observation, .asyncStream:
    return .failure(Unavailable("n/a (no derived value)"))
  }
}
