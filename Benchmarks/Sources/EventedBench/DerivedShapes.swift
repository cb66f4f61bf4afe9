// Derived values at scale: rows that show how the cost of one write grows with the
// shape of the graph. D1: a combine of 1,000 roots, one written. D2: a balanced tree of
// pairs over 1,000 roots, one written. D3: a left-deep chain of 100 pairs, the top
// root written. D4: a chain of 1,000 maps. D5: a chain of 100 `flatMapLatest`s, each
// the target of the one above. Each observed by one subscriber; one operation is one
// write. OpenCombine has the same shape for the chain of maps.

import Evented
@preconcurrency import OpenCombine

func combineManyBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  guard case .evented = peer else { return .failure(Unavailable("n/a (Evented rows)")) }
  let sink = Sink()
  let roots = (0..<1_000).map { Property($0) }
  let subscription = roots.combineLatest().observe { values in sink.add(values[500]) }
  var next = 0
  return .success(
    .onThisThread(sink: sink, deliveries: 1, keepAlive: [roots, subscription]) { n in
      for _ in 0..<n {
        next &+= 1
        roots[500].value = next
      }
    })
}

func pairTreeBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  guard case .evented = peer else { return .failure(Unavailable("n/a (Evented rows)")) }
  let sink = Sink()
  let roots = (0..<1_000).map { Property($0) }
  var level = roots.map { $0.readOnly }
  while level.count > 1 {
    var next: [ReadOnlyProperty<Int>] = []
    var index = 0
    while index < level.count {
      if index + 1 < level.count {
        next.append(level[index].combineLatest(level[index + 1]).map { $0 &+ $1 })
      } else {
        next.append(level[index])
      }
      index += 2
    }
    level = next
  }
  let subscription = level[0].observe { sink.add($0) }
  var next = 0
  return .success(
    .onThisThread(sink: sink, deliveries: 1, keepAlive: [roots, level, subscription]) { n in
      for _ in 0..<n {
        next &+= 1
        roots[500].value = next
      }
    })
}

func pairChainBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  guard case .evented = peer else { return .failure(Unavailable("n/a (Evented rows)")) }
  let sink = Sink()
  let roots = (0...100).map { Property($0) }
  var top = roots[0].readOnly
  for root in roots.dropFirst() { top = top.combineLatest(root).map { $0 &+ $1 } }
  let subscription = top.observe { sink.add($0) }
  var next = 0
  return .success(
    .onThisThread(sink: sink, deliveries: 1, keepAlive: [roots, top, subscription]) { n in
      for _ in 0..<n {
        next &+= 1
        roots[100].value = next
      }
    })
}

func mapChainBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  let sink = Sink()
  switch peer {
  case .evented:
    let root = Property(0)
    var top = root.readOnly
    for _ in 0..<1_000 { top = top.map { $0 &+ 1 } }
    let subscription = top.observe { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [root, top, subscription]) { n in
        for _ in 0..<n {
          next &+= 1
          root.value = next
        }
      })
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(0)
    var top = subject.eraseToAnyPublisher()
    for _ in 0..<1_000 { top = top.map { $0 &+ 1 }.eraseToAnyPublisher() }
    let cancellable = top.sink { sink.add($0) }
    var next = 0
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [subject, cancellable]) { n in
        for _ in 0..<n {
          next &+= 1
          subject.value = next
        }
      })
  default:
    return .failure(Unavailable("n/a (no derived value)"))
  }
}

func switchChainBench(_ peer: Peer) -> Result<Bench, Unavailable> {
  guard case .evented = peer else { return .failure(Unavailable("n/a (Evented rows)")) }
  let sink = Sink()
  let root = Property(0)
  let selector = Property(true)
  var top = root.readOnly
  for _ in 0..<100 {
    let below = top
    top = selector.flatMapLatest { _ in below }
  }
  let subscription = top.observe { sink.add($0) }
  var next = 0
  return .success(
    .onThisThread(sink: sink, deliveries: 1, keepAlive: [root, selector, top, subscription]) { n in
      for _ in 0..<n {
        next &+= 1
        root.value = next
      }
    })
}
