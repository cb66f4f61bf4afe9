// Misuse that must stop the program with a message naming the mistake, in every build
// configuration: `evented-stress --misuse NAME` commits one, and the tests and CI check
// the message the process leaves on standard error (a `precondition` keeps its text
// only in debug builds; Evented uses `fatalError`, which keeps it in release builds).

import Dispatch
import Evented

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// One misuse, and the text its message must contain.
struct Misuse: Sendable {
  let name: String
  let expected: String
  let commit: @Sendable () -> Void
}

/// Every misuse with a message of its own.
let misuses: [Misuse] = [
  Misuse(name: "modify-reads-itself", expected: "used from inside its own locked section") {
    let property = Property(0)
    property.modify { $0 += property.value }
  },
  Misuse(name: "modify-cycle-across-sources", expected: "two sources' locked sections wait for each other") {
    // Each thread holds its property's lock in `modify` and reads the other property.
    let first = Property(0)
    let second = Property(0)
    let firstHeld = DispatchSemaphore(value: 0)
    let secondHeld = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      first.modify { value in
        firstHeld.signal()
        secondHeld.wait()
        value += second.value
      }
    }
    DispatchQueue.global().async {
      second.modify { value in
        secondHeld.signal()
        firstHeld.wait()
        value += first.value
      }
    }
  },
  Misuse(name: "transaction-and-modify-wait-for-each-other", expected: "a transaction and a locked section wait") {
    transactionAndModifyCross { first in first.value = 1 }
  },
  Misuse(name: "transaction-read-and-modify-wait-for-each-other", expected: "which it read") {
    transactionAndModifyCross { first in _ = first.value }
  },
  Misuse(name: "transactions-wait-for-each-other", expected: "to begin a transaction") {
    // A thread begins a transaction inside `modify` of `second` while the open
    // transaction of another thread goes on to write `second`.
    let first = Property(0)
    let second = Property(0)
    let began = DispatchSemaphore(value: 0)
    let held = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      transaction {
        first.value = 1
        began.signal()
        held.wait()
        second.value = 1
      }
    }
    DispatchQueue.global().async {
      began.wait()
      second.modify { value in
        held.signal()
        transaction { first.value = value }
      }
    }
  },
  Misuse(name: "cancel-inside-modify-while-handler-waits", expected: "waiting for the handler would deadlock") {
    // Inside `modify`, cancel a subscription whose handler runs on another thread and
    // is reading the same property.
    let property = Property(0)
    let source = EventSource<Int>()
    let handlerRuns = DispatchSemaphore(value: 0)
    let subscription = source.observe { _ in
      handlerRuns.signal()
      _ = property.value
    }
    property.modify { _ in
      DispatchQueue.global().async { source.send(1) }
      handlerRuns.wait()
      subscription.cancel()
    }
  },
  Misuse(name: "transaction-cancels-a-handler-waiting-for-it", expected: "a transaction cancelled a subscription") {
    // A transaction read `property` and cancels a subscription whose handler, running
    // on another thread, writes `property`, so waits for the transaction to end.
    let property = Property(0)
    let source = EventSource<Int>()
    let handlerRuns = DispatchSemaphore(value: 0)
    let proceed = DispatchSemaphore(value: 0)
    let subscription = source.observe { _ in
      handlerRuns.signal()
      proceed.wait()
      property.value = 1
    }
    DispatchQueue.global().async { source.send(1) }
    handlerRuns.wait()
    transaction {
      _ = property.value
      proceed.signal()
      subscription.cancel()
    }
  },
  Misuse(name: "backlog-limit-zero", expected: "a backlog limit must be at least 1 (got 0)") {
    _ = EventSource<Int>(backlogLimit: 0)
  },
  Misuse(name: "buffering-limit-negative", expected: "a buffering limit must not be negative (got -1)") {
    _ = EventSource<Int>().events(bufferingPolicy: .bufferingNewest(-1))
  },
  Misuse(name: "two-tasks-iterate-one-sequence", expected: "two tasks awaited the same asynchronous sequence") {
    let source = EventSource<Int>()
    let events = source.events()
    for _ in 0..<2 {
      Task.detached {
        for await _ in events {}
        withExtendedLifetime(source) {}
      }
    }
  },
  Misuse(name: "array-index-out-of-range", expected: "ArrayProperty.remove(at: 5): index out of range (count 1)") {
    _ = ArrayProperty([1]).remove(at: 5)
  },
  Misuse(
    name: "array-range-out-of-range-in-batch", expected: "ArrayProperty.batch: [2..<9]: range out of bounds (count 3)"
  ) {
    ArrayProperty([1, 2, 3]).batch { array in _ = array[2..<9] }
  },
  Misuse(
    name: "changeset-applied-to-wrong-array",
    expected: "ArrayChangeset.applied(to:): the changeset fits an array of 3 elements, not 5"
  ) {
    let changeset = ArrayChangeset(changes: [.remove(index: 0, element: 1)], array: [2, 3])
    _ = changeset.applied(to: [1, 2, 3, 4, 5])
  },
]

/// Commits the misuse named `name`; returns only if it did not stop the program within
/// ten seconds (exit status 3), or the name is unknown (64).
func commitMisuse(named name: String) -> Never {
  guard let misuse = misuses.first(where: { $0.name == name }) else {
    fail("unknown misuse \(name); one of: \(misuses.map(\.name).joined(separator: ", "))")
  }
  misuse.commit()
  // A crashing thread's backtracer interrupts sleeping threads: sleep on until the time
  // is up, so that the crash, not this thread, ends the process.
  var left: UInt32 = 10
  while left > 0 { left = sleep(left) }
  var standardError = StandardError()
  print("evented-stress: the misuse \(name) did not stop the program", to: &standardError)
  exit(3)
}

/// A transaction uses `first` (writes or reads it, with `use`) and goes on to modify
/// `second`, whose lock another thread holds in `modify` while it writes `first`: each
/// waits for the other.
func transactionAndModifyCross(_ use: @escaping @Sendable (Property<Int>) -> Void) {
  let first = Property(0)
  let second = Property(0)
  let used = DispatchSemaphore(value: 0)
  let held = DispatchSemaphore(value: 0)
  DispatchQueue.global().async {
    transaction {
      use(first)
      used.signal()
      held.wait()
      second.modify { $0 += 1 }
    }
  }
  DispatchQueue.global().async {
    used.wait()
    second.modify { value in
      held.signal()
      first.value = value
    }
  }
}
