// Derived values. W1c: a write observed through `map`, against the same write observed
// directly (W1b) and against a hand-written map in the floor's subscriber. W1d: a write
// observed through a diamond (two maps of one property, combined). W1t: two writes in
// one transaction observed through `combineLatest`, against the same two writes made
// plainly (W1t-plain). W1t-10: ten writes to one property in one transaction, observed
// through `map` (the peers, with no transaction, deliver all ten). W1r: reading an unchanged derived value, against reading the
// property itself (W1r-plain).

import Evented
@preconcurrency import OpenCombine

/// A value from one of the two publishers that `sinkLatest` combines.
enum Side {
  case first(Int)
  case second(Int)
}

/// Calls `handler` with the latest values of `first` and `second` each time either
/// sends. OpenCombine 0.14.0 has no `combineLatest`; this is one made of its
/// operators: the two merged (`flatMap` over both) and paired by `scan`. Both are
/// expected to send a value on subscription, as a `CurrentValueSubject` does.
func sinkLatest<Upstream: Publisher>(
  _ first: Upstream, _ second: Upstream, _ handler: @escaping (Int, Int) -> Void
) -> AnyCancellable where Upstream.Output == Int, Upstream.Failure == Never {
  [first.map(Side.first), second.map(Side.second)].publisher
    .flatMap { $0 }
    .scan((0, 0)) { pair, side in
      switch side {
      case .first(let value): (value, pair.1)
      case .second(let value): (pair.0, value)
      }
    }
    .sink { handler($0.0, $0.1) }
}

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

/// One property, two maps of it, combined: one operation is one write. The floor
/// computes both maps in its subscriber; OpenCombine delivers twice per write (the
/// first time with one side updated).
func diamondWriteBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let property = FloorProperty(0)
    property.subscribe { sink.add(($0 &* 2) &+ ($0 &+ 1)) }
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
    let diamond = property.map { $0 &* 2 }.combineLatest(property.map { $0 &+ 1 })
    let subscription = diamond.observe { pair in sink.add(pair.0 &+ pair.1) }
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
    let cancellable = sinkLatest(subject.map { $0 &* 2 }, subject.map { $0 &+ 1 }) { sink.add($0 &+ $1) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 2, keepAlive: [subject, cancellable]) { n in
        for _ in 0..<n {
          next &+= 1
          subject.value = next
        }
      })
  case .eventedActor, .notificationCenter, .observation, .asyncStream:
    return .failure(Unavailable("n/a (no derived value)"))
  }
}

/// Two properties combined: one operation writes both, in one transaction (delivered
/// once) or plainly (delivered twice). The floor and OpenCombine have no transaction
/// and write twice in both rows; the floor's subscribers read the other side.
func pairWriteBench(_ peer: Peer, inTransaction: Bool) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let x = FloorProperty(0)
    let y = FloorProperty(0)
    x.subscribe { sink.add($0 &+ y.value) }
    y.subscribe { sink.add(x.value &+ $0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 2, keepAlive: [x, y]) { n in
        for _ in 0..<n {
          next &+= 1
          x.value = next
          y.value = next
        }
      })
  case .evented:
    let x = Property(0)
    let y = Property(0)
    let subscription = x.combineLatest(y).observe { pair in sink.add(pair.0 &+ pair.1) }
    var next = 0
    if inTransaction {
      return .success(
        .onThisThread(sink: sink, deliveries: 1, keepAlive: [x, y, subscription]) { n in
          for _ in 0..<n {
            next &+= 1
            // A constant for the closure: a captured `var` would add the language's
            // exclusivity checks to what is measured.
            let value = next
            transaction {
              x.value = value
              y.value = value
            }
          }
        })
    }
    return .success(
      .onThisThread(sink: sink, deliveries: 2, keepAlive: [x, y, subscription]) { n in
        for _ in 0..<n {
          next &+= 1
          x.value = next
          y.value = next
        }
      })
  case .openCombine:
    let x = CurrentValueSubject<Int, Never>(0)
    let y = CurrentValueSubject<Int, Never>(0)
    let cancellable = sinkLatest(x, y) { sink.add($0 &+ $1) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 2, keepAlive: [x, y, cancellable]) { n in
        for _ in 0..<n {
          next &+= 1
          x.send(next)
          y.send(next)
        }
      })
  case .eventedActor, .notificationCenter, .observation, .asyncStream:
    return .failure(Unavailable("n/a (no derived value)"))
  }
}

/// Ten writes to one property observed through a map: in one transaction for Evented,
/// which delivers once; one operation is the ten writes.
func tenWritesBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let property = FloorProperty(0)
    property.subscribe { sink.add($0 &* 2) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 10, keepAlive: [property]) { n in
        for _ in 0..<n {
          for _ in 0..<10 {
            next &+= 1
            property.value = next
          }
        }
      })
  case .evented:
    let property = Property(0)
    let subscription = property.map { $0 &* 2 }.observe { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property, subscription]) { n in
        for _ in 0..<n {
          // A local counter in the closure, as above.
          let first = next
          transaction {
            var value = first
            for _ in 0..<10 {
              value &+= 1
              property.value = value
            }
          }
          next &+= 10
        }
      })
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(0)
    let cancellable = subject.map { $0 &* 2 }.sink { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 10, keepAlive: [subject, cancellable]) { n in
        for _ in 0..<n {
          for _ in 0..<10 {
            next &+= 1
            subject.send(next)
          }
        }
      })
  case .eventedActor, .notificationCenter, .observation, .asyncStream:
    return .failure(Unavailable("n/a (no derived value)"))
  }
}

/// Reads of a value while its property does not change: one operation is one read of
/// `map { $0 &+ 1 }` (derived) or of the property itself. The floor applies the map
/// to its value by hand; OpenCombine keeps the map's output in a second subject.
func derivedReadBench(_ peer: Peer, derived: Bool) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .floor:
    let property = FloorProperty(0)
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property]) { n in
        if derived {
          for _ in 0..<n { sink.add(property.value &+ 1) }
        } else {
          for _ in 0..<n { sink.add(property.value) }
        }
      })
  case .evented:
    let property = Property(0)
    let mapped = property.map { $0 &+ 1 }
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property, mapped]) { n in
        if derived {
          for _ in 0..<n { sink.add(mapped.value) }
        } else {
          for _ in 0..<n { sink.add(property.value) }
        }
      })
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(0)
    let mapped = CurrentValueSubject<Int, Never>(1)
    let cancellable = subject.map { $0 &+ 1 }.subscribe(mapped)
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [subject, mapped, cancellable]) { n in
        if derived {
          for _ in 0..<n { sink.add(mapped.value) }
        } else {
          for _ in 0..<n { sink.add(subject.value) }
        }
      })
  case .eventedActor, .notificationCenter, .observation, .asyncStream:
    return .failure(Unavailable("n/a (no derived value)"))
  }
}
