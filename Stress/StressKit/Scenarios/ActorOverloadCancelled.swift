// Part of scenario "actor-overload": a sender task that is cancelled and keeps sending,
// to a source of its own whose handler is slow. A cancelled task never waits for room
// (a handler may be awaiting it), so its sends go past the limit, up to twice the
// limit; past that they are refused, and `send` says so.
//
// Invariants: the backlog the slow handler sees never exceeds twice the limit; some
// sends are refused, none silently (every send is either delivered or refused); the
// sender finishes when told to stop.

import Evented
import Synchronization

/// The cancelled sender and its slow handler.
final class CancelledSender: Sendable {
  private let run: ScenarioRun
  private let source = ActorEventSource<Int>(backlogLimit: actorOverloadLimit)
  private let stop = Atomic<Bool>(false)
  private let finished = Atomic<Bool>(false)
  private let sent = Atomic<Int>(0)
  private let refused = Atomic<Int>(0)
  private let delivered = Atomic<Int>(0)
  private let peak = Atomic<Int>(0)
  private let subscription = Guarded<Subscription?>(nil)

  init(run: ScenarioRun) {
    self.run = run
  }

  func start() {
    Task.detached { [self] in
      let subscription = await source.observe { [self] _ in
        ThreadState.current.count()
        // This event is started: what waits behind it is the backlog.
        let backlog = sent.load(ordering: .acquiring) - delivered.wrappingAdd(1, ordering: .releasing).newValue
        var current = peak.load(ordering: .relaxed)
        while backlog > current {
          let (exchanged, original) = peak.weakCompareExchange(expected: current, desired: backlog, ordering: .relaxed)
          if exchanged { break }
          current = original
        }
        spin(microseconds: 20)
      }
      self.subscription.withLock { $0 = subscription }
      let sender = Task { [self] in
        var event = 0
        while !stop.load(ordering: .relaxed) {
          event += 1
          // Counted before the send, so that the handler never sees more delivered
          // than sent; taken back if refused.
          sent.wrappingAdd(1, ordering: .releasing)
          if await !source.send(event) {
            sent.wrappingSubtract(1, ordering: .releasing)
            refused.wrappingAdd(1, ordering: .relaxed)
            // A refused send returns at once, so without a suspension this loop would
            // hold one of the pool's threads for the whole run.
            await Task.yield()
          }
          ThreadState.current.count()
        }
      }
      sender.cancel()
      await sender.value
      finished.store(true, ordering: .releasing)
    }
  }

  /// Stops the sender and checks what it did.
  func finish() {
    stop.store(true, ordering: .relaxed)
    if !run.eventually(within: 10, { finished.load(ordering: .acquiring) }) {
      run.violation("actor-overload: the cancelled sender did not finish")
      return
    }
    let total = sent.load(ordering: .acquiring)
    if !run.eventually(within: 10, { delivered.load(ordering: .acquiring) == total }) {
      run.violation(
        "actor-overload: \(delivered.load(ordering: .acquiring)) of the cancelled sender's \(total) events arrived")
    }
    // Plus one: a send is counted just before it is made.
    if peak.load(ordering: .relaxed) > 2 * actorOverloadLimit + 1 {
      run.violation(
        "actor-overload: the cancelled sender's handler saw \(peak.load(ordering: .relaxed)) events waiting, "
          + "above twice the limit of \(actorOverloadLimit)")
    }
    if refused.load(ordering: .relaxed) == 0 {
      run.violation(
        "actor-overload: no send of the cancelled sender was refused: it went past twice the limit or was slowed")
    }
    subscription.withLock { $0 }?.cancel()
  }

  /// The figures for the report.
  var figures: String {
    "cancelled sender: peak backlog \(peak.load(ordering: .relaxed)) (at most \(2 * actorOverloadLimit) and the send in flight), "
      + "\(refused.load(ordering: .relaxed)) sends refused"
  }
}
