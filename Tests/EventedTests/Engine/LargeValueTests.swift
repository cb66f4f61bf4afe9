import Dispatch
import Evented
import Foundation
import Testing

/// A value for the stack tests: a generation and a large payload.
protocol Generational: Sendable, Equatable {
  init(_ generation: Int)
  var generation: Int { get set }
}

extension LargeValue: Generational {}
extension MediumValue: Generational {}

/// Holds a large value in a class, as a model would.
final class LargeModel<Value: Generational>: @unchecked Sendable {
  // @unchecked Sendable: `_current` is assigned once, in init; Property is Sendable.
  @Property var current: Value

  init(_ value: Value) { _current = Property(wrappedValue: value) }
}

/// One way a value travels through the library, run from start to end (sources made,
/// observed, written and dropped) on the thread under test.
struct StackPath {
  let name: String
  let run: () -> Void
}

/// Every path a value takes, with values built beforehand (they live on the heap, in
/// an array captured by the paths).
func stackPaths<Value: Generational>(of _: Value.Type) -> [StackPath] {
  let values = (0..<3).map { Value($0) }
  let queue = DispatchQueue(label: "large values")
  return [
    StackPath(name: "make a property") {
      let property = Property(values[0])
      withExtendedLifetime(property) {}
    },
    StackPath(name: "make an event source and send") {
      let source = EventSource<Value>()
      source.send(values[1])
    },
    StackPath(name: "write") {
      let property = Property(values[0])
      property.value = values[1]
    },
    StackPath(name: "write, synchronous delivery to several subscribers") {
      let property = Property(values[0])
      let subscriptions = [
        property.observe { _ in },
        property.observeChanges { _ in },
        property.observe(\.generation) { _ in },
      ]
      property.value = values[1]
      withExtendedLifetime(subscriptions) {}
    },
    StackPath(name: "modify") {
      let property = Property(values[0])
      let subscription = property.observeChanges { _ in }
      property.modify { $0.generation += 1 }
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "mutation in place") {
      let property = Property(values[0])
      let subscription = property.observeChanges { _ in }
      property.value.generation += 1
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "property wrapper: write and mutation in place") {
      let model = LargeModel(values[0])
      let subscription = model.$current.observeChanges { _ in }
      model.current = values[1]
      model.current.generation += 1
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "observe, with the current value replayed") {
      let property = Property(values[0])
      let subscription = property.observe { _ in }
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "queue delivery (the committing side)") {
      let property = Property(values[0])
      let subscription = property.observe(on: .queue(queue)) { _ in }
      property.value = values[1]
      queue.sync {}
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "values (the producing side)") {
      let property = Property(values[0])
      let sequence = property.values(bufferingPolicy: .unbounded)
      property.value = values[1]
      withExtendedLifetime(sequence) {}
    },
    StackPath(name: "events() and synchronous observers of an event source") {
      let source = EventSource<Value>()
      let sequence = source.events()
      let subscription = source.observe { _ in }
      source.send(values[1])
      withExtendedLifetime((sequence, subscription)) {}
    },
    StackPath(name: "map of a property, observed") {
      let property = Property(values[0])
      let derived = property.map { $0 }
      let subscription = derived.observe { _ in }
      property.value = values[1]
      _ = derived.value
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "map of a map, observed") {
      let property = Property(values[0])
      let derived = property.map { $0 }.map { $0 }
      let subscription = derived.observe { _ in }
      property.value = values[1]
      _ = derived.value
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "flatMapLatest to a property, observed") {
      let choice = Property(true)
      let left = Property(values[0])
      let right = Property(values[1])
      let followed = choice.flatMapLatest { $0 ? left : right }
      let subscription = followed.observe { _ in }
      left.value = values[2]
      choice.value = false
      _ = followed.value
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "map of a property, read unobserved") {
      let property = Property(values[0])
      let derived = property.map { $0 }
      property.value = values[1]
      _ = derived.value
    },
    StackPath(name: "map of a property, observed, written in a transaction") {
      let property = Property(values[0])
      let derived = property.map { $0 }
      let subscription = derived.observe { _ in }
      transaction { property.value = values[1] }
      _ = derived.value
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "ArrayProperty whole-array assignment of Equatable elements, observed") {
      let array = ArrayProperty<Value>([values[0], values[1]])
      let subscription = array.observeChanges { _ in }
      array.value = [values[1], values[2], values[0]]
      withExtendedLifetime(subscription) {}
    },
    StackPath(name: "ArrayProperty append, observed") {
      let array = ArrayProperty<Value>([])
      let subscription = array.observeChanges { _ in }
      array.append(values[1])
      withExtendedLifetime(subscription) {}
    },
  ]
}

/// The most copies of a value that any path keeps on the stack at once (the stated
/// rule), and the room allowed on top of them for the frames themselves (unoptimized
/// frames of a derived value's path, from the root's delivery through the snapshot to
/// the transform, take about 72 KB).
let mostCopiesOnTheStack = 12
let roomForFrames = 96 << 10

/// Runs every path of `paths` on a stack of `stackSize` bytes and checks that none
/// keeps more than ``mostCopiesOnTheStack`` copies of a value of `valueSize` bytes.
/// Thread Sanitizer makes every frame larger: under it the paths run on the same
/// stacks, but the copies are not counted.
func expectPathsRunOnASmallStack(
  _ paths: [StackPath], stackSize: Int, valueSize: Int, sourceLocation: SourceLocation = #_sourceLocation
) {
  for path in paths {
    // A path that needs more than `stackSize` stops the test process here.
    let used = stackUsed(onStackOf: stackSize, by: path.run)
    if !isThreadSanitized {
      #expect(
        used <= mostCopiesOnTheStack * valueSize + roomForFrames,
        "\(path.name): \(used / 1024) KB of stack, \(used / valueSize) copies of the value",
        sourceLocation: sourceLocation)
    }
  }
}

/// The paths whose names start with one of `prefixes`.
func paths(_ all: [StackPath], _ prefixes: String...) -> [StackPath] {
  all.filter { path in prefixes.contains { path.name.hasPrefix($0) } }
}

@Suite struct LargeValueTests {
  @Test func aLargeValueIsWrittenModifiedAndMutatedInPlaceOnASmallStack() {
    expectPathsRunOnASmallStack(
      paths(stackPaths(of: LargeValue.self), "make", "write", "modify", "mutation", "property wrapper"),
      stackSize: 1 << 20, valueSize: MemoryLayout<LargeValue>.size)
  }

  @Test func aLargeValueIsObservedAndDeliveredOnASmallStack() {
    expectPathsRunOnASmallStack(
      paths(stackPaths(of: LargeValue.self), "observe", "write, synchronous", "queue", "events"),
      stackSize: 1 << 20, valueSize: MemoryLayout<LargeValue>.size)
  }

  @Test func asyncSequencesOfLargeValuesAreFedOnASmallStack() {
    expectPathsRunOnASmallStack(
      paths(stackPaths(of: LargeValue.self), "values", "events"),
      stackSize: 1 << 20, valueSize: MemoryLayout<LargeValue>.size)
  }

  @Test func derivedLargeValuesAndArraysOfThemAreDeliveredOnASmallStack() {
    expectPathsRunOnASmallStack(
      paths(stackPaths(of: LargeValue.self), "map", "flatMapLatest", "ArrayProperty"),
      stackSize: 1 << 20, valueSize: MemoryLayout<LargeValue>.size)
  }

  @Test func sixteenKilobyteValuesTakeEveryPathOnTheStackOfASecondaryThread() {
    expectPathsRunOnASmallStack(
      stackPaths(of: MediumValue.self), stackSize: 512 << 10, valueSize: MemoryLayout<MediumValue>.size)
  }

  @Test func largeValuesAreDeliveredWholeAndInCommitOrder() {
    let property = Property(LargeValue(0))
    let changes = Monitor<[String]>([])
    let subscription = property.observeChanges { change in
      let last = change.newValue.payload.3.parts.7.parts.15.words.15
      changes.withLock { $0.append("\(change.oldValue.generation)>\(change.newValue.generation):\(last)") }
      if change.newValue.generation == 1 { property.value = LargeValue(2) }
    }
    property.value = LargeValue(1)
    property.value = LargeValue(2)  // a duplicate: skipped
    property.modify { $0.generation = 3 }
    property.value.generation += 1
    #expect(throws: CancellationError.self) {
      try property.modify { value throws(CancellationError) in
        value.generation = 9
        throw CancellationError()
      }
    }
    #expect(changes.withLock { $0 } == ["0>1:1", "1>2:2", "2>3:2", "3>4:2"])
    #expect(property.value.generation == 4)
    withExtendedLifetime(subscription) {}
  }

  @Test func largeEventsAndReplaysReachEverySubscriber() async {
    let source = EventSource<LargeValue>()
    let received = Monitor<[Int]>([])
    let first = source.observe { event in received.withLock { $0.append(event.generation) } }
    let second = source.observe { event in received.withLock { $0.append(10 + event.generation) } }
    let events = source.events()
    source.send(LargeValue(1))
    #expect(received.withLock { $0 } == [1, 11])
    var iterator = events.makeAsyncIterator()
    #expect(await iterator.next()?.generation == 1)

    let property = Property(LargeValue(5))
    let derived = property.map { $0.generation * 2 }
    let replayed = Monitor<[Int]>([])
    let third = property.observe { value in replayed.withLock { $0.append(value.generation) } }
    let fourth = derived.observe { value in replayed.withLock { $0.append(value) } }
    property.value = LargeValue(6)
    #expect(replayed.withLock { $0 }.sorted() == [5, 6, 10, 12])
    withExtendedLifetime((first, second, third, fourth)) {}
  }

  @Test func combinationsAndChainsOfLargeValuesFollowTheirSources() {
    let left = Property(MediumValue(1))
    let right = Property(MediumValue(10))
    let pair = left.combineLatest(right)
    let pairs = Monitor<[String]>([])
    let first = pair.observe { l, r in pairs.withLock { $0.append("\(l.generation),\(r.generation)") } }
    left.value = MediumValue(2)
    right.modify { $0.generation = 20 }
    #expect(pairs.withLock { $0 } == ["1,10", "2,10", "2,20"])

    let chosen = Property(true)
    let chain = chosen.flatMapLatest { $0 ? left : right }
    let followed = Monitor<[Int]>([])
    let second = chain.observe { value in followed.withLock { $0.append(value.generation) } }
    chosen.value = false
    left.value = MediumValue(3)  // no longer followed
    right.value = MediumValue(30)
    #expect(followed.withLock { $0 } == [2, 20, 30])
    #expect(chain.value.generation == 30)
    withExtendedLifetime((first, second)) {}
  }

  /// Prints how much stack each path takes (run with EVENTED_STACK_FIGURES=1).
  @Test(.enabled(if: ProcessInfo.processInfo.environment["EVENTED_STACK_FIGURES"] != nil))
  func stackFiguresOfEveryPath() {
    for (label, paths, size) in [
      (
        "64 KB", stackPaths(of: LargeValue.self), MemoryLayout<LargeValue>.size
      ),
      (
        "16 KB", stackPaths(of: MediumValue.self), MemoryLayout<MediumValue>.size
      ),
    ] {
      for path in paths {
        let used = stackUsed(onStackOf: 64 << 20, by: path.run)
        let copies = Double(used) / Double(size)
        print("stack \(label) \(path.name): \(used / 1024) KB (\((copies * 10).rounded() / 10) values)")
      }
    }
  }
}
