// Scenario "overload": every thread writes a property as fast as it can while two
// synchronous handlers and one handler on a dispatch queue are slow, as are a
// synchronous and a queue observer of a `map` of it, subscribers keep arriving (to the
// property and to the map), and one thread, the stopper, must get its event through
// to make the writers pause. Two threads only send, each to a source of its own, the
// two merged into one event source whose observer is slow. The writers also write a
// second property, `progress`, whose only observer is on a queue and blocked: each of
// its calls waits until the writers stop (or a second passes).
//
// The counter property is changed only by `modify`, which stamps each value with the
// next commit number, so stamps follow commit order exactly. Every committed stamp is
// also published (`committed`) from inside `modify`, so a handler can tell how many
// commits wait behind the one it receives: that is the backlog it sees.
//
// Invariants:
// - each slow synchronous subscription sees the commits consecutively (order); every
//   slow subscription, when writers stop, ends on `value` (convergence);
// - the backlog a synchronous handler sees never exceeds the limit plus one commit per
//   thread (threads that may wait never queue beyond the limit); the queue observer
//   holds one waiting state (state coalesces), so it sees states only move forward,
//   no older than that backlog plus what its queue holds; both the map's observers see
//   states only move forward and end on the value (each holds one waiting state, not a
//   queue of them, which the memory check below covers; how old the map's states are
//   when received is reported, not checked: a thread subscribing to the map delivers
//   its states too, nobody waits for that thread, and a state it delivers ages while
//   it is descheduled); and the process's memory stays within a few megabytes of where
//   it started;
// - no single `modify`, `observe` or stopper `send` takes longer than a bound far above
//   the limit times the handlers' cost;
// - a writer never waits for a state observer on a queue: no write to `progress` takes
//   longer than a bound far below the second its blocked observer holds each call (a
//   writer that waited for it would wait that long), and when writers stop, that
//   observer ends on the final value;
// - no `send` to a source of the merge runs more than four times the limit of the
//   merge observer's calls (a turn, plus what the other thread queued before it
//   claimed the role; measured up to about three times on this machine's 2 cores):
//   nobody is held hostage delivering the others' events; and the merge keeps each
//   thread's events in order;
// - a handler never runs nested in itself or concurrently with itself.
//
// The report adds the peak backlogs, the memory growth and the longest calls to the
// violations count, and prints each figure with the bound it is checked against.

import Dispatch
import Evented
import Synchronization

/// The backlog limit the scenario's property uses.
let overloadLimit = 64

/// Calls taking longer than this are violations: at 20 µs per slow handler the limit
/// costs about 3 ms, so this leaves room for a loaded machine and Thread Sanitizer.
let overloadLongestCall: UInt64 = 2_000_000_000

/// Memory growth above this is a violation: the bounded backlogs hold a few hundred
/// small messages, so anything near this means a queue grows without bound.
let overloadMemoryGrowth = 256 << 20

/// Writes to `progress` taking longer than this, or than twice the longest `modify` of
/// the scenario's other property (how long this run's machine stalled a write that
/// waits for nothing slow: Thread Sanitizer on a loaded machine stalls some for half a
/// second), are violations: its observer's queue is blocked for up to
/// `overloadProgressBlock` at a time, so a writer that waited for it would take about
/// that long; a write itself takes microseconds.
let overloadLongestProgressWrite: UInt64 = 250_000_000

/// How long each call of `progress`'s queue observer blocks at most, in nanoseconds.
let overloadProgressBlock: UInt64 = 1_000_000_000

/// The peak and longest figures, printed after the scenario's line.
let overloadFigures = Guarded<String>("")

private final class OverloadAnchor: Sendable {}

let overload = Scenario(
  name: "overload",
  summary: "slow handlers, writers on every thread, arriving subscribers, a stopper; bounded backlog and calls",
  unavailable: nil
) { run in
  let counter = Property(Tick(commit: 0, writer: -1), backlogLimit: overloadLimit)
  let stop = EventSource<Int>(backlogLimit: overloadLimit)
  let committed = Atomic<Int>(0)
  let peakBacklog = Atomic<Int>(0)
  let longestModify = Atomic<UInt64>(0)
  let longestObserve = Atomic<UInt64>(0)
  let longestStop = Atomic<UInt64>(0)
  let pauses = Atomic<Int>(0)
  let anchor = OverloadAnchor()

  var watchers: [TickWatcher] = []
  for index in 0..<2 {
    let watcher = TickWatcher(run: run, label: "slow observer \(index)", floor: 0)
    counter.observe(with: anchor) { _, tick in
      let backlog = committed.load(ordering: .acquiring) - tick.commit
      peakBacklog.max(backlog, ordering: .relaxed)
      watcher.see(tick.commit)
      spin(microseconds: 20)
    }
    watchers.append(watcher)
  }
  let queueWatcher = PerSourceWatcher(run: run, label: "slow queue observer", stride: Int.max, strictly: true)
  let peakQueueBacklog = Atomic<Int>(0)
  counter.observe(with: anchor, on: .queue(DispatchQueue(label: "overload"))) { _, tick in
    peakQueueBacklog.max(committed.load(ordering: .acquiring) - tick.commit, ordering: .relaxed)
    queueWatcher.see(tick.commit)
    spin(microseconds: 50)
  }
  // The map: its states may coalesce for the synchronous observer, never go back.
  let mapped = counter.map { $0 }
  let mapWatcher = PerSourceWatcher(run: run, label: "slow observer of a map", stride: Int.max, strictly: true)
  let mapQueueWatcher = PerSourceWatcher(
    run: run, label: "slow queue observer of a map", stride: Int.max, strictly: true)
  let peakMapBacklog = Atomic<Int>(0)
  let peakMapQueueBacklog = Atomic<Int>(0)
  mapped.observe(with: anchor) { _, tick in
    peakMapBacklog.max(committed.load(ordering: .acquiring) - tick.commit, ordering: .relaxed)
    mapWatcher.see(tick.commit)
    spin(microseconds: 20)
  }
  // What waits in the map's queue: the states the map committed after this one. The
  // property's deliverer commits them as it delivers, after the slow observers, so
  // the last commit the second slow observer saw marks the newest (to within one).
  let delivered = watchers[1]
  mapped.observe(with: anchor, on: .queue(DispatchQueue(label: "overload.map"))) { _, tick in
    peakMapQueueBacklog.max(delivered.last.load(ordering: .acquiring) - tick.commit, ordering: .relaxed)
    mapQueueWatcher.see(tick.commit)
    spin(microseconds: 50)
  }
  // The merge: each thread's own source; the observer counts the calls each thread runs.
  let producers = (0..<2).map { _ in EventSource<Int>(backlogLimit: overloadLimit) }
  let merged = producers.merge()
  let callsOn = Guarded([Int](repeating: 0, count: run.threads))
  let lastSent = Guarded([Int](repeating: -1, count: run.threads))
  let mostCallsPerSend = Atomic<Int>(0)
  merged.observe(with: anchor) { _, event in
    let (producer, number) = event.quotientAndRemainder(dividingBy: 1 << 32)
    let previous = lastSent.withLock { last in
      defer { last[producer] = number }
      return last[producer]
    }
    if previous != number - 1 {
      run.violation("the merge delivered event \(number) of thread \(producer) out of order")
    }
    let runner = ThreadState.current.name.load(ordering: .relaxed)
    callsOn.withLock { calls in if calls.indices.contains(runner) { calls[runner] += 1 } }
    spin(microseconds: 20)
  }
  // `progress`: written by every writer, observed only on a queue that its observer
  // blocks until the writers stop.
  let progress = Property(0, backlogLimit: overloadLimit)
  let writersStopped = Atomic<Bool>(false)
  let progressWatcher = PerSourceWatcher(
    run: run, label: "blocked queue observer of progress", stride: Int.max, strictly: true)
  let progressDeliveries = Atomic<Int>(0)
  let progressWrites = Atomic<Int>(0)
  let longestProgressWrite = Atomic<UInt64>(0)
  progress.observe(with: anchor, on: .queue(DispatchQueue(label: "overload.progress"))) { _, value in
    progressWatcher.see(value)
    progressDeliveries.wrappingAdd(1, ordering: .relaxed)
    let end = now() + overloadProgressBlock
    while !writersStopped.load(ordering: .acquiring) && now() < end { spin(microseconds: 200) }
  }
  let startMemory = residentBytes()
  let peakMemory = Atomic<Int>(startMemory)
  let stopSeen = Atomic<Int>(0)
  stop.observe(with: anchor) { _, round in stopSeen.store(round, ordering: .releasing) }

  run.work(workers: run.threads) { worker in
    let me = worker.index
    var round = 0
    var mergeSent = 0
    while worker.proceed() {
      if me == 0 && worker.thread.random.below(200) == 0 {
        // The stopper: its event must get through while everyone else writes.
        round += 1
        worker.at(.send)
        let start = now()
        stop.send(round)
        longestStop.max(now() - start, ordering: .relaxed)
        peakMemory.max(residentBytes(), ordering: .relaxed)
        continue
      }
      if stopSeen.load(ordering: .acquiring) > round, worker.thread.random.chance(5) {
        round = stopSeen.load(ordering: .acquiring)
        pauses.wrappingAdd(1, ordering: .relaxed)
      }
      // Workers 1 and 2 only send to the merge, faster than its observer runs.
      if me == 1 || me == 2 {
        worker.at(.send)
        let before = callsOn.withLock { $0[me] }
        producers[me - 1].send(me << 32 | mergeSent)
        mostCallsPerSend.max(callsOn.withLock { $0[me] } - before, ordering: .relaxed)
        mergeSent += 1
        continue
      }
      if worker.thread.random.below(100) < 3 {
        let toMap = worker.thread.random.chance(50)
        let watcher: Watcher
        let subscription: Subscription
        worker.at(.subscribe)
        let start = now()
        if toMap {
          let mapWatcher = PerSourceWatcher(
            run: run, label: "arriving observer of a map", stride: Int.max, strictly: true)
          watcher = mapWatcher
          subscription = mapped.observe { mapWatcher.see($0.commit) }
        } else {
          let tickWatcher = TickWatcher(run: run, label: "arriving observer", floor: 0)
          watcher = tickWatcher
          subscription = counter.observe { tickWatcher.see($0.commit) }
        }
        longestObserve.max(now() - start, ordering: .relaxed)
        worker.at(.cancel)
        subscription.cancel()
        watcher.cancelled.store(true, ordering: .releasing)
        continue
      }
      worker.at(.modify)
      let start = now()
      counter.modify { tick in
        tick = Tick(commit: tick.commit + 1, writer: me)
        committed.store(tick.commit, ordering: .releasing)
      }
      longestModify.max(now() - start, ordering: .relaxed)
      let progressStart = now()
      progress.modify { $0 += 1 }
      longestProgressWrite.max(now() - progressStart, ordering: .relaxed)
      progressWrites.wrappingAdd(1, ordering: .relaxed)
    }
  }
  writersStopped.store(true, ordering: .releasing)

  let value = counter.value.commit
  // The queue observer may still have up to the limit to run.
  _ = run.eventually { queueWatcher.last.load(ordering: .acquiring) == value }
  _ = run.eventually { mapQueueWatcher.last.load(ordering: .acquiring) == value }
  let finalProgress = progress.value
  if !run.eventually(within: 5, { progressWatcher.last.load(ordering: .acquiring) == finalProgress }) {
    run.violation(
      "the blocked queue observer of progress last saw \(progressWatcher.last.load(ordering: .acquiring)), "
        + "but the value is \(finalProgress)")
  }
  let longestProgress = longestProgressWrite.load(ordering: .relaxed)
  let progressBound = max(overloadLongestProgressWrite, 2 * longestModify.load(ordering: .relaxed))
  if longestProgress > progressBound {
    run.violation("a write to progress took \(longestProgress / 1_000_000) ms: a writer waited for a queue observer")
  }
  let all: [Watcher] = watchers + [queueWatcher, mapWatcher, mapQueueWatcher]
  for watcher in all where watcher.last.load(ordering: .acquiring) != value {
    run.violation("\(watcher.label) last saw \(watcher.last.load(ordering: .acquiring)), but the value is \(value)")
  }
  let peak = peakBacklog.load(ordering: .relaxed)
  if peak > overloadLimit + run.threads {
    run.violation("a handler saw \(peak) commits waiting, above the limit of \(overloadLimit)")
  }
  let peakMap = peakMapBacklog.load(ordering: .relaxed)
  // Reported, not checked (see the invariants above): how old a state of the map was,
  // in commits, when its observers received it.
  let peakMapQueue = peakMapQueueBacklog.load(ordering: .relaxed)
  let peakQueue = peakQueueBacklog.load(ordering: .relaxed)
  // One waiting state in the queue, and up to the limit in the source's backlog behind
  // the slow synchronous handlers, waiting to enter it (checked against twice the
  // limit, the bound from when the queue held up to the limit).
  if peakQueue > 2 * overloadLimit + run.threads {
    run.violation("the queue handler saw \(peakQueue) commits waiting, above twice the limit of \(overloadLimit)")
  }
  let mostCalls = mostCallsPerSend.load(ordering: .relaxed)
  if mostCalls > 4 * overloadLimit {
    run.violation("one send to a source of the merge ran \(mostCalls) of its observer's calls")
  }
  let growth = max(0, peakMemory.load(ordering: .relaxed) - startMemory)
  if growth > overloadMemoryGrowth {
    run.violation("memory grew by \(growth >> 20) MB under overload")
  }
  let longest = [
    ("modify", longestModify.load(ordering: .relaxed)), ("observe", longestObserve.load(ordering: .relaxed)),
    ("stopper send", longestStop.load(ordering: .relaxed)),
  ]
  for (name, nanoseconds) in longest where nanoseconds > overloadLongestCall {
    run.violation("the longest \(name) took \(nanoseconds / 1_000_000) ms")
  }
  overloadFigures.withLock {
    $0 =
      "checked: peak backlog \(peak) (≤ \(overloadLimit + run.threads)), on a queue \(peakQueue) "
      + "(≤ \(2 * overloadLimit + run.threads)), memory +\(growth >> 20) MB (≤ \(overloadMemoryGrowth >> 20)), "
      + "longest modify \(longestModify.load(ordering: .relaxed) / 1_000) µs, "
      + "observe \(longestObserve.load(ordering: .relaxed) / 1_000) µs, "
      + "stopper send \(longestStop.load(ordering: .relaxed) / 1_000) µs (each ≤ \(overloadLongestCall / 1_000) µs), "
      + "merge observer calls in one send \(mostCalls) (≤ \(4 * overloadLimit)), "
      + "longest write to progress \(longestProgress / 1_000) µs (≤ \(progressBound / 1_000) µs; "
      + "its queue observer blocks up to \(overloadProgressBlock / 1_000) µs per call), "
      + "progress's observer ended on the final value \(finalProgress) (= value) after "
      + "\(progressDeliveries.load(ordering: .relaxed)) calls for \(progressWrites.load(ordering: .relaxed)) writes; "
      + "reported: age in commits of a map's states \(peakMap), on a queue \(peakMapQueue); \(value) commits"
  }
  withExtendedLifetime(anchor) {}
}
