// Scenario "actor-overload": writer tasks `modify` an `ActorProperty` and send to an
// `ActorEventSource` as fast as they can, while slow async handler subscriptions (they
// spin, they do not suspend) take every event and the newest value, and a churner
// subscribes further slow handlers and cancels them, so that senders waiting for room
// see subscriptions end. Beside them, a sender task that is cancelled keeps sending to
// a source of its own with a slow handler.
//
// Each sender counts its send once it returns (`eventsSent`), which never overstates
// the backlog a handler sees.
//
// Invariants:
// - the event backlog a slow handler sees never exceeds the limit, and twice the limit
//   for the cancelled sender, whose sends past that are refused (and some are);
// - the process's resident memory stays within `actorOverloadMemoryGrowth` of where it
//   started;
// - each slow property handler sees values that only grow and, when writers stop,
//   ends on `value` (it holds one waiting value, the newest: writes never wait for
//   it); each slow event handler sees each sender's events consecutively;
// - no single send or `modify` takes longer than `actorOverloadLongestCall`;
// - every writer and churner task finishes once told to stop (no sender is left
//   waiting for a subscription that ended).
//
// The report adds the peak backlogs, the peak memory growth and the longest calls.

import Evented
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The backlog limit of the scenario's property and source.
let actorOverloadLimit = 64

/// Calls taking longer than this are violations: waiting senders commit first come,
/// first served, so a send waits for about one delivery of each slow handler (20 µs)
/// per sender ahead of it (about 10 ms in all here); this leaves room for a loaded
/// machine and Thread Sanitizer. When running senders could take the room a waiting
/// one was woken for, the longest send took 1–5 s.
let actorOverloadLongestCall = 1_000_000_000

/// Memory growth above this is a violation: the bounded queues hold a few hundred small
/// messages; unbounded ones grew by 17 MB per million sends.
let actorOverloadMemoryGrowth = 64 << 20

/// The peak and longest figures, printed after the scenario's line.
let actorOverloadFigures = Guarded<String>("")

/// Raises `atomic` to `value` if it is lower.
private func raise(_ atomic: borrowing Atomic<Int>, to value: Int) {
  var current = atomic.load(ordering: .relaxed)
  while value > current {
    let (exchanged, original) = atomic.weakCompareExchange(
      expected: current, desired: value, ordering: .relaxed)
    if exchanged { return }
    current = original
  }
}

/// Checks one slow handler subscription; its invocations run one at a time.
private final class SlowWatcher: @unchecked Sendable {
  // @unchecked Sendable: `seen` and `delivered` are touched only by the handler, whose
  // invocations run one at a time; the rest is atomic or immutable.
  let run: ScenarioRun
  let label: String
  /// The last property value seen, or -1.
  let last = Atomic<Int>(-1)
  /// Each sender's last sequence number seen.
  private var seen: [Int]
  /// Events delivered so far.
  private var delivered = 0

  init(run: ScenarioRun, label: String, senders: Int) {
    self.run = run
    self.label = label
    seen = Array(repeating: 0, count: senders)
  }

  func see(value: Int) {
    ThreadState.current.count()
    let previous = last.load(ordering: .relaxed)
    if value <= previous {
      run.violation("actor-overload: \(label) saw \(value) after \(previous)")
    }
    last.store(value, ordering: .releasing)
    spin(microseconds: 20)
  }

  func see(event: StormEvent, sent: Int, peak: borrowing Atomic<Int>) {
    ThreadState.current.count()
    delivered += 1
    raise(peak, to: sent - delivered)
    let previous = seen[event.producer]
    if previous != 0 && event.seq != previous + 1 {
      run.violation("actor-overload: \(label) saw sender \(event.producer)'s event \(event.seq) after \(previous)")
    }
    seen[event.producer] = event.seq
    spin(microseconds: 20)
  }
}

/// Counters shared by the scenario's tasks.
private final class ActorOverloadShared: Sendable {
  let stop = Atomic<Bool>(false)
  let tasksRunning = Atomic<Int>(0)
  let eventsSent = Atomic<Int>(0)
  let peakEventBacklog = Atomic<Int>(0)
  let peakMemory = Atomic<Int>(0)
  let longestModify = Atomic<Int>(0)
  let longestSend = Atomic<Int>(0)
}

let actorOverload = Scenario(
  name: "actor-overload",
  summary: "ActorProperty and ActorEventSource writers against slow async handlers; bounded queues and memory",
  unavailable: nil
) { run in
  let counter = ActorProperty(0)
  let events = ActorEventSource<StormEvent>(backlogLimit: actorOverloadLimit)
  let shared = ActorOverloadShared()
  let writerCount = max(2, run.threads / 2)
  let startMemory = residentBytes()
  shared.peakMemory.store(startMemory, ordering: .relaxed)

  @Sendable func spawn(_ body: @escaping @Sendable () async -> Void) {
    shared.tasksRunning.wrappingAdd(1, ordering: .relaxed)
    Task.detached {
      await body()
      shared.tasksRunning.wrappingSubtract(1, ordering: .relaxed)
    }
  }

  /// Runs `body` in a task and waits for its result.
  func blockingResult<Result: Sendable>(_ body: @escaping @Sendable () async -> Result) -> Result? {
    let result = Guarded<Result?>(nil)
    Task.detached {
      let value = await body()
      result.withLock { $0 = value }
    }
    _ = run.eventually(within: 10) { result.withLock { $0 != nil } }
    return result.withLock { $0 }
  }

  // Slow subscriptions that stay for the whole run.
  let valueWatchers = (0..<2).map { SlowWatcher(run: run, label: "value handler \($0)", senders: writerCount) }
  let eventWatcher = SlowWatcher(run: run, label: "event handler", senders: writerCount)
  let subscriptions: [Subscription] =
    blockingResult { () -> [Subscription] in
      var subscriptions: [Subscription] = []
      for watcher in valueWatchers {
        subscriptions.append(
          await counter.observe { value in watcher.see(value: value) })
      }
      subscriptions.append(
        await events.observe { event in
          eventWatcher.see(
            event: event, sent: shared.eventsSent.load(ordering: .acquiring), peak: shared.peakEventBacklog)
        })
      return subscriptions
    } ?? []

  // Writers.
  for writer in 0..<writerCount {
    spawn {
      var seq = 0
      var calls = 0
      while !shared.stop.load(ordering: .relaxed) {
        var start = now()
        await counter.modify { $0 += 1 }
        raise(shared.longestModify, to: Int(now() - start))
        seq += 1
        start = now()
        await events.send(StormEvent(producer: writer, seq: seq, depth: 0))
        raise(shared.longestSend, to: Int(now() - start))
        shared.eventsSent.wrappingAdd(1, ordering: .releasing)
        ThreadState.current.count(2)
        calls += 1
        if calls % 256 == 0 { raise(shared.peakMemory, to: residentBytes()) }
      }
    }
  }
  // The churner: slow subscriptions that end while senders may wait for them.
  spawn {
    var random = Random(seed: run.seed)
    while !shared.stop.load(ordering: .relaxed) {
      let subscription: Subscription
      if random.chance(50) {
        subscription = await events.observe { _ in spin(microseconds: 50) }
      } else {
        subscription = await counter.observeChanges { _ in spin(microseconds: 50) }
      }
      ThreadState.current.count()
      for _ in 0..<random.below(50) { await Task.yield() }
      subscription.cancel()
    }
  }

  let cancelledSender = CancelledSender(run: run)
  cancelledSender.start()

  run.work(workers: 0) { _ in }
  shared.stop.store(true, ordering: .relaxed)
  cancelledSender.finish()
  if !run.eventually(within: 10, { shared.tasksRunning.load(ordering: .relaxed) == 0 }) {
    run.violation("actor-overload: writer or churn tasks did not finish: a sender waits for good")
  }
  raise(shared.peakMemory, to: residentBytes())

  let value = blockingResult { await counter.value } ?? -2
  for watcher in valueWatchers {
    if !run.eventually(within: 10, { watcher.last.load(ordering: .acquiring) == value }) {
      run.violation(
        "actor-overload: \(watcher.label) ended on \(watcher.last.load(ordering: .acquiring)), the value is \(value)")
    }
  }
  let eventPeak = shared.peakEventBacklog.load(ordering: .relaxed)
  if eventPeak > actorOverloadLimit {
    run.violation(
      "actor-overload: the event handler saw \(eventPeak) events waiting, above the limit of \(actorOverloadLimit)")
  }
  let growth = shared.peakMemory.load(ordering: .relaxed) - startMemory
  if growth > actorOverloadMemoryGrowth {
    run.violation("actor-overload: memory grew by \(growth >> 20) MB")
  }
  let longest = [
    ("modify", shared.longestModify.load(ordering: .relaxed)), ("send", shared.longestSend.load(ordering: .relaxed)),
  ]
  for (name, nanoseconds) in longest where nanoseconds > actorOverloadLongestCall {
    run.violation("actor-overload: the longest \(name) took \(nanoseconds / 1_000_000) ms")
  }
  actorOverloadFigures.withLock {
    $0 =
      "peak event backlog \(eventPeak) (limit \(actorOverloadLimit)); "
      + cancelledSender.figures + "; "
      + "peak memory growth \(growth >> 10) KB; longest modify \(longest[0].1 / 1_000) µs, "
      + "send \(longest[1].1 / 1_000) µs; \(value) writes"
  }
  for subscription in subscriptions { subscription.cancel() }
}
