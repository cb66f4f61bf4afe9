import Synchronization
import Testing

@testable import Evented

extension PromiseSweepTests {
  /// DerivedValues.md: "Ending the last observer (`cancel()`, a once-only delivery, the
  /// end of an async loop) unsubscribes the value from its roots at once, so a lazy
  /// source read only through derived values stops then." Guarantees.md: the hooks run
  /// "when the number of subscriptions rises from zero, the second when it falls back
  /// to zero".
  @Test func theStopHookOfALazyRootHasRunWhenTheLastDerivedObserverIsCancelledWhileAnotherThreadWrites() {
    lastDerivedObserverCancelledStopsTheLazyRoot(inTransactions: true)
  }

  @Test func theStopHookOfALazyRootHasRunWhenTheLastDerivedObserverIsCancelledWhileAnotherThreadWritesPlainly() {
    lastDerivedObserverCancelledStopsTheLazyRoot(inTransactions: false)
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
    var missed: [String] = []
    for round in 0..<1_000 {
      let before = hooks.count
      let subscription = level.map { $0 }.observe { _ in }
      subscription.cancel()
      let after = hooks.values
      if after.count != before + 2 || after.last != "-" {
        missed.append("round \(round): \(after.count - before) new hooks, last \(after.last ?? "none")")
      }
    }
    stop.store(true, ordering: .relaxed)
    #expect(writer.join())
    #expect(missed.isEmpty, "\(missed.count) of 1,000 rounds: \(missed.prefix(3))")
  }
}
