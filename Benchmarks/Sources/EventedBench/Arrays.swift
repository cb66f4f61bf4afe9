// Arrays (A1, A2): ArrayProperty's changesets against a Property<[Int]> that is
// written the same arrays. The floor is a Mutex-guarded property of `[Int]` written
// the same arrays, so every row of a pair shares its scale.

import Evented

/// The number of elements of every array in these rows.
let arrayBenchCount = 1_000

/// The array the rows start from: 0, 1, 2, …
let arrayBenchBase = Array(0..<arrayBenchCount)

/// `arrayBenchBase` with 10 changes: 4 removals, 4 insertions, 2 replacements.
let arrayBenchChanged: [Int] = {
  var array = arrayBenchBase
  for index in [900, 700, 300, 100] { array.remove(at: index) }
  for index in [50, 250, 450, 650] { array.insert(-index, at: index) }
  array[500] = -1
  array[800] = -2
  return array
}()

/// Whether `peer` runs the array rows, and why not if it does not.
private func arrayPeer(_ peer: Peer) -> Unavailable? {
  switch peer {
  case .floor, .evented: nil
  default: Unavailable("n/a (Evented rows)")
  }
}

/// One operation appends an Int and the next removes it again, so the array stays at
/// 1,000 elements; every mutation is delivered to one subscriber. With `changesets`,
/// Evented's peer is an `ArrayProperty`; without, a `Property<[Int]>` changed by
/// `modify`.
func arrayAppendBench(_ peer: Peer, changesets: Bool) -> Result<Bench, Unavailable> {
  if let reason = arrayPeer(peer) { return .failure(reason) }
  let sink = Sink()
  if peer == .floor {
    let property = FloorProperty(arrayBenchBase)
    property.subscribe { sink.add($0.count) }
    return .success(
      .onThisThread(sink: sink, deliveries: 2, keepAlive: [property]) { n in
        for i in 0..<n {
          var next = property.value
          next.append(i)
          property.value = next
          next = property.value
          next.removeLast()
          property.value = next
        }
      })
  }
  if changesets {
    let property = ArrayProperty(arrayBenchBase)
    let subscription = property.observeChanges { sink.add($0.changes.count) }
    return .success(
      .onThisThread(sink: sink, deliveries: 2, keepAlive: [property, subscription]) { n in
        for i in 0..<n {
          property.append(i)
          property.removeLast()
        }
      })
  }
  let property = Property(arrayBenchBase)
  let subscription = property.observeChanges { sink.add($0.newValue.count) }
  return .success(
    .onThisThread(sink: sink, deliveries: 2, keepAlive: [property, subscription]) { n in
      for i in 0..<n {
        property.modify { $0.append(i) }
        property.modify { $0.removeLast() }
      }
    })
}

/// One operation assigns a whole array of 1,000 Ints that differs from the current one
/// in 10 changes (alternating between two arrays); one subscriber. With `changesets`,
/// Evented's peer is an `ArrayProperty` (a minimal diff, moves inferred); without, a
/// `Property<[Int]>`.
func arrayAssignBench(_ peer: Peer, changesets: Bool) -> Result<Bench, Unavailable> {
  if let reason = arrayPeer(peer) { return .failure(reason) }
  let sink = Sink()
  let arrays = [arrayBenchChanged, arrayBenchBase]
  // Counts on across samples, so that no assignment repeats the current array.
  var next = 0
  if peer == .floor {
    let property = FloorProperty(arrayBenchBase)
    property.subscribe { sink.add($0.count) }
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property]) { n in
        for _ in 0..<n {
          property.value = arrays[next & 1]
          next &+= 1
        }
      })
  }
  if changesets {
    let property = ArrayProperty(arrayBenchBase)
    let subscription = property.observeChanges { sink.add($0.changes.count) }
    return .success(
      .onThisThread(sink: sink, deliveries: 1, keepAlive: [property, subscription]) { n in
        for _ in 0..<n {
          property.value = arrays[next & 1]
          next &+= 1
        }
      })
  }
  let property = Property(arrayBenchBase)
  let subscription = property.observeChanges { sink.add($0.newValue.count) }
  return .success(
    .onThisThread(sink: sink, deliveries: 1, keepAlive: [property, subscription]) { n in
      for _ in 0..<n {
        property.value = arrays[next & 1]
        next &+= 1
      }
    })
}
