// Scenario "arrays": every thread changes one ArrayProperty with single mutations,
// batches and whole-array assignments, while subscriptions (synchronous and on
// queues, long-lived and short-lived) replay every changeset onto a replica.
//
// A changeset subscription starts its replica from the array of the first changeset
// it receives; every later changeset, applied to the replica, must give that
// changeset's array. Two replicas (one synchronous, one on a queue) instead start
// empty and are subscribed with `fromEmpty: true` by a worker while the others write:
// their first changeset must apply to the empty array. Some synchronous handlers also
// mutate the array themselves.
//
// Invariants:
// - each changeset applied to a subscription's replica reproduces `changeset.array`
//   (for a replica from empty, starting with the first one),
//   and its summaries are consistent (the elements outside `removals` of the old
//   array are those outside `insertions` of the new one);
// - at every checkpoint and at the end, every long-lived replica, and the last array
//   of every `observe` subscription, equals `value` (queue subscriptions are given time
//   to drain);
// - a handler never runs nested in itself or concurrently with itself, and never starts
//   after `cancel()` returned.

import Dispatch
import Evented
import Synchronization

/// Replays the changesets of one subscription onto a replica.
final class ReplicaWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `replica` is guarded; the rest is touched only by the handler.
  private let replica: Guarded<[Int]?>
  /// Changesets applied so far, to report where a replay broke.
  private var applied = 0
  /// Whether the watcher is subscribed yet (a replica from empty subscribes late).
  let isSubscribed: Atomic<Bool>

  /// A watcher whose replica is taken from the first changeset, or, with `startsEmpty`,
  /// one that starts empty and is subscribed later, with `fromEmpty: true`.
  init(run: ScenarioRun, label: String, startsEmpty: Bool = false) {
    replica = Guarded(startsEmpty ? [] : nil)
    isSubscribed = Atomic(!startsEmpty)
    super.init(run: run, label: label)
  }

  /// One changeset: the first sets the replica, every later one must apply to it.
  func see(_ changeset: ArrayChangeset<Int>) {
    enter()
    let problem = replica.withLock { replica -> String? in
      defer { replica = changeset.array }
      guard let old = replica else { return nil }
      guard let new = checkedApply(changeset, to: old) else {
        return "changeset \(applied) names an index outside the replica of \(old.count) elements"
      }
      if new != changeset.array {
        return "changeset \(applied) applied to the replica gives \(new.count) elements, not its array's "
          + "\(changeset.array.count)"
      }
      return summaryProblem(changeset, from: old)
    }
    applied += 1
    if let problem { run.violation("\(label): \(problem)") }
    exit(changeset.array.count)
  }

  /// One whole array, from `observe`.
  func see(_ array: [Int]) {
    enter()
    replica.withLock { $0 = array }
    exit(array.count)
  }

  var current: [Int]? { replica.withLock { $0 } }

  private func summaryProblem(_ changeset: ArrayChangeset<Int>, from old: [Int]) -> String? {
    let removals = changeset.removals
    let insertions = changeset.insertions
    guard removals.allSatisfy(old.indices.contains), insertions.allSatisfy(changeset.array.indices.contains)
    else { return "summaries name indices outside the arrays" }
    let removed = Set(removals)
    let inserted = Set(insertions)
    let kept = old.indices.filter { !removed.contains($0) }.map { old[$0] }
    let survived = changeset.array.indices.filter { !inserted.contains($0) }.map { changeset.array[$0] }
    return kept == survived ? nil : "the elements outside removals and insertions differ"
  }
}

/// `changeset.applied(to: array)`, or nil where that would trap on an index that does
/// not fit `array` (a changeset delivered out of order, or to the wrong replica).
func checkedApply(_ changeset: ArrayChangeset<Int>, to array: [Int]) -> [Int]? {
  var result = array
  for change in changeset.changes {
    switch change {
    case .insert(let index, let element):
      guard index >= 0 && index <= result.count else { return nil }
      result.insert(element, at: index)
    case .remove(let index, _):
      guard result.indices.contains(index) else { return nil }
      result.remove(at: index)
    case .replace(let index, _, let new):
      guard result.indices.contains(index) else { return nil }
      result[index] = new
    case .move(let from, let to, let element):
      guard result.indices.contains(from), result.indices.contains(to) else { return nil }
      result.remove(at: from)
      result.insert(element, at: to)
    }
  }
  return result
}

/// An owner for subscriptions that live as long as the scenario.
private final class ArrayAnchor: Sendable {}

/// The most elements the writers let the array grow to, so that diffs stay cheap.
private let arrayLimit = 40

/// One random change of `property`, valid whatever the array holds at that moment.
private func mutate(_ property: ArrayProperty<Int>, _ random: inout Random, tag: Int, worker: Worker?) {
  let roll = random.below(100)
  worker?.at(roll < 60 ? .write : .modify)
  switch roll {
  case 0..<15:
    if property.count < arrayLimit { property.append(tag) } else { _ = property.popLast() }
  case 15..<25:
    _ = property.popLast()
  case 25..<30:
    property.append(contentsOf: [tag, tag + 1, tag + 2])
    property.removeAll()
    property.append(contentsOf: [tag, tag + 1])
  case 30..<45:
    // The whole array, slightly changed: a minimal diff with moves.
    var next = property.value
    if next.count > 2 { next.swapAt(random.below(next.count), random.below(next.count)) }
    if !next.isEmpty && random.chance(50) { next.remove(at: random.below(next.count)) }
    if next.count < arrayLimit { next.insert(tag, at: random.below(next.count + 1)) }
    property.value = next
  case 45..<50:
    property.value = (0..<random.below(8)).map { _ in random.below(10) }
  case 50..<60:
    property.insert(contentsOf: [tag], at: 0)
  default:
    let steps = 1 + random.below(5)
    property.batch { array in
      for step in 0..<steps {
        let count = array.count
        switch random.below(7) {
        case 0 where count < arrayLimit: array.append(tag + step)
        case 1 where count < arrayLimit: array.insert(tag + step, at: random.below(count + 1))
        case 2 where count > 0: array.remove(at: random.below(count))
        case 3 where count > 0: array[random.below(count)] = tag + step
        case 4 where count > 0: array.move(from: random.below(count), to: random.below(count))
        case 5:
          let lower = random.below(count + 1)
          let upper = lower + random.below(count - lower + 1)
          array.replaceSubrange(lower..<upper, with: (0..<random.below(3)).map { tag + $0 })
        default: _ = array.popLast()
        }
      }
      if array.count > arrayLimit { array.replaceSubrange(arrayLimit..<array.count, with: []) }
    }
  }
}

let arrays = Scenario(
  name: "arrays",
  summary: "ArrayProperty writers; changesets always reproduce the array",
  unavailable: nil
) { run in
  let property = ArrayProperty([1, 2, 3])
  let serial = DispatchQueue(label: "stress.arrays.serial")
  let concurrent = DispatchQueue(label: "stress.arrays.concurrent", attributes: .concurrent)
  let anchor = ArrayAnchor()

  var watchers: [(ReplicaWatcher, onQueue: Bool)] = []
  var subscriptions: [Subscription] = []
  for (index, delivery) in [Delivery.synchronous, .synchronous, .queue(serial), .queue(concurrent)].enumerated() {
    let onQueue = index >= 2
    let changes = ReplicaWatcher(run: run, label: "changeset observer \(index)")
    property.observeChanges(with: anchor, on: delivery) { _, changeset in changes.see(changeset) }
    let arrays = ReplicaWatcher(run: run, label: "array observer \(index)")
    subscriptions.append(property.observe(on: delivery) { arrays.see($0) })
    watchers += [(changes, onQueue), (arrays, onQueue)]
  }
  // A synchronous handler that now and then changes the array it is told about.
  let reentrant = ReplicaWatcher(run: run, label: "reentrant changeset observer")
  subscriptions.append(
    property.observeChanges { changeset in
      reentrant.see(changeset)
      var random = ThreadState.current.random
      defer { ThreadState.current.random = random }
      if random.chance(3) { mutate(property, &random, tag: -changeset.array.count, worker: nil) }
    })
  watchers.append((reentrant, false))

  // Replicas from empty, subscribed by worker 0 while the others write.
  let fromEmpty = [
    ReplicaWatcher(run: run, label: "replica from empty", startsEmpty: true),
    ReplicaWatcher(run: run, label: "replica from empty on a queue", startsEmpty: true),
  ]
  watchers += [(fromEmpty[0], false), (fromEmpty[1], true)]

  /// Every replica equals `value`; queue watchers get time. After one failure, only
  /// the final check runs, so that a broken build fails fast.
  var failed = false
  func converge(_ when: String) {
    if failed && when != "at the end" { return }
    let value = property.value
    for (watcher, onQueue) in watchers where watcher.isSubscribed.load(ordering: .acquiring) {
      // A queue subscription's backlog is not bounded by the source (it is in the
      // dispatch queue), so a debug build under load may need seconds to drain it. A
      // lost changeset never converges (and breaks the replay of the next one).
      let converged = !onQueue || failed || run.eventually(within: 10) { watcher.current == value }
      if !converged || watcher.current != value {
        failed = true
        run.violation(
          "\(when): \(watcher.label) holds \(watcher.current?.count ?? -1) elements, the value \(value.count)")
      }
    }
  }

  run.work(workers: run.threads, round: 500_000_000, checkpoint: { converge("at a checkpoint") }) { worker in
    var temporary: [(Subscription, ReplicaWatcher)] = []
    var sequence = 0
    // A copy: the reentrant handler uses the thread's generator while `mutate` runs.
    var random = worker.thread.random
    let subscribeAt = worker.index == 0 ? 1 + random.below(50) : -1
    while worker.proceed() {
      sequence += 1
      if sequence == subscribeAt {
        worker.at(.subscribe)
        for (watcher, delivery) in zip(fromEmpty, [Delivery.synchronous, .queue(serial)]) {
          property.observeChanges(with: anchor, on: delivery, fromEmpty: true) { _, changeset in watcher.see(changeset)
          }
          watcher.isSubscribed.store(true, ordering: .releasing)
        }
      }
      let roll = random.below(100)
      if roll < 90 {
        mutate(property, &random, tag: (worker.index + 1) * 1_000_000 + sequence * 10, worker: worker)
      } else if roll < 93 {
        worker.at(.read)
        let count = property.count
        if count > 0 { _ = property.value.first }
      } else if temporary.count < 3 && random.chance(60) {
        let onQueue = random.chance(30)
        let delivery: Delivery = onQueue ? .queue(concurrent) : .synchronous
        let watcher = ReplicaWatcher(run: run, label: "short-lived changeset observer")
        worker.at(.subscribe)
        temporary.append((property.observeChanges(on: delivery) { watcher.see($0) }, watcher))
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
  // A run too short for worker 0 to reach its turn still checks the first changeset.
  for (watcher, delivery) in zip(fromEmpty, [Delivery.synchronous, .queue(serial)])
  where !watcher.isSubscribed.load(ordering: .acquiring) {
    property.observeChanges(with: anchor, on: delivery, fromEmpty: true) { _, changeset in watcher.see(changeset) }
    watcher.isSubscribed.store(true, ordering: .releasing)
  }
  converge("at the end")
  withExtendedLifetime((anchor, subscriptions)) {}
}
