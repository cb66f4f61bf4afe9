// Observation's `Observations` over two values that another thread writes, side by
// side: an `@Observable` class behind a `Mutex`, and two Evented properties. Each run
// writes 1...1,000 to both values from a background thread while the main actor
// iterates `Observations { a + b }`, and waits up to one second for the sum 2,000. The
// `@Observable` class misses the final value in some runs (its tracking is installed
// after the closure has read, and a change in between reaches nobody); Evented's
// properties end on it in every run. Exits 1 if an Evented run misses it.
//
// Run: swift run --package-path Examples observation

import Dispatch
import Evented
import Foundation
import Observation
import Synchronization

/// Two integers with Observation's macro: not thread-safe by itself.
@Observable final class Pair {
  var a = 0
  var b = 0
}

/// The `@Observable` pair behind a lock, so that another thread may write it.
final class LockedPair: Sendable {
  private let pair = Mutex(Pair())

  var sum: Int { pair.withLock { $0.a + $0.b } }

  func set(_ value: Int) {
    pair.withLock { $0.a = value }
    pair.withLock { $0.b = value }
  }
}

/// Two Evented properties, written from any thread.
final class EventedPair: Sendable {
  let a = Property(0)
  let b = Property(0)

  var sum: Int { a.value + b.value }

  func set(_ value: Int) {
    a.value = value
    b.value = value
  }
}

let runs = 100
let last = 1_000

/// Set by the consumer once it has read the first sum; the writer waits for it.
final class Started: Sendable {
  let flag = Atomic<Bool>(false)
}

/// Whether `sums` yields the final sum before it ends (it ends when cancelled).
@available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)
@MainActor
func reachesFinal(_ sums: Observations<Int, Never>, started: Started) async -> Bool {
  for await value in sums {
    started.flag.store(true, ordering: .releasing)
    if value == 2 * last { return true }
  }
  return false
}

/// Runs `runs` times: a background thread writes 1...last, the main actor iterates
/// `Observations { sum() }`; returns how many runs did not see the final sum within a
/// second after the writer finished.
@available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)
@MainActor
func missedRuns(_ make: () -> (sum: @Sendable () -> Int, write: @Sendable (Int) -> Void)) async -> Int {
  var missed = 0
  for _ in 0..<runs {
    let (sum, write) = make()
    let sums = Observations { sum() }
    let started = Started()
    DispatchQueue.global().async {
      while !started.flag.load(ordering: .acquiring) {}  // until the first value is read
      for i in 1...last { write(i) }
    }
    let consumer = Task { @MainActor in await reachesFinal(sums, started: started) }
    let timer = Task {
      try? await Task.sleep(for: .seconds(1))
      consumer.cancel()
    }
    let sawFinal = await consumer.value
    timer.cancel()
    if !sawFinal { missed += 1 }
  }
  return missed
}

if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
  let observable = await missedRuns {
    let pair = LockedPair()
    return ({ pair.sum }, { pair.set($0) })
  }
  print("@Observable class behind a Mutex: \(observable) of \(runs) runs did not end on the final sum")
  let evented = await missedRuns {
    let pair = EventedPair()
    return ({ pair.sum }, { pair.set($0) })
  }
  print("Evented properties:               \(evented) of \(runs) runs did not end on the final sum")
  if evented > 0 {
    print("Evented missed the final value: this is a bug")
    exit(1)
  }
} else {
  print("Observations needs macOS 26 or later")
}
