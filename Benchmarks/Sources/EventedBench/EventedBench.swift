// The command line: which workloads and peers to run, the table, the target check and
// the JSON file.

import Foundation

struct Workload: Sendable {
  let id: String
  let title: String
  let unit: String
  /// Operations per measured operation that the unit counts (deliveries per send).
  var divisor = 1
  /// Builds one peer's bench; nil for the memory row, which runs in child processes.
  let make: (@Sendable (Peer) -> Result<Bench, Unavailable>)?
}

let workloads: [Workload] = [
  Workload(id: "W1", title: "send one Int to 1 subscriber", unit: "ns/send") { sendBench($0, subscribers: 1) },
  Workload(id: "W1b", title: "set a new value, 1 subscriber", unit: "ns/write") { writeBench($0) },
  Workload(id: "W1c", title: "set a new value through map, 1 subscriber", unit: "ns/write") { mapWriteBench($0) },
  Workload(id: "W1d", title: "set a new value through a diamond of maps, 1 subscriber", unit: "ns/write") {
    diamondWriteBench($0)
  },
  Workload(id: "W1t", title: "write two values in a transaction, combineLatest, 1 subscriber", unit: "ns/pair") {
    pairWriteBench($0, inTransaction: true)
  },
  Workload(id: "W1t-plain", title: "write two values, combineLatest, 1 subscriber", unit: "ns/pair") {
    pairWriteBench($0, inTransaction: false)
  },
  Workload(id: "W1t-10", title: "write one value ten times in a transaction, map, 1 subscriber", unit: "ns/ten") {
    tenWritesBench($0)
  },
  Workload(id: "W1r", title: "read an unchanged value through map", unit: "ns/read") {
    derivedReadBench($0, derived: true)
  },
  Workload(id: "W1r-plain", title: "read an unchanged property", unit: "ns/read") {
    derivedReadBench($0, derived: false)
  },
  Workload(id: "D1", title: "combineLatest of 1,000 roots, one written, 1 subscriber", unit: "ns/write") {
    combineManyBench($0)
  },
  Workload(id: "D2", title: "balanced tree of pairs over 1,000 roots, one written", unit: "ns/write") {
    pairTreeBench($0)
  },
  Workload(id: "D3", title: "left-deep chain of 100 pairs, the top root written", unit: "ns/write") {
    pairChainBench($0)
  },
  Workload(id: "D4", title: "chain of 1,000 maps, 1 subscriber", unit: "ns/write") { mapChainBench($0) },
  Workload(id: "D5", title: "chain of 100 flatMapLatests, the innermost target written", unit: "ns/write") {
    switchChainBench($0)
  },
  Workload(id: "W2", title: "send to 100 subscribers", unit: "ns/delivery", divisor: 100) {
    sendBench($0, subscribers: 100)
  },
  Workload(id: "W2-10k", title: "send to 10,000 subscribers", unit: "ns/delivery", divisor: 10_000) {
    sendBench($0, subscribers: 10_000)
  },
  Workload(id: "W3", title: "subscribe + cancel, 100 others", unit: "ns/pair") {
    subscribeCancelBench($0, others: 100)
  },
  Workload(id: "W3-100k", title: "subscribe + cancel, 100,000 others", unit: "ns/pair") {
    subscribeCancelBench($0, others: 100_000)
  },
  Workload(id: "W4", title: "equal write skipped, 1 subscriber", unit: "ns/write") { equalWriteBench($0) },
  Workload(id: "W5", title: "2 threads send at once, 10 subscribers", unit: "ns/send, wall") {
    concurrentSendBench($0)
  },
  Workload(id: "W11-1", title: "1 thread writes one property, 1 subscriber", unit: "ns/write") {
    writersBench($0, writers: 1)
  },
  Workload(id: "W11-2", title: "2 threads write one property at once, 1 subscriber", unit: "ns/write") {
    writersBench($0, writers: 2)
  },
  Workload(id: "W11-4", title: "4 threads write one property at once, 1 subscriber", unit: "ns/write") {
    writersBench($0, writers: 4)
  },
  Workload(id: "W11-8", title: "8 threads write one property at once, 1 subscriber", unit: "ns/write") {
    writersBench($0, writers: 8)
  },
  Workload(id: "W6", title: "memory per subscription, 1,000,000", unit: "B/subscription", make: nil),
  Workload(
    id: "W6p", title: "memory per property subscription, 100,000, replays not yet run", unit: "B/subscription",
    make: nil),
  Workload(id: "W8", title: "memory of an idle Property<Int>, 1,000,000", unit: "B/property", make: nil),
  Workload(id: "W8e", title: "memory of an idle EventSource<Int>, 1,000,000", unit: "B/source", make: nil),
  Workload(id: "W9", title: "write + read a property, nobody tracking", unit: "ns/pair") {
    observationBench($0, tracked: false)
  },
  Workload(id: "W9t", title: "write + read, a tracking scope registered before each write", unit: "ns/pair") {
    observationBench($0, tracked: true)
  },
  Workload(id: "W7", title: "1,000,000 values thread → for await", unit: "ns/value") { asyncBench($0) },
  Workload(
    id: "A1", title: "ArrayProperty: append, then removeLast, 1,000 Ints, 1 subscriber", unit: "ns/mutation",
    divisor: 2
  ) { arrayAppendBench($0, changesets: true) },
  Workload(
    id: "A1p", title: "Property<[Int]>: the same arrays by modify, 1 subscriber", unit: "ns/mutation", divisor: 2
  ) { arrayAppendBench($0, changesets: false) },
  Workload(id: "A2", title: "ArrayProperty: assign 1,000 Ints, 10 changes, 1 subscriber", unit: "ns/assignment") {
    arrayAssignBench($0, changesets: true)
  },
  Workload(id: "A2p", title: "Property<[Int]>: write the same arrays, 1 subscriber", unit: "ns/assignment") {
    arrayAssignBench($0, changesets: false)
  },
]

struct Options {
  var only: Set<String>?
  var peers: [Peer] = Peer.allCases
  var json: String?
  var harness = HarnessOptions()
  var memoryRuns = 3
  var profile: String?
  var profilePeer: Peer = .evented
  var profileCount = 1_000_000
}

struct UsageError: Error, CustomStringConvertible {
  let description: String
}

let usage = """
  usage: evented-bench [--only W1,W2,…] [--peers floor,evented,…] [--json FILE]
                       [--repetitions N] [--sample-ms MS] [--memory-runs N]
         evented-bench --profile W1 [--peer evented] [--count N]

  workloads: \(workloads.map(\.id).joined(separator: ", "))
  peers:     \(Peer.allCases.map(\.rawValue).joined(separator: ", ")) (the floor always runs)
  --profile runs one workload of one peer once, without the harness, for valgrind.

         evented-bench --scale [S1,S2,…]
         evented-bench --scale-profile S1 PEER|setup
  --scale runs the arrays-at-scale rows (\(scaleRows.map(\.id).joined(separator: ", "))),
  three times per peer, and prints medians; --scale-profile runs one peer of one row
  once for callgrind (setup: only the preparation, to subtract).

         evented-bench --actor-backlog cancelled|spawned
  --actor-backlog sends to an ActorEventSource for 3 s from a cancelled task, or from a
  task a handler started, against a 200 µs handler, and prints the backlog it left.

         evented-bench --slow-queue [N]
  --slow-queue runs W10: N (100,000) writes to a Property<Int> with no observer, then
  with one on a queue whose handler takes 200 µs; prints the writer's total time,
  longest write and memory growth, checks the targets, and exits 1 if one is missed.
  """

func parseOptions(_ arguments: [String]) throws -> Options {
  var options = Options()
  var rest = arguments[...]
  func value(_ flag: String) throws -> String {
    guard let next = rest.popFirst() else { throw UsageError(description: "\(flag) needs a value") }
    return next
  }
  func peer(_ name: Substring) throws -> Peer {
    guard let peer = Peer(rawValue: String(name)) else { throw UsageError(description: "unknown peer \(name)") }
    return peer
  }
  while let flag = rest.popFirst() {
    switch flag {
    case "--only":
      let ids = try value(flag).split(separator: ",").map(String.init)
      for id in ids where !workloads.contains(where: { $0.id.lowercased() == id.lowercased() }) {
        throw UsageError(description: "unknown workload \(id)")
      }
      options.only = Set(ids.map { $0.lowercased() })
    case "--peers":
      let chosen = try value(flag).split(separator: ",").map(peer)
      options.peers = Peer.allCases.filter { $0 == .floor || chosen.contains($0) }
    case "--json": options.json = try value(flag)
    case "--repetitions":
      guard let n = Int(try value(flag)), n > 0 else { throw UsageError(description: "bad --repetitions") }
      options.harness.repetitions = n
    case "--sample-ms":
      guard let n = UInt64(try value(flag)), n > 0 else { throw UsageError(description: "bad --sample-ms") }
      options.harness.sampleTarget = n * 1_000_000
    case "--memory-runs":
      guard let n = Int(try value(flag)), n > 0 else { throw UsageError(description: "bad --memory-runs") }
      options.memoryRuns = n
    case "--profile": options.profile = try value(flag)
    case "--peer": options.profilePeer = try peer(Substring(try value(flag)))
    case "--count":
      guard let n = Int(try value(flag)), n > 0 else { throw UsageError(description: "bad --count") }
      options.profileCount = n
    case "--help", "-h": throw UsageError(description: "")
    default: throw UsageError(description: "unknown argument \(flag)")
    }
  }
  return options
}

func log(_ text: String) {
  FileHandle.standardError.write(Data((text + "\n").utf8))
}

@main
enum EventedBench {
  static func main() {
    var arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.first == "--actor-backlog", arguments.count == 2 {
      exit(actorBacklogFigures(arguments[1]))
    }
    if arguments.first == "--slow-queue", arguments.count <= 2 {
      exit(slowQueueFigures(count: arguments.count == 2 ? Int(arguments[1]) ?? 100_000 : 100_000))
    }
    if arguments.first == "--scale" {
      let only = arguments.count > 1 ? Set(arguments[1].lowercased().split(separator: ",").map(String.init)) : nil
      runArraysAtScale(only: only, repetitions: 3)
      exit(0)
    }
    if arguments.first == "--scale-profile", arguments.count == 3 {
      exit(profileArraysAtScale(arguments[1], peer: arguments[2]))
    }
    if arguments.first == memoryChildFlag, arguments.count == 3, let peer = Peer(rawValue: arguments[2]) {
      switch arguments[1] {
      case "W6": exit(memoryChild(peer))
      case "W6p": exit(propertyMemoryChild(peer))
      default: exit(idleMemoryChild(arguments[1], peer))
      }
    }
    let options: Options
    do {
      options = try parseOptions(arguments)
    } catch {
      if "\(error)" != "" { log("evented-bench: \(error)") }
      log(usage)
      exit(2)
    }
    arguments = []
    becomeMultithreaded()
    if let id = options.profile {
      exit(profile(id, peer: options.profilePeer, count: options.profileCount))
    }
    let report = run(options)
    print(report.markdown())
    if let path = options.json {
      do {
        try report.json().write(to: URL(fileURLWithPath: path))
      } catch {
        log("evented-bench: could not write \(path): \(error)")
        exit(1)
      }
    }
  }

  static func profile(_ id: String, peer: Peer, count: Int) -> Int32 {
    guard let workload = workloads.first(where: { $0.id.lowercased() == id.lowercased() }), let make = workload.make
    else {
      log("evented-bench: --profile needs a timed workload")
      return 2
    }
    switch make(peer) {
    case .failure(let reason):
      log("evented-bench: \(peer.rawValue) has no \(workload.id): \(reason.reason)")
      return 2
    case .success(let bench):
      let sample = bench.measure(bench.fixedCount ?? count)
      let n = Double(bench.fixedCount ?? count) * Double(workload.divisor)
      log("\(workload.id) \(peer.rawValue): \(String(format: "%.1f", Double(sample.wall) / n)) \(workload.unit)")
      withExtendedLifetime(bench.keepAlive) {}
      return 0
    }
  }

  static func run(_ options: Options) -> Report {
    var report = Report(options: options)
    let chosen = workloads.filter { options.only?.contains($0.id.lowercased()) ?? true }
    for workload in chosen {
      log("running \(workload.id): \(workload.title)")
      var cells: [Peer: Cell] = [:]
      if let make = workload.make {
        var benches: [(key: Int, bench: Bench)] = []
        for (index, peer) in options.peers.enumerated() {
          switch make(peer) {
          case .success(let bench): benches.append((index, bench))
          case .failure(let reason): cells[peer] = .unavailable(reason.reason)
          }
        }
        let measured = runInterleaved(benches, options: options.harness)
        for (index, value) in measured {
          var value = value
          value.wall /= Double(workload.divisor)
          value.cpu /= Double(workload.divisor)
          cells[options.peers[index]] = .measured(value)
        }
        benches.removeAll()
      } else {
        var runs: [Peer: [Double]] = [:]
        for _ in 0..<options.memoryRuns {
          for peer in options.peers where cells[peer] == nil {
            switch memoryRun(workload.id, peer) {
            case .success(let bytes): runs[peer, default: []].append(bytes)
            case .failure(let reason): cells[peer] = .unavailable(reason.reason)
            }
          }
        }
        for (peer, values) in runs where cells[peer] == nil {
          cells[peer] = .measured(
            Measured(
              wall: median(values), cpu: .nan, operationsPerSample: memorySubscriptionCount,
              samples: values.count))
        }
      }
      report.rows.append(Row(workload: workload, cells: cells))
    }
    return report
  }
}
