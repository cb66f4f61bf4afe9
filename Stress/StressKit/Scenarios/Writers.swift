// Scenario "writers": many threads write and `modify` two properties while
// subscriptions, synchronous and on queues, record what they see.
//
// The counter property is changed only by `modify`, which stamps each value with the
// next commit number (taken inside `modify`, so stamps follow commit order exactly).
// The stamp property is assigned with `value =` and `modify`, each value stamped with
// its writer and that writer's own sequence number.
//
// Invariants:
// - each synchronous subscription sees the counter's commits consecutively (no gap, no
//   repeat, no reordering); one on a queue, where states coalesce, sees them only move
//   forward (no repeat, no reordering); changes slide (each old value is the previous
//   new value, merged ones too), and no change goes from a value to an equal one;
// - each subscription sees every writer's stamps in increasing order, changes slide,
//   and no change goes from a value to an equal one;
// - `modify` increments are never lost: the counter equals the number of increments;
// - read your writes: after a write returns, the writer reads it or a later value;
// - at every checkpoint and at the end, the last value seen by every subscription
//   equals `value` (queue subscriptions are given time to drain);
// - a handler never runs nested in itself or concurrently with itself, and never starts
//   after `cancel()` returned.

import Dispatch
import Evented
import Synchronization

/// A value of the counter property: its commit number and who made it.
struct Tick: Equatable, Sendable {
  var commit: Int
  var writer: Int
}

/// A value of the stamp property: a writer and that writer's sequence number.
struct Stamp: Equatable, Sendable {
  var producer: Int
  var seq: Int

  /// Both fields in one integer, for atomics.
  var packed: Int { producer << 40 | seq }
}

/// The checks shared by every watcher: serial, not nested, not after cancel.
class Watcher: @unchecked Sendable {
  // @unchecked Sendable: subclasses keep plain fields that only their handler touches;
  // Evented runs one subscription's handler serially, which `enter` checks.
  let run: ScenarioRun
  let label: String
  let inHandler = Atomic<Bool>(false)
  let cancelled = Atomic<Bool>(false)
  /// The last value seen, packed, for the coordinator.
  let last = Atomic<Int>(-1)

  init(run: ScenarioRun, label: String) {
    self.run = run
    self.label = label
  }

  @inline(__always)
  func enter() {
    ThreadState.current.count()
    if cancelled.load(ordering: .acquiring) {
      run.violation("\(label): handler started after cancel() had returned")
    }
    if inHandler.exchange(true, ordering: .acquiringAndReleasing) {
      run.violation("\(label): handler ran while already running (nested or concurrent delivery)")
    }
  }

  @inline(__always)
  func exit(_ packed: Int) {
    last.store(packed, ordering: .releasing)
    inHandler.store(false, ordering: .releasing)
  }
}

/// Watches the counter property: commits must arrive consecutively, or, for an
/// observer on a queue (`skipsAhead`, where states coalesce), only move forward, each
/// change starting where the one before ended.
final class TickWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: Int?
  /// The first value seen may not be older than this commit.
  private let floor: Int
  private let skipsAhead: Bool

  init(run: ScenarioRun, label: String, floor: Int, skipsAhead: Bool = false) {
    self.floor = floor
    self.skipsAhead = skipsAhead
    super.init(run: run, label: label)
  }

  /// Whether `next` may follow `previous`.
  private func follows(_ next: Int, _ previous: Int) -> Bool {
    skipsAhead ? next > previous : next == previous + 1
  }

  /// A value (or key path part): the replayed current value first, then each commit.
  func see(_ commit: Int) {
    enter()
    if let previous {
      if !follows(commit, previous) { run.violation("\(label): saw commit \(commit) right after \(previous)") }
    } else if commit < floor {
      run.violation("\(label): first value \(commit) is older than the subscriber's own write \(floor)")
    }
    previous = commit
    exit(commit)
  }

  /// A change: the old value must be the previous new value, the new one the next commit.
  func see(_ change: Change<Tick>) {
    enter()
    let old = change.oldValue.commit
    let new = change.newValue.commit
    if change.oldValue == change.newValue {
      run.violation("\(label): received a change from a value to an equal value (\(old))")
    } else if !follows(new, old) {
      run.violation("\(label): change from \(old) to \(new) skips or reverses commits")
    }
    if let previous, old != previous {
      run.violation("\(label): change from \(old) does not follow the previous value \(previous)")
    } else if previous == nil, old < floor {
      run.violation("\(label): first change from \(old) is older than the subscriber's own write \(floor)")
    }
    previous = new
    exit(new)
  }
}

/// Watches the stamp property: each writer's stamps must arrive in increasing order.
final class StampWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `seen` and `previous` are touched only by the handler.
  private var seen: [Int]
  private var previous: Stamp?

  init(run: ScenarioRun, label: String, producers: Int) {
    seen = Array(repeating: 0, count: producers + 1)
    super.init(run: run, label: label)
  }

  private func order(_ stamp: Stamp, check: Bool = true) {
    if check && stamp.seq <= seen[stamp.producer] && stamp.seq != 0 {
      run.violation("\(label): writer \(stamp.producer)'s stamp \(stamp.seq) arrived after \(seen[stamp.producer])")
    }
    seen[stamp.producer] = max(seen[stamp.producer], stamp.seq)
  }

  func see(_ value: Stamp) {
    enter()
    if let previous, previous == value { run.violation("\(label): the same value was delivered twice in a row") }
    order(value, check: previous != nil)
    previous = value
    exit(value.packed)
  }

  func see(_ change: Change<Stamp>) {
    enter()
    if change.oldValue == change.newValue {
      run.violation("\(label): received a change from a value to an equal value")
    }
    if let previous, previous != change.oldValue {
      run.violation("\(label): a change does not start from the previous new value")
    }
    order(change.newValue)
    previous = change.newValue
    exit(change.newValue.packed)
  }
}

/// An owner for subscriptions that live as long as the scenario.
private final class Anchor: Sendable {}

let writers = Scenario(
  name: "writers",
  summary: "many threads write and modify two properties; commit order, exact dedup, no lost update, convergence",
  unavailable: nil
) { run in
  let counter = Property(Tick(commit: 0, writer: -1))
  let stamps = Property(Stamp(producer: 0, seq: 0))
  let increments = Atomic<Int>(0)
  let serial = DispatchQueue(label: "stress.writers.serial")
  let concurrent = DispatchQueue(label: "stress.writers.concurrent", attributes: .concurrent)
  let anchor = Anchor()
  let producers = run.threads

  var tickWatchers: [(TickWatcher, onQueue: Bool)] = []
  var stampWatchers: [(StampWatcher, onQueue: Bool)] = []
  var subscriptions: [Subscription] = []
  for (index, delivery) in [Delivery.synchronous, .synchronous, .queue(serial), .queue(concurrent)].enumerated() {
    let onQueue = index >= 2
    let values = TickWatcher(run: run, label: "counter observer \(index)", floor: 0, skipsAhead: onQueue)
    counter.observe(with: anchor, on: delivery) { _, tick in values.see(tick.commit) }
    let changes = TickWatcher(run: run, label: "counter change observer \(index)", floor: 0, skipsAhead: onQueue)
    subscriptions.append(counter.observeChanges(on: delivery) { changes.see($0) })
    let stampValues = StampWatcher(run: run, label: "stamp observer \(index)", producers: producers)
    stamps.observe(with: anchor, on: delivery) { _, stamp in stampValues.see(stamp) }
    let stampChanges = StampWatcher(run: run, label: "stamp change observer \(index)", producers: producers)
    subscriptions.append(stamps.observeChanges(on: delivery) { stampChanges.see($0) })
    tickWatchers += [(values, onQueue), (changes, onQueue)]
    stampWatchers += [(stampValues, onQueue), (stampChanges, onQueue)]
  }
  let parts = TickWatcher(run: run, label: "counter key path observer", floor: 0)
  counter.observe(\.commit, with: anchor) { _, commit in parts.see(commit) }
  tickWatchers.append((parts, false))

  /// The last value seen by every watcher equals `value`; queue watchers get time.
  /// After one failure, only the final check runs, so that a broken build fails fast.
  var failed = false
  func converge(_ when: String) {
    if failed && when != "at the end" { return }
    let before = run.violations
    defer { if run.violations > before { failed = true } }
    let expected = increments.load(ordering: .acquiring)
    let commit = counter.value.commit
    if commit != expected {
      run.violation("\(when): the counter is \(commit) after \(expected) increments: modify lost updates")
    }
    let stamp = stamps.value.packed
    for (watcher, onQueue) in tickWatchers {
      let converged = !onQueue || failed || run.eventually { watcher.last.load(ordering: .acquiring) == commit }
      let last = watcher.last.load(ordering: .acquiring)
      if !converged || last != commit {
        failed = true
        run.violation("\(when): \(watcher.label) last saw \(last), but the value is \(commit)")
      }
    }
    for (watcher, onQueue) in stampWatchers {
      let converged = !onQueue || failed || run.eventually { watcher.last.load(ordering: .acquiring) == stamp }
      if !converged || watcher.last.load(ordering: .acquiring) != stamp {
        failed = true
        run.violation("\(when): \(watcher.label) did not end on the current value")
      }
    }
  }

  run.work(workers: run.threads, round: 500_000_000, checkpoint: { converge("at a checkpoint") }) { worker in
    let me = worker.index + 1
    var seq = 0
    var lastCommit = 0
    var temporary: [(Subscription, Watcher)] = []
    while worker.proceed() {
      let roll = worker.thread.random.below(100)
      if roll < 55 {
        worker.at(.modify)
        let commit = counter.modify { tick in
          tick = Tick(commit: tick.commit + 1, writer: me)
          return tick.commit
        }
        increments.wrappingAdd(1, ordering: .relaxed)
        worker.at(.read)
        let read = counter.value.commit
        if read < commit { run.violation("after modify returned commit \(commit), the writer read \(read)") }
        lastCommit = commit
      } else if roll < 65 {
        // Writes that change nothing must notify nobody.
        worker.at(.modify)
        if roll < 60 { counter.modify { _ in } } else { counter.modify { $0 = $0 } }
      } else if roll < 82 {
        seq += 1
        let stamp = Stamp(producer: me, seq: seq)
        worker.at(.write)
        stamps.value = stamp
        worker.at(.read)
        let read = stamps.value
        if read.producer == me && read != stamp { run.violation("after writing \(seq), the writer read \(read.seq)") }
      } else if roll < 92 {
        seq += 1
        let next = seq
        worker.at(.modify)
        stamps.modify { $0 = Stamp(producer: me, seq: next) }
      } else if roll < 95 {
        worker.at(.modify)
        stamps.modify { _ in }
      } else if temporary.count < 4 && worker.thread.random.chance(60) {
        let onQueue = worker.thread.random.chance(30)
        let delivery: Delivery = onQueue ? .queue(concurrent) : .synchronous
        let watcher = TickWatcher(
          run: run, label: "short-lived counter observer", floor: lastCommit, skipsAhead: onQueue)
        worker.at(.subscribe)
        let subscription =
          worker.thread.random.chance(50)
          ? counter.observe(on: delivery) { watcher.see($0.commit) }
          : counter.observeChanges(on: delivery) { watcher.see($0) }
        temporary.append((subscription, watcher))
      } else if !temporary.isEmpty {
        let (subscription, watcher) = temporary.removeFirst()
        worker.at(.cancel)
        subscription.cancel()
        watcher.cancelled.store(true, ordering: .releasing)
      }
    }
    for (subscription, watcher) in temporary {
      subscription.cancel()
      watcher.cancelled.store(true, ordering: .releasing)
    }
  }
  converge("at the end")
  withExtendedLifetime((anchor, subscriptions)) {}
}
