// W9: a write and a read of a property, with no tracking scope (W9) and with a
// `withObservationTracking` scope registered before each write (W9t), beside an
// `@Observable` class behind a `Mutex`, the way a thread-safe model is written with
// Observation alone.

import Evented
import Observation
import Synchronization

/// An `@Observable` integer; `LockedObservedInt` guards it.
@Observable final class ObservedValue {
  var value = 0
}

/// An `@Observable` class behind a `Mutex`: reads and writes take the lock; the
/// registrar's `willSet` and `didSet` run under it, as the macro's setter calls them.
final class LockedObservedInt: Sendable {
  let model = Mutex(ObservedValue())

  var value: Int {
    get { model.withLock { $0.value } }
    set { model.withLock { $0.value = newValue } }
  }
}

func observationBench(_ peer: Peer, tracked: Bool) -> Result<Bench, Unavailable> {
  let sink = Sink()
  var next = 0
  switch peer {
  case .floor where !tracked:
    let property = FloorProperty(0)
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property]) { n in
        for _ in 0..<n {
          next &+= 1
          property.value = next
          sink.add(property.value)
        }
      })
  case .evented:
    let property = Property(0)
    return .success(
      .onThisThread(sink: sink, deliveries: tracked ? 2 : 1, keepAlive: [property]) { n in
        for _ in 0..<n {
          if tracked {
            withObservationTracking {
              _ = property.value
            } onChange: {
              sink.add(0)
            }
          }
          next &+= 1
          property.value = next
          sink.add(property.value)
        }
      })
  case .observation:
    let box = LockedObservedInt()
    return .success(
      .onThisThread(sink: sink, deliveries: tracked ? 2 : 1, keepAlive: [box]) { n in
        for _ in 0..<n {
          if tracked {
            withObservationTracking {
              _ = box.value
            } onChange: {
              sink.add(0)
            }
          }
          next &+= 1
          box.value = next
          sink.add(box.value)
        }
      })
  default:
    return .failure(Unavailable("n/a"))
  }
}
