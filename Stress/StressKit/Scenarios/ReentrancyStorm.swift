// Scenario "reentrancy-storm": handlers, synchronous and on a queue, randomly send,
// modify, read, subscribe and cancel, on the source they observe and on others, while
// worker threads do the same from outside.
//
// Events carry their producer (a thread) and that producer's sequence number; property
// values carry their commit number, taken inside `modify`.
//
// Invariants:
// - no deadlock (the watchdog);
// - per-subscription order: each producer's events arrive in increasing order, and a
//   property's commits arrive consecutively (changes slide, never from x to x), or,
//   on a queue, where states coalesce, only move forward (merged changes slide too);
// - deliveries never nest: a synchronous handler of a source never runs inside another
//   synchronous handler of the same source on the same thread, and no handler runs
//   while it is already running;
// - a subscription added inside a handler does not receive the event in flight, nor
//   anything committed before it;
// - a subscription cancelled anywhere, even by itself or later in the same pass, is not
//   called again; an `observeOnce` handler runs at most once;
// - inside a handler, `value` is at least the value being delivered; after a `modify`
//   returns, its thread reads that commit or a later one;
// - at every checkpoint (handlers calmed, queues drained): `observerCount` equals the
//   live subscriptions of each source, and every property subscription ended on `value`;
// - at the end, once everything is cancelled, every handler has been released (each
//   captures a watcher object, and every watcher must be deinitialized).

import Dispatch
import Evented
import Synchronization

/// An event of the storm: who sent it, that thread's sequence number, and its depth in
/// a chain of sends from handlers.
struct StormEvent: Sendable {
  var producer: Int
  var seq: Int
  var depth: Int
}

/// A value of a storm property: its commit number and its depth.
struct StormValue: Equatable, Sendable {
  var commit: Int
  var depth: Int
}

/// What is being delivered when a handler acts, to seed the checks of what it creates.
enum InFlight {
  case event(source: Int, StormEvent)
  case value(source: Int, commit: Int)
  case none
}

/// The shared state of one storm.
final class Storm: Sendable {
  static let eventSources = 3
  static let properties = 2
  static var sources: Int { eventSources + properties }
  static let slotCount = 48

  let run: ScenarioRun
  let events = (0..<Storm.eventSources).map { _ in EventSource<StormEvent>() }
  let properties = (0..<Storm.properties).map { _ in Property(StormValue(commit: 0, depth: 0)) }
  let queue = DispatchQueue(label: "stress.storm", attributes: .concurrent)
  let table = Guarded([(Subscription, StormWatcher)?](repeating: nil, count: Storm.slotCount))
  /// While set, handlers only check; they do not act. Set at checkpoints.
  let calm = Atomic<Bool>(false)
  /// Handlers running now.
  let running = Atomic<Int>(0)
  /// Watchers made and deinitialized; each is captured by its handler only.
  let watchersMade = Atomic<Int>(0)
  let watchersFreed = Atomic<Int>(0)

  init(run: ScenarioRun) {
    self.run = run
  }

  /// Subscribes a new watcher to `source`, stores it in a random slot, and cancels the
  /// subscription it replaces.
  func subscribe(_ thread: ThreadState, inFlight: InFlight, once: Bool = false) {
    var random = thread.random
    let source = random.below(once ? Storm.eventSources : Storm.sources)
    let onQueue = !once && random.chance(20)
    let changes = random.chance(50)
    let slot = random.below(Storm.slotCount)
    thread.random = random
    let delivery: Delivery = onQueue ? .queue(queue) : .synchronous
    let watcher = StormWatcher(storm: self, source: source, onQueue: onQueue, isOnce: once)
    thread.at(.subscribe)
    thread.count()
    let subscription: Subscription
    if source < Storm.eventSources {
      var floor = [thread.id: thread.seq]
      if case .event(let from, let event) = inFlight, from == source {
        floor[event.producer] = max(floor[event.producer] ?? 0, event.seq)
      }
      watcher.seed(events: floor)
      let events = events[source]
      subscription =
        once
        ? events.observeOnce { watcher.receive($0) }
        : events.observe(on: delivery) { watcher.receive($0) }
    } else {
      let index = source - Storm.eventSources
      var floor = thread.lastCommit.count > index ? thread.lastCommit[index] : 0
      if case .value(let from, let commit) = inFlight, from == source { floor = max(floor, commit) }
      watcher.seed(commit: floor, changes: changes)
      let property = properties[index]
      subscription =
        changes
        ? property.observeChanges(on: delivery) { watcher.receive($0) }
        : property.observe(on: delivery) { watcher.receive($0) }
    }
    watcher.subscription.withLock { $0 = subscription }
    let old = table.withLock { slots in
      let old = slots[slot]
      slots[slot] = (subscription, watcher)
      return old
    }
    if let (oldSubscription, oldWatcher) = old { cancel(oldSubscription, oldWatcher, thread) }
  }

  func cancel(_ subscription: Subscription, _ watcher: StormWatcher, _ thread: ThreadState) {
    thread.at(.cancel)
    thread.count()
    subscription.cancel()
    watcher.cancelled.store(true, ordering: .releasing)
  }

  /// Cancels the subscription in a random slot, leaving the slot empty.
  func cancelRandom(_ thread: ThreadState) {
    let slot = thread.random.below(Storm.slotCount)
    let taken = table.withLock { slots in
      let old = slots[slot]
      slots[slot] = nil
      return old
    }
    if let (subscription, watcher) = taken { cancel(subscription, watcher, thread) }
  }

  func send(_ thread: ThreadState, depth: Int) {
    let source = thread.random.below(Storm.eventSources)
    thread.at(.send)
    thread.count()
    events[source].send(StormEvent(producer: thread.id, seq: thread.nextSeq(), depth: depth))
  }

  func modify(_ thread: ThreadState, depth: Int) {
    let index = thread.random.below(Storm.properties)
    thread.at(.modify)
    thread.count()
    let commit = properties[index].modify { value in
      value = StormValue(commit: value.commit + 1, depth: depth)
      return value.commit
    }
    while thread.lastCommit.count <= index { thread.lastCommit.append(0) }
    thread.lastCommit[index] = commit
    thread.at(.read)
    let read = properties[index].value.commit
    if read < commit { run.violation("after modify returned commit \(commit), its thread read \(read)") }
  }

  /// One random action from inside a handler.
  func react(_ thread: ThreadState, depth: Int, inFlight: InFlight, watcher: StormWatcher) {
    if depth >= 3 || calm.load(ordering: .relaxed) { return }
    let roll = thread.random.below(100)
    if roll < 12 {
      send(thread, depth: depth + 1)
    } else if roll < 20 {
      modify(thread, depth: depth + 1)
    } else if roll < 26 {
      let index = thread.random.below(Storm.properties)
      thread.count()
      let read = properties[index].value.commit
      if case .value(let from, let commit) = inFlight, from == index + Storm.eventSources, read < commit {
        run.violation("inside a handler of commit \(commit), value read \(read)")
      }
    } else if roll < 30 {
      subscribe(thread, inFlight: inFlight)
    } else if roll < 32 {
      if let subscription = watcher.subscription.withLock({ $0 }) { cancel(subscription, watcher, thread) }
    } else if roll < 35 {
      cancelRandom(thread)
    } else if roll < 37 {
      subscribe(thread, inFlight: inFlight, once: true)
    }
  }
}

/// Checks what one storm subscription receives, and acts from its handler.
final class StormWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `seen`, `previous` and `floor` are written before the
  // subscription exists or inside its handler, which Evented runs serially.
  let storm: Storm
  let source: Int
  let onQueue: Bool
  let isOnce: Bool
  let fired = Atomic<Int>(0)
  let subscription = Guarded<Subscription?>(nil)
  private var seen: [Int: Int] = [:]
  private var previous: Int?
  private var floor = 0
  private var changes = false

  init(storm: Storm, source: Int, onQueue: Bool, isOnce: Bool) {
    self.storm = storm
    self.source = source
    self.onQueue = onQueue
    self.isOnce = isOnce
    super.init(run: storm.run, label: "storm subscription to source \(source)")
    storm.watchersMade.wrappingAdd(1, ordering: .relaxed)
  }

  deinit {
    storm.watchersFreed.wrappingAdd(1, ordering: .relaxed)
  }

  /// Whether `observerCount` should count it.
  var isLive: Bool {
    !cancelled.load(ordering: .acquiring) && !(isOnce && fired.load(ordering: .acquiring) > 0)
  }

  func seed(events floor: [Int: Int]) {
    seen = floor
  }

  func seed(commit floor: Int, changes: Bool) {
    self.floor = floor
    self.changes = changes
  }

  private func begin() -> (ThreadState, UInt64) {
    enter()
    storm.running.wrappingAdd(1, ordering: .relaxed)
    let thread = ThreadState.current
    thread.at(.handler)
    let outer = thread.delivering
    if !onQueue {
      let bit: UInt64 = 1 << UInt64(source)
      if outer & bit != 0 { run.violation("a delivery of source \(source) nested inside another on the same thread") }
      thread.delivering = outer | bit
    }
    if isOnce && fired.wrappingAdd(1, ordering: .relaxed).newValue > 1 {
      run.violation("an observeOnce handler ran twice")
    }
    return (thread, outer)
  }

  private func end(_ thread: ThreadState, _ outer: UInt64, last: Int) {
    thread.delivering = outer
    storm.running.wrappingSubtract(1, ordering: .relaxed)
    exit(last)
  }

  func receive(_ event: StormEvent) {
    let (thread, outer) = begin()
    if let last = seen[event.producer], event.seq <= last {
      run.violation("producer \(event.producer)'s event \(event.seq) arrived after \(last)")
    }
    seen[event.producer] = event.seq
    storm.react(thread, depth: event.depth, inFlight: .event(source: source, event), watcher: self)
    end(thread, outer, last: 0)
  }

  func receive(_ value: StormValue) {
    let (thread, outer) = begin()
    if let previous {
      // On a queue, states coalesce: an observer may skip to the newest, never back.
      if onQueue ? value.commit <= previous : value.commit != previous + 1 {
        run.violation("saw commit \(value.commit) right after \(previous)")
      }
    } else if value.commit < floor {
      run.violation("first value \(value.commit) is older than commit \(floor) it must follow")
    }
    previous = value.commit
    storm.react(thread, depth: value.depth, inFlight: .value(source: source, commit: value.commit), watcher: self)
    end(thread, outer, last: value.commit)
  }

  func receive(_ change: Change<StormValue>) {
    let (thread, outer) = begin()
    let old = change.oldValue.commit
    let new = change.newValue.commit
    if change.oldValue == change.newValue {
      run.violation("received a change from a value to an equal value")
    } else if onQueue ? new <= old : new != old + 1 {
      // On a queue, waiting changes merge: one may span several commits, never go back.
      run.violation("change from \(old) to \(new) skips or reverses commits")
    }
    if let previous, previous != old {
      run.violation("change from \(old) does not follow the previous value \(previous)")
    } else if previous == nil, old < floor {
      run.violation("first change starts at \(old), before commit \(floor) it must follow")
    }
    previous = new
    storm.react(thread, depth: change.newValue.depth, inFlight: .value(source: source, commit: new), watcher: self)
    end(thread, outer, last: new)
  }
}

let reentrancyStorm = Scenario(
  name: "reentrancy-storm",
  summary: "handlers send, write, subscribe, cancel and read on every source; no deadlock, order kept, no nesting",
  unavailable: nil
) { run in
  let storm = Storm(run: run)

  /// At the end, handlers stay calm, so that none subscribes while everything is cancelled.
  func checkpoint(final: Bool) {
    storm.calm.store(true, ordering: .relaxed)
    defer { if !final { storm.calm.store(false, ordering: .relaxed) } }
    // Let queued handlers finish; calm handlers start nothing new.
    var quiet = 0
    _ = run.eventually(within: 5) {
      quiet = storm.running.load(ordering: .relaxed) == 0 ? quiet + 1 : 0
      return quiet >= 20
    }
    let entries = storm.table.withLock { $0.compactMap { $0 } }
    var live = [Int](repeating: 0, count: Storm.sources)
    for (_, watcher) in entries where watcher.isLive { live[watcher.source] += 1 }
    var counted = storm.events.map(\.observerCount) + storm.properties.map(\.observerCount)
    if counted != live {
      _ = run.eventually {
        counted = storm.events.map(\.observerCount) + storm.properties.map(\.observerCount)
        return counted == live
      }
      if counted != live { run.violation("observerCount per source is \(counted), live subscriptions \(live)") }
    }
    // One more commit to each property, so that every change subscription has one to end on.
    for property in storm.properties {
      property.modify { $0 = StormValue(commit: $0.commit + 1, depth: 3) }
    }
    for (_, watcher) in entries where watcher.isLive && watcher.source >= Storm.eventSources {
      let value = storm.properties[watcher.source - Storm.eventSources].value.commit
      let converged = run.eventually { watcher.last.load(ordering: .acquiring) == value }
      if !converged {
        run.violation(
          "a subscription to source \(watcher.source) ended on \(watcher.last.load(ordering: .acquiring)), "
            + "but the value is \(value)")
        break
      }
    }
  }

  run.work(workers: run.threads, round: 1_000_000_000, checkpoint: { checkpoint(final: false) }) { worker in
    let thread = worker.thread
    while worker.proceed() {
      let roll = thread.random.below(100)
      if roll < 40 {
        storm.send(thread, depth: 0)
      } else if roll < 60 {
        storm.modify(thread, depth: 0)
      } else if roll < 80 {
        storm.subscribe(thread, inFlight: .none, once: thread.random.chance(10))
      } else {
        storm.cancelRandom(thread)
      }
    }
  }
  checkpoint(final: true)
  // Cancel everything; then nothing may be left.
  let thread = ThreadState.current
  for slot in 0..<Storm.slotCount {
    let taken = storm.table.withLock { slots in
      let old = slots[slot]
      slots[slot] = nil
      return old
    }
    if let (subscription, watcher) = taken { storm.cancel(subscription, watcher, thread) }
  }
  let left = storm.events.map(\.observerCount) + storm.properties.map(\.observerCount)
  if left.contains(where: { $0 != 0 }) { run.violation("subscriptions left after all were cancelled: \(left)") }
  // Every handler, and the watcher it captures, must be released once cancelled.
  let released = run.eventually {
    storm.watchersMade.load(ordering: .relaxed) == storm.watchersFreed.load(ordering: .relaxed)
  }
  if !released {
    let kept = storm.watchersMade.load(ordering: .relaxed) - storm.watchersFreed.load(ordering: .relaxed)
    run.violation(
      "\(kept) handlers were never released after their subscriptions were cancelled (their captures leak)")
  }
}
