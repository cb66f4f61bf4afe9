// Scenario "async-consumers": tasks iterate `values` and `events(bufferingPolicy:)`
// while threads write and send; the tasks break out, finish or are cancelled at random.
//
// Invariants:
// - `values` delivers a property's values in commit order (the counter only grows, so
//   each value is larger than the one before), starting no earlier than the value read
//   just before the sequence was made;
// - `events(bufferingPolicy: .unbounded)` loses nothing: each producer's events arrive
//   consecutively; with a bounded policy they still arrive in increasing order;
// - every consumer of `values` that runs until the writers stop ends on the latest value;
// - no leaked subscriptions: once every task has ended, `observerCount` is zero.

import Dispatch
import Evented
import Synchronization

/// One consumer task's state, shared with the controller.
private final class Consumer: Sendable {
  let last = Atomic<Int>(-1)
  let done = Atomic<Bool>(false)
}

/// Checks one producer-stamped stream: increasing, and consecutive when nothing may drop.
private struct ProducerOrder {
  var last: [Int: Int] = [:]
  let lossless: Bool

  mutating func check(_ event: StormEvent, _ run: ScenarioRun) {
    if let previous = last[event.producer] {
      if event.seq <= previous {
        run.violation("events: producer \(event.producer)'s event \(event.seq) arrived after \(previous)")
      } else if lossless && event.seq != previous + 1 {
        run.violation(
          "events(.unbounded): producer \(event.producer)'s events \(previous + 1)..<\(event.seq) were lost")
      }
    }
    last[event.producer] = event.seq
  }
}

let asyncConsumers = Scenario(
  name: "async-consumers",
  summary: "tasks iterate values and events and are cancelled at random; order, no loss, no leaked subscriptions",
  unavailable: nil
) { run in
  let counter = Property(0)
  let events = EventSource<StormEvent>()

  /// Starts a consumer task; `limit` elements, or until cancelled when nil.
  @Sendable func consume(_ kind: Int, limit: Int?) -> (Task<Void, Never>, Consumer) {
    let consumer = Consumer()
    let task = Task.detached {
      defer { consumer.done.store(true, ordering: .releasing) }
      var count = 0
      switch kind {
      case 0, 1:
        let floor = counter.value
        var previous = -1
        let sequence = kind == 0 ? counter.values : counter.values(bufferingPolicy: .unbounded)
        for await value in sequence {
          ThreadState.current.count()
          if previous < 0 && value < floor {
            run.violation("values: first value \(value) is older than \(floor), read before the sequence was made")
          } else if previous >= 0 && value <= previous {
            run.violation("values: \(value) arrived after \(previous)")
          } else if kind == 1 && previous >= 0 && value != previous + 1 {
            run.violation("values(.unbounded): values \(previous + 1)..<\(value) were lost")
          }
          previous = value
          consumer.last.store(value, ordering: .releasing)
          count += 1
          if let limit, count >= limit { break }
        }
      default:
        let policy: BufferingPolicy = kind == 2 ? .unbounded : kind == 3 ? .bufferingNewest(4) : .bufferingOldest(4)
        var order = ProducerOrder(lossless: kind == 2)
        for await event in events.events(bufferingPolicy: policy) {
          ThreadState.current.count()
          order.check(event, run)
          count += 1
          if let limit, count >= limit { break }
        }
      }
    }
    return (task, consumer)
  }

  // Consumers that run until the writers stop, and must end on the latest value.
  // (Unbounded consumers are short-lived only: a steady one would buffer without limit.)
  let steady = [consume(0, limit: nil), consume(0, limit: nil), consume(3, limit: nil)]
  // Few writers: a commit made while another thread delivers is queued for that thread,
  // and buffering into many sequences is slower than committing, so many writers would
  // leave one thread draining a backlog long after the time is up.
  let writers = max(1, run.threads / 4)

  run.work(workers: run.threads) { worker in
    let thread = worker.thread
    if worker.index < writers {
      while worker.proceed() {
        // Evented has no backpressure: a commit made while another thread delivers is
        // queued for it, and writers that outpace delivery grow that queue without
        // bound. Like a real producer, keep the lead over the slowest steady consumer
        // bounded, so that convergence is checked, not the length of a backlog.
        let lead = counter.value - steady.prefix(2).map { $0.1.last.load(ordering: .relaxed) }.min()!
        if lead > 20_000 {
          pause(microseconds: 100)
          continue
        }
        if thread.random.chance(50) {
          worker.at(.modify)
          counter.modify { $0 += 1 }
        } else {
          worker.at(.send)
          events.send(StormEvent(producer: thread.id, seq: thread.nextSeq(), depth: 0))
        }
      }
      return
    }
    // Controllers: keep up to 8 short-lived consumers each, cancel some at random.
    var running: [(Task<Void, Never>, Consumer)] = []
    while worker.proceed() {
      running.removeAll { $0.1.done.load(ordering: .acquiring) }
      if running.count < 8 {
        worker.at(.subscribe)
        // Unbounded consumers always stop after a while: left running, they would buffer
        // without limit while the writers outpace them.
        let kind = thread.random.below(5)
        let unbounded = kind == 1 || kind == 2
        let limit = !unbounded && thread.random.chance(30) ? nil : 1 + thread.random.below(200)
        running.append(consume(kind, limit: limit))
      } else if thread.random.chance(50) {
        worker.at(.cancel)
        running.remove(at: thread.random.below(running.count)).0.cancel()
      }
      pause(microseconds: 200)
    }
    for (task, _) in running { task.cancel() }
  }

  let latest = counter.value
  for (index, (_, consumer)) in steady.prefix(2).enumerated() {
    let converged = run.eventually(within: 5) { consumer.last.load(ordering: .acquiring) == latest }
    if !converged {
      run.violation(
        "values consumer \(index) ended on \(consumer.last.load(ordering: .acquiring)), but the value is \(latest)")
    }
  }
  for (task, _) in steady { task.cancel() }
  let settled = run.eventually(within: 5) { counter.observerCount == 0 && events.observerCount == 0 }
  if !settled {
    run.violation(
      "subscriptions left after every consumer ended: \(counter.observerCount) on values, "
        + "\(events.observerCount) on events")
  }
}
