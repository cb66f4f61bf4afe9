// Memory per subscription (W6): each measurement runs in a fresh process, which
// subscribes one million handlers and reports the growth of its resident set.

import Evented
import Foundation
import Observation
@preconcurrency import OpenCombine

let memorySubscriptionCount = 1_000_000
let memoryChildFlag = "--memory-child"

/// Resident bytes of this process, from /proc/self/statm.
func residentBytes() -> Int {
  guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return -1 }
  let fields = text.split(separator: " ")
  guard fields.count > 1, let pages = Int(fields[1]) else { return -1 }
  return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Runs in the child process: subscribes `memorySubscriptionCount` handlers, each
/// capturing one shared object and its own index (so each has its own closure context,
/// as real handlers do), keeps every handle, and prints the resident bytes added per
/// subscription.
func memoryChild(_ peer: Peer) -> Int32 {
  let count = memorySubscriptionCount
  let sink = Sink()
  var keep: [Any] = []
  let before: Int
  let after: Int
  switch peer {
  case .floor:
    let source = FloorSource<Int>()
    before = residentBytes()
    let ids = (0..<count).map { i in source.subscribe { sink.add($0 &+ i) } }
    after = residentBytes()
    keep = [source, ids]
  case .evented:
    let source = EventSource<Int>()
    before = residentBytes()
    let subscriptions = (0..<count).map { i in source.observe { sink.add($0 &+ i) } }
    after = residentBytes()
    keep = [source, subscriptions]
  case .openCombine:
    let subject = PassthroughSubject<Int, Never>()
    before = residentBytes()
    let cancellables = (0..<count).map { i in subject.sink { sink.add($0 &+ i) } }
    after = residentBytes()
    keep = [subject, cancellables]
  case .notificationCenter:
    let center = NotificationCenter()
    before = residentBytes()
    let tokens = (0..<count).map { i in
      center.addObserver(forName: benchNotification, object: nil, queue: nil) { sink.add(receivedValue($0) &+ i) }
    }
    after = residentBytes()
    keep = [center, tokens]
  case .observation:
    let box = ObservedInt(0)
    before = residentBytes()
    for i in 0..<count {
      withObservationTracking {
        _ = box.value
      } onChange: {
        sink.add(i)
      }
    }
    after = residentBytes()
    keep = [box]
  case .eventedActor:
    let source = ActorEventSource<Int>()
    before = residentBytes()
    nonisolated(unsafe) var subscriptions: [Evented.Subscription] = []
    runBlocking {
      var made: [Evented.Subscription] = []
      made.reserveCapacity(count)
      for i in 0..<count { made.append(await source.observe { sink.touch($0 &+ i) }) }
      subscriptions = made
    }
    after = residentBytes()
    keep = [source, subscriptions]
  case .asyncStream:
    return 2
  }
  withExtendedLifetime(keep) {
    print(Double(after - before) / Double(count))
  }
  return 0
}

/// Measures a memory row once for `peer`, in a fresh process: bytes per subscription
/// (W6) or per idle source (W8, W8e).
func memoryRun(_ id: String, _ peer: Peer) -> Result<Double, Unavailable> {
  switch peer {
  case .asyncStream: return .failure(Unavailable("n/a (async only)"))
  default: break
  }
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
  process.arguments = [memoryChildFlag, id, peer.rawValue]
  let pipe = Pipe()
  process.standardOutput = pipe
  do {
    try process.run()
  } catch {
    return .failure(Unavailable("n/a (could not start: \(error))"))
  }
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  guard process.terminationStatus == 0, let bytes = Double(text) else {
    if process.terminationStatus == 3 { return .failure(Unavailable("n/a")) }
    return .failure(Unavailable("n/a (child failed: \(process.terminationStatus))"))
  }
  return .success(bytes)
}

/// Runs in the child process for W6p: subscribes 100,000 handlers to one property in
/// one go, each replayed the current value, and prints the resident bytes added per
/// subscription at once, before the replays have run (the peak, for a variant that
/// delivers replays later). Exits 3 for a peer without such a property.
func propertyMemoryChild(_ peer: Peer) -> Int32 {
  let count = 100_000
  let sink = Sink()
  let before: Int
  let after: Int
  let keep: Any
  switch peer {
  case .evented:
    let property = Property(0)
    before = residentBytes()
    let subscriptions = (0..<count).map { i in property.observe { sink.add($0 &+ i) } }
    after = residentBytes()
    keep = [property, subscriptions] as [Any]
  case .openCombine:
    let subject = CurrentValueSubject<Int, Never>(0)
    before = residentBytes()
    let cancellables = (0..<count).map { i in subject.sink { sink.add($0 &+ i) } }
    after = residentBytes()
    keep = [subject, cancellables] as [Any]
  case .eventedActor:
    let property = ActorProperty(0)
    nonisolated(unsafe) var subscriptions: [Evented.Subscription] = []
    nonisolated(unsafe) var measured = (0, 0)
    runBlocking {
      // Each call is a hop to the actor: replays may run between two of them. What is
      // measured is what the subscriptions hold while their replays are pending.
      var made: [Evented.Subscription] = []
      made.reserveCapacity(count)
      let start = residentBytes()
      for i in 0..<count { made.append(await property.observe { sink.touch($0 &+ i) }) }
      measured = (start, residentBytes())
      subscriptions = made
    }
    (before, after) = measured
    keep = [property, subscriptions] as [Any]
  default: return 3
  }
  withExtendedLifetime(keep) {
    print(Double(after - before) / Double(count))
  }
  return 0
}

/// Runs in the child process for W8 (`Property<Int>`) and W8e (`EventSource<Int>`):
/// makes `memorySubscriptionCount` idle sources, keeps them, and prints the resident
/// bytes added per source. Exits 3 for a peer without such a source.
func idleMemoryChild(_ id: String, _ peer: Peer) -> Int32 {
  let count = memorySubscriptionCount
  let isProperty = id == "W8"
  let before = residentBytes()
  let keep: Any
  switch (peer, isProperty) {
  case (.floor, true): keep = (0..<count).map { FloorProperty($0) }
  case (.floor, false): keep = (0..<count).map { _ in FloorSource<Int>() }
  case (.evented, true): keep = (0..<count).map { Property($0) }
  case (.evented, false): keep = (0..<count).map { _ in EventSource<Int>() }
  case (.openCombine, true): keep = (0..<count).map { CurrentValueSubject<Int, Never>($0) }
  case (.openCombine, false): keep = (0..<count).map { _ in PassthroughSubject<Int, Never>() }
  case (.eventedActor, true): keep = (0..<count).map { ActorProperty($0) }
  case (.eventedActor, false): keep = (0..<count).map { _ in ActorEventSource<Int>() }
  default: return 3
  }
  let after = residentBytes()
  withExtendedLifetime(keep) {
    print(Double(after - before) / Double(count))
  }
  return 0
}
