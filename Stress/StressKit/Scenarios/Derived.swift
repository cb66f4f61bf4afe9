// Scenario "derived": many threads write the sources of derived values (map,
// combineLatest, flatMapLatest, event map and merge) while subscriptions record what
// the derived values deliver, and workers create, observe and drop derived values of
// their own.
//
// The counter and the other property change only by `modify` increments, so their
// commits are consecutive. Invariants (glitch freedom first):
// - `counter.map { $0 * 2 }` delivers consecutive even numbers (one root: every commit,
//   once, in order); its Equatable parity never repeats a value;
// - a diamond, `counter.map { $0 * 2 }.combineLatest(counter.map { $0 + 1 })`, only
//   delivers pairs of one state, `(2n, n + 1)`, each commit once, in order; and
//   `counter.combineLatest(counter)` only `(n, n)`, consecutively;
// - `first.combineLatest(second)`, where one thread writes `first = n` and then
//   `second = n`, only delivers states that existed in that order, `(n, n - 1)` or
//   `(n, n)`, never `second`'s write with an older `first` (other threads subscribe
//   to `first` now and then, so that its commits are delivered late, by them);
// - `counter.combineLatest(other)`: each side only moves forward and consecutive
//   pairs differ (states may coalesce when threads race, never go back);
// - `selector.flatMapLatest { targets[$0] }`: the values of each target arrive in its
//   commit order;
// - `counter.flatMapLatest` and `parity.flatMapLatest`, each picking `counter.map { 2n }`
//   for an even counter and `counter.map { 2n + 1 }` for an odd one (targets that read
//   the outer source's root, observed elsewhere first), and `flip.map { parity }`'s
//   choosing between `flip` itself (whose slow observer makes its deliveries lag) and
//   `flip.map { -n - 1 }`: every value delivered is the target its own commit picks
//   (never the old target at the new commit), and the commits only move forward; the
//   same choice of targets whose values are not `Equatable` (so that no repeat is
//   hidden as a duplicate) never delivers a commit twice, while workers write the
//   counter and subscribe to and cancel observers of it all the time;
// - event `map` of a merge: each producer's events arrive in the order it sent them;
// - `inA.combineLatest(inB)` and `inItems.readOnly.map { $0[0] }.combineLatest(inB)`,
//   where one thread writes all three in one `transaction`, only deliver and read
//   `(n, n)`: never part of a transaction, and never back;
// - always current: after `modify` returns commit c, the writer reads at least c
//   through `map`, `combineLatest` and `flatMapLatest`, and the diamond reads one state;
//   an observer it then adds to a `flatMapLatest` that always follows that target first
//   receives at least c;
// - `inA.map { $0 }`, read back by the transaction's writer inside it (so that its memo
//   would hold the transaction's state), is never read ahead of `inB` by another thread:
//   a one-root value loads its root's version without the lock unless a transaction may
//   hide it (`DerivedProperty.singleVersion`); and `inB.combineLatest(inA)`, read back
//   by the writer between its writes of `inA` and `inB`, only reads `(n, n)` on other
//   threads (a state computed inside a transaction is never remembered for them), and
//   an observer of `inA.combineLatest(inB.map { $0 })` arriving there does not make it
//   deliver the writer's view to the others; an observer of `inA.map { $0 }`, observed
//   only there, first receives at least the state before the transaction, and a
//   `combineLatest` made there only delivers `(n, n)`;
// - `twice.map { $0 }`, where threads write `twice` only in transactions that write an
//   odd value and then an even one, only delivers even values, however late another
//   thread delivers the transactions' commits;
// - at every checkpoint and at the end, the last value each subscription saw equals
//   the derived `value`;
// - at the end, the sources' observer counts are back to the permanent derived values
//   only: the values the workers made and dropped ended their subscriptions.

import Dispatch
import Evented
import Synchronization

/// Checks consecutive values: each must be the previous plus `step` (for an observer
/// on a queue, `skipsAhead`, where states coalesce: a later multiple of it).
final class StepWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: Int?
  private let step: Int
  private let skipsAhead: Bool

  init(run: ScenarioRun, label: String, step: Int, skipsAhead: Bool = false) {
    self.step = step
    self.skipsAhead = skipsAhead
    super.init(run: run, label: label)
  }

  func see(_ value: Int) {
    enter()
    if let previous, skipsAhead ? value <= previous || (value - previous) % step != 0 : value != previous + step {
      run.violation("\(label): saw \(value) right after \(previous)")
    }
    previous = value
    exit(value)
  }
}

/// Checks that consecutive values differ (exact dedup of an Equatable result).
final class FlipWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: Bool?

  func see(_ value: Bool) {
    enter()
    if let previous, previous == value { run.violation("\(label): received \(value) twice in a row") }
    previous = value
    exit(value ? 1 : 0)
  }
}

/// Checks a pair of two roots: each side only moves forward, and consecutive pairs
/// differ (the pair is Equatable, so duplicates are skipped).
final class PairWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: (Int, Int)?

  func see(_ pair: (Int, Int)) {
    enter()
    if let previous, pair.0 < previous.0 || pair.1 < previous.1 || pair == previous {
      run.violation("\(label): pair went from \(previous) to \(pair): went back or repeated")
    }
    previous = pair
    exit(pair.0 << 32 | pair.1)
  }
}

/// Checks the pairs of one root seen through two paths: every pair must be
/// `state(n)` for some commit n, and the commits consecutive (each once, in order; for
/// an observer on a queue, `skipsAhead`, where states coalesce: only moving forward).
final class StateWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: Int?
  private let commit: @Sendable ((Int, Int)) -> Int?
  private let skipsAhead: Bool

  /// - Parameter commit: The commit a pair is the state of; nil if it is none.
  init(
    run: ScenarioRun, label: String, skipsAhead: Bool = false, commit: @escaping @Sendable ((Int, Int)) -> Int?
  ) {
    self.commit = commit
    self.skipsAhead = skipsAhead
    super.init(run: run, label: label)
  }

  func see(_ pair: (Int, Int)) {
    enter()
    guard let commit = commit(pair) else {
      run.violation("\(label): delivered \(pair), a state that never existed (a glitch)")
      return exit(-1)
    }
    if let previous, skipsAhead ? commit <= previous : commit != previous + 1 {
      run.violation("\(label): saw commit \(commit) right after \(previous)")
    }
    previous = commit
    exit(commit)
  }
}

/// Checks `first.combineLatest(second)` where one thread writes `first = n`, then
/// `second = n`: only `(n, n - 1)` and `(n, n)` existed, and states move forward.
final class ProgramOrderWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: (Int, Int)?

  func see(_ pair: (Int, Int)) {
    enter()
    if !(pair.1 <= pair.0 && pair.0 <= pair.1 + 1) {
      run.violation("\(label): delivered \(pair): the second write with an older first (a glitch)")
    } else if let previous, pair.0 < previous.0 || pair.1 < previous.1 {
      run.violation("\(label): went back from \(previous) to \(pair)")
    }
    previous = pair
    exit(pair.0 << 32 | pair.1)
  }
}

/// Checks `inA.combineLatest(inB)` where one thread writes both in one transaction:
/// only `(n, n)` existed for other threads, and states move forward.
final class TransactionWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: Int?

  func see(_ pair: (Int, Int)) {
    enter()
    if pair.0 != pair.1 {
      run.violation("\(label): delivered \(pair): part of a transaction")
    } else if let previous, pair.0 < previous {
      run.violation("\(label): went back from \(previous) to \(pair.0)")
    }
    previous = pair.0
    exit(pair.0)
  }
}

/// Checks that the values of each source (encoded as `source * stride + n`) increase.
final class PerSourceWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `latest` is touched only by the handler; see Watcher.
  private var latest: [Int: Int] = [:]
  private let stride: Int
  private let strictly: Bool

  init(run: ScenarioRun, label: String, stride: Int, strictly: Bool) {
    self.stride = stride
    self.strictly = strictly
    super.init(run: run, label: label)
  }

  func see(_ value: Int) {
    enter()
    let source = value / stride
    let n = value % stride
    if let before = latest[source], strictly ? n <= before : n < before {
      run.violation("\(label): source \(source)'s \(n) arrived after \(before)")
    }
    latest[source] = n
    exit(value)
  }
}

/// Checks a `flatMapLatest` whose targets read its outer source's root: a value comes
/// from target `t` at commit `n` (`decode`), which only exists when `t` is `n`'s
/// parity; commits move forward, each once.
final class ChoiceWatcher: Watcher, @unchecked Sendable {
  // @unchecked Sendable: `previous` is touched only by the handler; see Watcher.
  private var previous: Int?
  private let decode: @Sendable (Int) -> (commit: Int, target: Int)

  init(run: ScenarioRun, label: String, decode: @escaping @Sendable (Int) -> (commit: Int, target: Int)) {
    self.decode = decode
    super.init(run: run, label: label)
  }

  func see(_ value: Int) {
    enter()
    let (commit, target) = decode(value)
    if target != commit % 2 {
      run.violation("\(label): target \(target) delivered commit \(commit), which picks the other (a glitch)")
    } else if let previous, commit <= previous {
      run.violation("\(label): commit \(commit) arrived after \(previous)")
    }
    previous = commit
    exit(value)
  }
}

private final class DerivedAnchor: Sendable {}

/// A value that is not `Equatable`: a derived value of it delivers every state, so a
/// state delivered twice shows.
struct Stamped: Sendable {
  let value: Int
}

/// One thread writes `p = 1`, `q = 1`, `p = 2`, `q = 2` while two other threads hold the
/// delivering role of `p` and of `q` (each inside the replay of a subscription of its
/// own); then they deliver, `p`'s first. An observer of `p.combineLatest(q)` must only
/// see states that existed in that program order: computing from `p`'s delivered
/// value `1` and `q`'s latest value `2` would give `(1, 2)`, which never existed.
func lateDeliveryProbe(_ run: ScenarioRun) {
  let p = Property(0)
  let q = Property(0)
  let watcher = ProgramOrderWatcher(run: run, label: "late-delivery probe")
  let observed = p.combineLatest(q).observe { watcher.see($0) }
  let holders = [p, q].map { source in
    let holding = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    let isReplay = Atomic<Bool>(true)
    DispatchQueue.global().async {
      let late = source.observe { _ in
        guard isReplay.exchange(false, ordering: .relaxed) else { return }
        holding.signal()
        release.wait()
      }
      late.cancel()
      done.signal()
    }
    holding.wait()
    return (release, done)
  }
  p.value = 1
  q.value = 1
  p.value = 2
  q.value = 2
  for (release, done) in holders {
    release.signal()
    done.wait()
  }
  observed.cancel()
}

let derived = Scenario(
  name: "derived",
  summary: "writers drive map, combineLatest, flatMapLatest and event operators; order, no torn pair, convergence",
  unavailable: nil
) { run in
  let stride = 1 << 32
  let counter = Property(0)
  let other = Property(0)
  let targets = (0..<3).map { Property($0 * stride) }
  let selector = Property(0)
  let doubled = counter.map { $0 * 2 }
  let parity = counter.map { $0 % 2 == 0 }
  let pair = counter.combineLatest(other)
  let diamond = counter.map { $0 * 2 }.combineLatest(counter.map { $0 + 1 })
  let selfPair = counter.combineLatest(counter)
  let first = Property(0)
  let second = Property(0)
  let ordered = first.combineLatest(second)
  let pairsWritten = Atomic<Int>(0)
  let inA = Property(0)
  let inB = Property(0)
  let whole = inA.combineLatest(inB.map { $0 })
  let inItems = ArrayProperty([0])
  let wholeWithArray = inItems.readOnly.map { $0[0] }.combineLatest(inB)
  let aAlone = inA.map { $0 }
  let reversed = inB.combineLatest(inA)  // roots: inB, then inA, which is written first
  let rarelyObserved = inA.map { $0 }  // observed only inside some transactions
  let twice = Property(0)  // written only by transactions that write it twice: odd, then even
  let twiceMapped = twice.map { $0 }
  let followed = selector.flatMapLatest { targets[$0] }
  // Targets that read the outer source's root, each observed before the flatMapLatests
  // (so that it follows the root ahead of them). Not `doubled`: a switch subscribes to
  // its target, whose deliveries may then coalesce, and `doubled`'s observers check
  // every commit.
  let evenTarget = counter.map { $0 * 2 }
  let oddTarget = counter.map { $0 * 2 + 1 }
  // A property as a target, over a map of it: `flip`'s slow observer makes the
  // target's deliveries lag behind the map's reads of its latest state.
  let flip = Property(0)
  let flipParity = flip.map { $0 % 2 == 0 }
  let negatedOdd = flip.map { -$0 - 1 }
  let byDouble: @Sendable (Int) -> (commit: Int, target: Int) = { ($0 / 2, $0 % 2) }
  let bySign: @Sendable (Int) -> (commit: Int, target: Int) = { $0 >= 0 ? ($0, 0) : (-$0 - 1, 1) }
  let evenStamped = counter.map { Stamped(value: $0 * 2) }
  let oddStamped = counter.map { Stamped(value: $0 * 2 + 1) }
  let stampedChoice = parity.flatMapLatest { $0 ? evenStamped : oddStamped }
  let chosen = [
    (
      "flatMapLatest over its targets' property", counter.flatMapLatest { $0 % 2 == 0 ? evenTarget : oddTarget },
      byDouble
    ),
    (
      "flatMapLatest over a map of its targets' property", parity.flatMapLatest { $0 ? evenTarget : oddTarget },
      byDouble
    ),
    (
      "flatMapLatest to a property, over a map of it", flipParity.flatMapLatest { $0 ? flip.readOnly : negatedOdd },
      bySign
    ),
  ]
  // One per target, whose outer source never changes: a new observer's replay holds
  // the target's latest commit (a switch waiting for its delivery is not caught up).
  let steady = targets.indices.map { index in Property(index).flatMapLatest { targets[$0] } }
  let producers = (0..<2).map { _ in EventSource<Int>() }
  let events = producers.merge().map { $0 }
  let anchor = DerivedAnchor()
  for target in [evenTarget, oddTarget, negatedOdd] { target.observe(with: anchor) { _, _ in } }
  flip.observe(with: anchor) { _, _ in spin(microseconds: 20) }
  twiceMapped.observe(with: anchor) { _, value in
    if value % 2 != 0 { run.violation("a map of a property written twice per transaction delivered \(value)") }
  }
  // Written only by a handler of `trigger`, three times per event: the writes are
  // delivered after the handler returns, by whichever thread delivers the trigger.
  // `echo`'s own observer receives each of them, in order; a map of it may skip to
  // the newest, never back.
  let trigger = EventSource<Int>()
  let echo = Property(0)
  let echoed = echo.map { $0 }
  trigger.observe(with: anchor) { _, _ in
    for _ in 0..<3 { echo.modify { $0 += 1 } }
  }
  let echoes = PerSourceWatcher(
    run: run, label: "observer of a map written from a handler", stride: Int.max, strictly: true)
  echoed.observe(with: anchor) { _, value in echoes.see(value) }
  let echoCommits = StepWatcher(run: run, label: "observer of a property written from a handler", step: 1)
  echo.observe(with: anchor) { _, value in echoCommits.see(value) }
  let queue = DispatchQueue(label: "stress.derived", attributes: .concurrent)

  var watchers: [(Watcher, onQueue: Bool, current: () -> Int)] = [
    (echoes, false, { echoed.value }), (echoCommits, false, { echo.value }),
  ]
  for (index, delivery) in [Delivery.synchronous, .queue(queue)].enumerated() {
    let onQueue = index == 1
    let steps = StepWatcher(run: run, label: "map observer \(index)", step: 2, skipsAhead: onQueue)
    doubled.observe(with: anchor, on: delivery) { _, value in steps.see(value) }
    let flips = FlipWatcher(run: run, label: "parity observer \(index)")
    parity.observe(with: anchor, on: delivery) { _, value in flips.see(value) }
    let pairs = PairWatcher(run: run, label: "combineLatest observer \(index)")
    pair.observe(with: anchor, on: delivery) { _, value in pairs.see(value) }
    let diamonds = StateWatcher(run: run, label: "diamond observer \(index)", skipsAhead: onQueue) { pair in
      pair.0 == 2 * (pair.1 - 1) ? pair.1 - 1 : nil
    }
    diamond.observe(with: anchor, on: delivery) { _, value in diamonds.see(value) }
    let selves = StateWatcher(run: run, label: "self-combination observer \(index)", skipsAhead: onQueue) { pair in
      pair.0 == pair.1 ? pair.0 : nil
    }
    selfPair.observe(with: anchor, on: delivery) { _, value in selves.see(value) }
    let orders = ProgramOrderWatcher(run: run, label: "program-order observer \(index)")
    ordered.observe(with: anchor, on: delivery) { _, value in orders.see(value) }
    let wholes = TransactionWatcher(run: run, label: "transaction observer \(index)")
    whole.observe(with: anchor, on: delivery) { _, value in wholes.see(value) }
    let arrayWholes = TransactionWatcher(run: run, label: "transaction observer with an array \(index)")
    wholeWithArray.observe(with: anchor, on: delivery) { _, value in arrayWholes.see(value) }
    let follows = PerSourceWatcher(run: run, label: "flatMapLatest observer \(index)", stride: stride, strictly: false)
    followed.observe(with: anchor, on: delivery) { _, value in follows.see(value) }
    for (label, choice, decode) in chosen {
      let choices = ChoiceWatcher(run: run, label: "\(label), observer \(index)", decode: decode)
      choice.observe(with: anchor, on: delivery) { _, value in choices.see(value) }
      watchers.append((choices, onQueue, { choice.value }))
    }
    let stamps = ChoiceWatcher(
      run: run, label: "flatMapLatest of values that are not Equatable, observer \(index)", decode: byDouble)
    stampedChoice.observe(with: anchor, on: delivery) { _, stamped in stamps.see(stamped.value) }
    watchers.append((stamps, onQueue, { stampedChoice.value.value }))
    let sent = PerSourceWatcher(run: run, label: "event observer \(index)", stride: stride, strictly: true)
    events.observe(with: anchor, on: delivery) { _, value in sent.see(value) }
    watchers += [
      (steps, onQueue, { doubled.value }),
      (flips, onQueue, { parity.value ? 1 : 0 }),
      (pairs, onQueue, { pair.value.0 << 32 | pair.value.1 }),
      (diamonds, onQueue, { diamond.value.1 - 1 }),
      (selves, onQueue, { selfPair.value.0 }),
      (orders, onQueue, { ordered.value.0 << 32 | ordered.value.1 }),
      (wholes, onQueue, { whole.value.0 }),
      (arrayWholes, onQueue, { wholeWithArray.value.0 }),
      (follows, onQueue, { followed.value }),
    ]
  }

  lateDeliveryProbe(run)
  var failed = false
  func converge(_ when: String) {
    lateDeliveryProbe(run)
    if failed && when != "at the end" { return }
    for (watcher, onQueue, current) in watchers {
      let expected = current()
      // Queue watchers may still have up to the backlog limit to run.
      let converged = failed || run.eventually(within: 10) { watcher.last.load(ordering: .acquiring) == expected }
      if !converged || (!onQueue && watcher.last.load(ordering: .acquiring) != expected) {
        failed = true
        run.violation(
          "\(when): \(watcher.label) last saw \(watcher.last.load(ordering: .acquiring)), value is \(expected)")
      }
    }
  }

  run.work(workers: run.threads, round: 500_000_000, checkpoint: { converge("at a checkpoint") }) { worker in
    var temporary: [(ReadOnlyProperty<Int>, Subscription?)] = []
    var probes: [Subscription] = []
    var sent = 0
    var written = 0
    var twiceWritten = 0
    while worker.proceed() {
      let roll = worker.thread.random.below(100)
      if worker.index == 2 && roll < 30 {
        // The one writer of `inA` and `inB`, always together.
        written += 1
        worker.at(.write)
        let firstSeen = Atomic<Int>(-1)
        let (late, madeObserver) = transaction { () -> (Subscription?, Subscription?) in
          inItems[0] = written
          inA.value = written
          if aAlone.value != written {
            run.violation("the transaction's writer read \(aAlone.value) back, not \(written)")
          }
          let own = reversed.value  // the transaction's own state, (written - 1, written)
          if own.1 != written { run.violation("the transaction's writer read \(own) back through a pair") }
          // An observer arriving here must not make `whole` commit this thread's view.
          let arriving = written % 4 == 0 ? whole.observe { _ in } : nil
          // Nor start from an old state, or from this thread's view of a value made here.
          let late =
            written % 4 == 1
            ? rarelyObserved.observe { value in
              _ = firstSeen.compareExchange(expected: -1, desired: value, ordering: .relaxed)
            }
            : nil
          let made = written % 4 == 2 ? inB.combineLatest(inA) : nil
          let madeObserver = made?.observe { pair in
            if pair.0 != pair.1 {
              run.violation("a combineLatest made inside a transaction delivered \(pair): part of it")
            }
          }
          spin(microseconds: 5)  // widens the window in which only `inItems` and `inA` are written
          inB.value = written
          arriving?.cancel()
          return (late, madeObserver)
        }
        late?.cancel()
        madeObserver?.cancel()
        let first = firstSeen.load(ordering: .relaxed)
        if late != nil, first < written - 1 {
          run.violation("an observer arriving inside transaction \(written) first received \(first), an older state")
        }
      } else if worker.index > 2 && roll < 5 {
        worker.at(.read)
        let read = whole.value
        if read.0 != read.1 { run.violation("read \(read) from the transaction's combineLatest: part of it") }
        for _ in 0..<16 {  // a burst: the window between reading the two roots is short
          let pair = reversed.value
          if pair.0 != pair.1 { run.violation("read \(pair) from inB.combineLatest(inA): part of a transaction") }
        }
        let alone = aAlone.value
        let latestB = inB.value
        if alone > latestB {
          run.violation("read \(alone) through inA.map, then inB \(latestB): part of a transaction")
        }
        let readWithArray = wholeWithArray.value
        if readWithArray.0 != readWithArray.1 {
          run.violation("read \(readWithArray) from the transaction's combineLatest with an array: part of it")
        }
      } else if worker.index > 2 && roll < 8 {
        // Delivers the transaction's commits to `inA` late, on this thread.
        worker.at(.subscribe)
        let late = inA.observe { _ in spin(microseconds: 20) }
        let lateArray = inItems.observe { _ in spin(microseconds: 20) }
        let lateTwice = twice.observe { _ in spin(microseconds: 20) }
        worker.at(.cancel)
        late.cancel()
        lateArray.cancel()
        lateTwice.cancel()
      } else if worker.index == 0 && roll < 30 {
        // The one writer of `first` and `second`, in program order.
        written += 1
        worker.at(.write)
        first.value = written
        second.value = written
        pairsWritten.add(1, ordering: .relaxed)
        worker.at(.read)
        let read = ordered.value
        if read.0 < written || read.1 < written {
          run.violation("after writing \(written) twice, combineLatest read \(read)")
        }
      } else if worker.index != 0 && roll < (worker.index == 1 ? 25 : 6) {
        // Subscribing replays through `first`'s queue: this thread may then deliver the
        // writer's commits to `first`, late, after the writer wrote `second` again.
        worker.at(.subscribe)
        let late = first.observe { _ in
          // Holds `first`'s delivery (its replay) until the writer has written both
          // properties twice more, or 500 µs: its commits to `first` are then delivered
          // late, after `second` moved on.
          let start = pairsWritten.load(ordering: .relaxed)
          let deadline = ContinuousClock.now.advanced(by: .microseconds(500))
          while pairsWritten.load(ordering: .relaxed) < start + 2 && ContinuousClock.now < deadline {}
        }
        worker.at(.cancel)
        late.cancel()
      } else if roll < 35 {
        worker.at(.modify)
        let commit = counter.modify { value -> Int in
          value += 1
          return value
        }
        worker.at(.read)
        if doubled.value < 2 * commit { run.violation("after modify returned \(commit), map read \(doubled.value)") }
        if pair.value.0 < commit { run.violation("after modify returned \(commit), combineLatest read less") }
        let state = diamond.value
        if state.0 != 2 * (state.1 - 1) || state.1 - 1 < commit {
          run.violation("after modify returned \(commit), the diamond read \(state)")
        }
        if worker.thread.random.chance(25) {
          // Churn: observers of the choices come and go while the counter moves.
          worker.at(.subscribe)
          let pick = worker.thread.random.below(chosen.count + 1)
          let churned =
            pick < chosen.count ? chosen[pick].1.observe { _ in } : stampedChoice.observe { _ in }
          worker.at(.cancel)
          churned.cancel()
        }
      } else if roll < 40 {
        // Transactions on several threads, each writing `twice` an odd value, then an
        // even one: the odd one is never a state of its own.
        twiceWritten += 1
        let even = (worker.index * stride + twiceWritten) * 2
        worker.at(.write)
        transaction {
          twice.value = even + 1
          twice.value = even + 2
        }
      } else if roll < 50 {
        worker.at(.modify)
        other.modify { $0 += 1 }
        flip.modify { $0 += 1 }
      } else if roll < 65 {
        let index = worker.thread.random.below(targets.count)
        worker.at(.modify)
        let value = targets[index].modify { value -> Int in
          value += 1
          return value
        }
        worker.at(.read)
        let read = followed.value
        if read / stride == index, read < value {
          run.violation("after target \(index) reached \(value % stride), flatMapLatest read \(read % stride)")
        }
        if worker.thread.random.chance(20) {
          // A new observer starts from the state `value` reads: its replay holds this
          // write, although the target's deliveries may still wait for another thread.
          worker.at(.subscribe)
          let isFirst = Atomic<Bool>(true)
          probes.append(
            steady[index].observe { received in
              guard isFirst.exchange(false, ordering: .relaxed) else { return }
              if received < value {
                run.violation(
                  "after target \(index) reached \(value % stride), a new flatMapLatest observer began at \(received % stride)"
                )
              }
            })
          if probes.count > 2 { probes.removeFirst().cancel() }
        }
      } else if roll < 70 {
        worker.at(.write)
        selector.value = worker.thread.random.below(targets.count)
      } else if roll < 85 {
        let producer = worker.index % producers.count
        sent += 1
        worker.at(.send)
        // Each worker numbers its own events; the merge keeps each producer's order.
        producers[producer].send(worker.index * stride + sent)
      } else if roll < 87 {
        worker.at(.send)
        trigger.send(worker.index)
      } else if temporary.count < 3, worker.thread.random.chance(60) {
        worker.at(.subscribe)
        let mine: ReadOnlyProperty<Int> =
          switch worker.thread.random.below(3) {
          case 0: counter.map { $0 + 1 }
          case 1: counter.combineLatest(other).map { $0.0 + $0.1 }
          default: selector.flatMapLatest { targets[$0] }
          }
        let subscription = worker.thread.random.chance(50) ? mine.observe { _ in } : nil
        temporary.append((mine, subscription))
      } else if !temporary.isEmpty {
        worker.at(.cancel)
        temporary.removeFirst().1?.cancel()
      }
    }
    worker.at(.dropOwner)
    for (_, subscription) in temporary { subscription?.cancel() }
    for probe in probes { probe.cancel() }
  }
  converge("at the end")
  // Permanent links (each observed derived value links to the roots it read last, once;
  // an unobserved one, such as the steady `flatMapLatest`s, to none): doubled, parity,
  // pair, the diamond, the self-combination, the two choice targets and the three
  // `flatMapLatest`s choosing by the counter's parity, on the counter; pair on the other; the
  // target `followed` reads now; `ordered` on first and second; `whole` on inA and inB,
  // `wholeWithArray` on inItems and inB; on `flip`, its slow observer, `negatedOdd`,
  // and the `flatMapLatest` choosing between `flip` and `negatedOdd`, which reads `flip`
  // either way.
  let counts = [
    counter.observerCount, other.observerCount, targets.map(\.observerCount).reduce(0, +),
    first.observerCount, second.observerCount, inA.observerCount, inB.observerCount, inItems.observerCount,
    flip.observerCount,
  ]
  let expected = [10, 1, 1, 1, 1, 1, 2, 1, 3]
  if counts != expected {
    run.violation("at the end, the sources have \(counts) observers instead of \(expected): dropped values leaked")
  }
  for producer in producers where producer.observerCount != 1 {
    run.violation("at the end, a producer has \(producer.observerCount) observers instead of 1")
  }
  withExtendedLifetime((anchor, events, steady)) {}
}
