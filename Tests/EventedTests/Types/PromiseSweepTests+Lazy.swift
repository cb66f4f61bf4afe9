import Synchronization
import Testing

@testable import Evented

extension PromiseSweepTests {
  /// DerivedValues.md: "Ending the last observer (`cancel()`, a once-only delivery, the
  /// end of an async loop) unsubscribes the value from its roots at once, so a lazy
  /// source read only through derived values stops then. If another thread is
  /// delivering a commit of that source to the value at that instant, the source stops
  /// when that delivery returns." Guarantees.md: the hooks run "when the number of
  /// subscriptions rises from zero, the second when it falls back to zero", in that
  /// order. So with another thread writing, the hooks alternate, and once it has
  /// stopped, the source has stopped.
  @Test func theStopHookOfALazyRootRunsOnceTheLastDerivedObserverIsCancelledWhileAnotherThreadWrites() {
    lastDerivedObserverCancelledStopsTheLazyRoot(inTransactions: true)
  }

  @Test func theStopHookOfALazyRootRunsOnceTheLastDerivedObserverIsCancelledWhileAnotherThreadWritesPlainly() {
    lastDerivedObserverCancelledStopsTheLazyRoot(inTransactions: false)
  }

  /// With nobody else delivering, the source has stopped when `cancel()` returns.
  @Test func theStopHookOfALazyRootHasRunWhenTheLastDerivedObserverIsCancelledAndNobodyDelivers() {
    let hooks = Recorder<String>()
    let level = Property(0, onFirstObserver: { hooks.append("+") }, onLastObserverGone: { hooks.append("-") })
    for value in 1...100 {
      let subscription = level.map { $0 }.observe { _ in }
      level.value = value
      subscription.cancel()
      #expect(hooks.values.suffix(2) == ["+", "-"], "round \(value)")
    }
    #expect(hooks.count == 200)
  }

  private func lastDerivedObserverCancelledStopsTheLazyRoot(inTransactions: Bool) {
    let hooks = Recorder<String>()
    let level = Property(0, onFirstObserver: { hooks.append("+") }, onLastObserverGone: { hooks.append("-") })
    let other = Property(0)
    let stop = Atomic<Bool>(false)
    let writer = Spawned {
      var i = 0
      while !stop.load(ordering: .relaxed) {
        i += 1
        if inTransactions {
          transaction {
            level.value = i
            other.value = i
          }
        } else {
          level.value = i
          other.value = i
        }
        yieldProcessor()
      }
    }
    for _ in 0..<1_000 {
      let subscription = level.map { $0 }.observe { _ in }
      subscription.cancel()
    }
    stop.store(true, ordering: .relaxed)
    #expect(writer.join())
    let values = hooks.values
    let alternates = values.indices.allSatisfy { values[$0] == ($0 % 2 == 0 ? "+" : "-") }
    #expect(alternates && values.last == "-", "\(values.count) hooks, ending \(values.suffix(4))")
    #expect(level.observerCount == 0)
  }
}
