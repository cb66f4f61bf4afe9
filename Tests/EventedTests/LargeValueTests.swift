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
    StackPath(name: "ArrayProperty append, observed") {
      let array = ArrayProperty<Value>([])
      let subscription = array.observeChanges { _ in }
      array.append(values[1])
      withExtendedLifetime(subscription) {}
    },
  ]
}

@Suite struct LargeValueTests {
  /// Prints how much stack each path takes (run with EVENTED_STACK_FIGURES=1).
  @Test(.enabled(if: ProcessInfo.processInfo.environment["EVENTED_STACK_FIGURES"] != nil))
  func stackFiguresOfEveryPath() {
    for (label, paths, size) in [
      ("64 KB", stackPaths(of: LargeValue.self), MemoryLayout<LargeValue>.size),
      ("16 KB", stackPaths(of: MediumValue.self), MemoryLayout<MediumValue>.size),
    ] {
      for path in paths {
        let used = stackUsed(onStackOf: 64 << 20, by: path.run)
        let copies = Double(used) / Double(size)
        print("stack \(label) \(path.name): \(used / 1024) KB (\((copies * 10).rounded() / 10) values)")
      }
    }
  }
}
