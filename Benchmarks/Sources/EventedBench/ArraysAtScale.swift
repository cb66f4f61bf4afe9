// Arrays at scale (S rows): whole-array assignment, bulk insertion and appends on large
// arrays, each run a few times as one operation (seconds, not nanoseconds). Assignment
// rows stand beside the standard library's `CollectionDifference` (with moves
// inferred) and swift-collections' `OrderedSet.difference` (both sets built from the
// arrays inside the measured time, since an assignment starts from arrays); the
// mutation rows beside a `Mutex<[Int]>` doing the same to a plain array.
//
// `--scale` prints the table; `--scale-profile ID --peer NAME` runs one peer of one row
// once for callgrind, and `--peer setup` runs only what precedes the measured part, so
// that the difference of the two totals is the operation's instructions.

import Evented
import Foundation
import OrderedCollections
import Synchronization

/// One peer of one row: `prepare` builds what the operation needs (not measured) and
/// returns the operation, which returns a note for the table, if any.
struct ScalePeer: Sendable {
  let name: String
  let prepare: @Sendable () -> () -> String?
}

struct ScaleRow: Sendable {
  let id: String
  let title: String
  let peers: [ScalePeer]
}

/// `0..<count` and the array each assignment row assigns over it.
private func assignment(_ kind: String, count: Int) -> (old: [Int], new: [Int]) {
  let old = Array(0..<count)
  var random = BenchRandom(seed: UInt64(count))
  switch kind {
  case "changed": return (old, Array(count..<(2 * count)))
  case "shuffled": return (old, old.shuffled(using: &random))
  default:
    // 10 changes: 4 removals, 4 insertions, 2 replacements, spread over the array.
    var new = old
    for fraction in [9, 7, 3, 1] { new.remove(at: count * fraction / 10) }
    for fraction in [1, 3, 5, 7] { new.insert(-(count * fraction / 10) - 1, at: count * fraction / 10 + 1) }
    new[count / 2 + 3] = -1
    new[count * 4 / 5 + 3] = -2
    return (old, new)
  }
}

/// Whether assignment rows read `count` concurrently (not while profiling: callgrind
/// would count the reader's instructions too).
let readsConcurrently = Atomic(true)

/// Runs `body` while another thread reads `count` over and over; returns the longest
/// single read, in milliseconds.
private func longestCountRead(of property: ArrayProperty<Int>, during body: () -> Void) -> Double {
  guard readsConcurrently.load(ordering: .relaxed) else {
    body()
    return 0
  }
  let stop = Atomic(false)
  let longest = Atomic(0)
  let started = DispatchSemaphore(value: 0)
  let done = DispatchSemaphore(value: 0)
  let reader = Thread {
    started.signal()
    while !stop.load(ordering: .acquiring) {
      let start = now(CLOCK_MONOTONIC)
      let count = property.count
      let elapsed = Int(now(CLOCK_MONOTONIC) - start)
      if count < 0 { print("trap") }
      if elapsed > longest.load(ordering: .relaxed) { longest.store(elapsed, ordering: .relaxed) }
    }
    done.signal()
  }
  reader.start()
  started.wait()
  body()
  stop.store(true, ordering: .releasing)
  done.wait()
  return Double(longest.load(ordering: .acquiring)) / 1e6
}

/// The peers of an assignment row.
private func assignmentPeers(_ kind: String, count: Int, collectionDifference: Bool) -> [ScalePeer] {
  var peers = [
    ScalePeer(name: "Evented") {
      let (old, new) = assignment(kind, count: count)
      let property = ArrayProperty(old)
      let changes = Atomic(0)
      let subscription = property.observeChanges { changes.add($0.changes.count, ordering: .relaxed) }
      return {
        let longest = longestCountRead(of: property) { property.value = new }
        subscription.cancel()
        let changeCount = changes.load(ordering: .relaxed)
        return "\(changeCount) changes; longest concurrent count \(String(format: "%.2f", longest)) ms"
      }
    },
    ScalePeer(name: "OrderedSet.difference") {
      let (old, new) = assignment(kind, count: count)
      return {
        let difference = OrderedSet(new).difference(from: OrderedSet(old))
        return "\(difference.count) changes"
      }
    },
  ]
  if collectionDifference {
    peers.insert(
      ScalePeer(name: "CollectionDifference") {
        let (old, new) = assignment(kind, count: count)
        return {
          let difference = new.difference(from: old).inferringMoves()
          return "\(difference.count) changes"
        }
      }, at: 1)
  }
  return peers
}

let scaleRows: [ScaleRow] = [
  ScaleRow(
    id: "S1-5k", title: "assign 5,000 Ints, all elements changed",
    peers: assignmentPeers("changed", count: 5_000, collectionDifference: true)),
  ScaleRow(
    id: "S2-5k", title: "assign 5,000 Ints shuffled",
    peers: assignmentPeers("shuffled", count: 5_000, collectionDifference: true)),
  ScaleRow(
    id: "S3-5k", title: "assign 5,000 Ints with 10 changes",
    peers: assignmentPeers("few", count: 5_000, collectionDifference: true)),
  ScaleRow(
    id: "S1", title: "assign 100,000 Ints, all elements changed",
    peers: assignmentPeers("changed", count: 100_000, collectionDifference: false)),
  ScaleRow(
    id: "S2", title: "assign 100,000 Ints shuffled",
    peers: assignmentPeers("shuffled", count: 100_000, collectionDifference: false)),
  ScaleRow(
    id: "S3", title: "assign 1,000,000 Ints with 10 changes",
    peers: assignmentPeers("few", count: 1_000_000, collectionDifference: true)),
  ScaleRow(
    id: "S4", title: "insert(contentsOf:) 100,000 Ints at 0 of 100,000, 1 subscriber",
    peers: [
      ScalePeer(name: "Evented") {
        let property = ArrayProperty(Array(0..<100_000))
        let inserted = Array(100_000..<200_000)
        let changes = Atomic(0)
        let subscription = property.observeChanges { changes.add($0.changes.count, ordering: .relaxed) }
        return {
          property.insert(contentsOf: inserted, at: 0)
          subscription.cancel()
          return "\(changes.load(ordering: .relaxed)) changes"
        }
      },
      ScalePeer(name: "Mutex<[Int]>") {
        let array = Mutex(Array(0..<100_000))
        let inserted = Array(100_000..<200_000)
        return {
          array.withLock { $0.insert(contentsOf: inserted, at: 0) }
          return nil
        }
      },
    ]),
  ScaleRow(
    id: "S5", title: "1,000,000 appends, no observers",
    peers: [
      ScalePeer(name: "Evented") {
        let property = ArrayProperty<Int>([])
        return {
          for i in 0..<1_000_000 { property.append(i) }
          return "\(property.count) elements"
        }
      },
      ScalePeer(name: "Mutex<[Int]>") {
        let array = Mutex<[Int]>([])
        return {
          for i in 0..<1_000_000 { array.withLock { $0.append(i) } }
          return "\(array.withLock { $0.count }) elements"
        }
      },
    ]),
]

/// A small deterministic generator for the shuffles.
struct BenchRandom: RandomNumberGenerator {
  var state: UInt64

  init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// Runs every row (or those in `only`) `repetitions` times per peer, peers interleaved,
/// and prints a Markdown table of medians.
func runArraysAtScale(only: Set<String>?, repetitions: Int) {
  print("| Row | Peer | median wall | min wall | note (last run) |")
  print("|---|---|---:|---:|---|")
  for row in scaleRows where only?.contains(row.id.lowercased()) ?? true {
    log("running \(row.id): \(row.title)")
    var times = Array(repeating: [Double](), count: row.peers.count)
    var notes = Array(repeating: "", count: row.peers.count)
    for _ in 0..<repetitions {
      for (index, peer) in row.peers.enumerated() {
        let operation = peer.prepare()
        let start = now(CLOCK_MONOTONIC)
        let note = operation()
        times[index].append(Double(now(CLOCK_MONOTONIC) - start) / 1e9)
        notes[index] = note ?? ""
      }
    }
    for (index, peer) in row.peers.enumerated() {
      let sorted = times[index].sorted()
      let median = sorted[sorted.count / 2]
      print(
        "| \(row.id) \(row.title) | \(peer.name) | \(seconds(median)) | \(seconds(sorted[0])) | \(notes[index]) |")
    }
  }
}

/// `value` seconds, in the unit that suits it.
private func seconds(_ value: Double) -> String {
  value >= 1 ? String(format: "%.2f s", value) : String(format: "%.2f ms", value * 1_000)
}

/// Runs one peer of one row once (`setup`: only its preparation), for callgrind.
func profileArraysAtScale(_ id: String, peer name: String) -> Int32 {
  guard let row = scaleRows.first(where: { $0.id.lowercased() == id.lowercased() }) else {
    log("evented-bench: unknown scale row \(id); one of \(scaleRows.map(\.id).joined(separator: ", "))")
    return 2
  }
  let peer = name == "setup" ? row.peers[0] : row.peers.first { $0.name.lowercased() == name.lowercased() }
  guard let peer else {
    log("evented-bench: \(row.id) has no peer \(name); one of setup, \(row.peers.map(\.name).joined(separator: ", "))")
    return 2
  }
  readsConcurrently.store(false, ordering: .relaxed)
  let operation = peer.prepare()
  if name != "setup" { log("\(row.id) \(peer.name): \(operation() ?? "")") }
  return 0
}
