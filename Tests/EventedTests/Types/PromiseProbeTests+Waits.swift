// Where threads might wait for each other around a derived value's links and the
// actor variants' senders: a switch while another thread changes the value's links
// (it ends its old links itself, never waiting), a last observer's `cancel()` while
// another thread delivers through a link (it does not wait), lazy sources' hooks run
// meanwhile, and senders that wait for room first come, first served. Every wait here
// is bounded: a hang fails.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Evented

/// Sends `event` from a task of its own, and records it in `done` once `send` returned.
private func sending(_ event: Int, to source: ActorEventSource<Int>, done: Recorder<Int>) -> Task<Bool, Never> {
  Task(executorPreference: SignallingExecutor.shared) {
    let committed = await source.send(event)
    done.append(event)
    return committed
  }
}

extension PromiseProbeTests {
  // MARK: Senders that wait, first come, first served

  /// Guarantees.md, Overload: senders that wait commit first come, first served, and a
  /// cancelled one goes past the limit (up to twice the limit). Ten senders wait in
  /// line; the oldest, one in the middle and the newest are cancelled (each commits at
  /// once, past the limit); the others commit in the order they arrived once the
  /// handler makes room.
  @Test func waitsCancelledSendersAnywhereInTheLineLeaveItAndTheRestCommitInArrivalOrder() async {
    let (source, gate, received, subscription) = await heldActorSource(limit: 4)
    let senders = await source.senders
    let done = Recorder<Int>()
    var waiting: [Int: Task<Bool, Never>] = [:]
    for event in 10..<20 {
      waiting[event] = sending(event, to: source, done: done)
      #expect(await settles { senders.waiting == event - 9 }, "sender \(event) waits")
    }
    for event in [10, 15, 19] {
      waiting[event]?.cancel()
      #expect(await settles { done.values.contains(event) }, "cancelled sender \(event) returned")
    }
    #expect(await settles { senders.waiting == 7 })
    gate.open()
    #expect(await settles { done.count == 10 }, "hung: \(done.values)")
    for event in 10..<20 where done.values.contains(event) { #expect(await waiting[event]?.value == true) }
    #expect(await settles { received.count == 15 })
    #expect(received.values == [0, 1, 2, 3, 4, 10, 15, 19, 11, 12, 13, 14, 16, 17, 18])
    #expect(await source.senders.hasTickets == false)
    subscription.cancel()
  }

  /// A task a handler's call started sends while senders wait in line: during the
  /// call it neither waits nor queues; after the call it queues behind them.
  @Test func waitsATaskAHandlerStartedSkipsTheLineDuringTheCallAndQueuesAfterIt() async {
    let source = ActorEventSource<Int>(backlogLimit: 1)
    let gate = AsyncGate()
    let afterCall = AsyncGate()
    let holding = Flag()
    let duringSent = Flag()
    let received = Recorder<Int>()
    let late = Monitor<Task<Bool, Never>?>(nil)
    let subscription = await source.observe { event in
      if event == 0 {
        holding.set()
        await gate.wait()
        let during = Task { await source.send(100) }
        _ = await during.value
        duringSent.set()
        late.withLock {
          $0 = Task {
            await afterCall.wait()
            return await source.send(200)
          }
        }
      }
      received.append(event)
    }
    await source.send(0)
    #expect(await settles { holding.isSet })
    await source.send(1)
    let senders = await source.senders
    let done = Recorder<Int>()
    var waiting: [Task<Bool, Never>] = []
    for event in 10..<13 {
      waiting.append(sending(event, to: source, done: done))
      #expect(await settles { senders.waiting == event - 9 }, "sender \(event) waits")
    }
    gate.open()
    #expect(await settles { duringSent.isSet }, "a task the handler's call started waited in line")
    #expect(await settles { late.current != nil })
    // The call for 0 has returned once 1 arrived.
    #expect(await settles { received.count >= 2 })
    afterCall.open()
    #expect(await settles { done.count == 3 }, "hung: \(done.values)")
    for task in waiting { #expect(await task.value) }
    #expect(await settles { received.values.contains(200) }, "hung: \(received.values)")
    #expect(await settles { received.count == 7 })
    let values = received.values
    #expect(Array(values.prefix(3)) == [0, 1, 100], "\(values)")
    let waited = values.filter { (10..<13).contains($0) }
    #expect(waited == [10, 11, 12], "\(values)")
    #expect(values.contains(200))
    subscription.cancel()
  }

  /// The handler subscription ends while senders wait in line: every one commits, in
  /// arrival order, and no ticket stays out; a later send does not wait.
  @Test func waitsEndingTheHandlerReleasesTheWholeLineInOrder() async {
    let source = ActorEventSource<Int>(backlogLimit: 1)
    let gate = AsyncGate()
    let holding = Flag()
    let received = Recorder<Int>()
    let subscription = await source.observe { event in
      if event == 0 {
        holding.set()
        await gate.wait()
      }
      received.append(event)
    }
    let other = Recorder<Int>()
    let watcher = await source.observe { other.append($0) }
    await source.send(0)
    #expect(await settles { holding.isSet })
    await source.send(1)
    let senders = await source.senders
    let done = Recorder<Int>()
    var waiting: [Task<Bool, Never>] = []
    for event in 10..<16 {
      waiting.append(sending(event, to: source, done: done))
      #expect(await settles { senders.waiting == event - 9 }, "sender \(event) waits")
    }
    subscription.cancel()
    #expect(await settles { done.count == 6 }, "hung: \(done.values)")
    for task in waiting { #expect(await task.value) }
    #expect(await source.send(99))
    #expect(await settles { other.count == 9 })
    #expect(other.values == [0, 1, 10, 11, 12, 13, 14, 15, 99])
    #expect(await source.senders.hasTickets == false)
    gate.open()
    watcher.cancel()
  }

  /// Many senders, each sending a run of its own events through a queue of one: every
  /// send returns, each sender's events arrive in its order, and no ticket stays out.
  @Test func waitsManySendersThroughAQueueOfOneAllFinishInTheirOwnOrder() async {
    let source = ActorEventSource<Int>(backlogLimit: 1)
    let received = Recorder<Int>()
    let subscription = await source.observe { event in
      if event % 7 == 0 { await Task.yield() }
      received.append(event)
    }
    let senders = 16
    let perSender = 50
    let finishedSenders = Number(0)
    let refused = Number(0)
    for sender in 0..<senders {
      Task.detached {
        for index in 0..<perSender where await !source.send(sender * 1_000 + index) { refused.increment() }
        finishedSenders.increment()
      }
    }
    #expect(await settles { finishedSenders.value == senders }, "hung: \(finishedSenders.value) of \(senders) finished")
    #expect(refused.value == 0)
    #expect(await settles { received.count == senders * perSender })
    let values = received.values
    for sender in 0..<senders {
      let mine = values.filter { $0 / 1_000 == sender }
      #expect(mine == (0..<perSender).map { sender * 1_000 + $0 }, "sender \(sender)")
    }
    #expect(await source.senders.hasTickets == false)
    subscription.cancel()
  }
}

extension PromiseProbeTests {
  // MARK: Re-entrant switches and cancels on the applying thread

  /// The start hook of the new target writes the selector back, on the thread that
  /// delivers the switch: the value settles on the old target, which it follows alone,
  /// and the new target's hooks ran once each.
  @Test func waitsAStartHookThatWritesTheSelectorBackWhileADeliverySwitchesSettlesOnTheLastPick() {
    let selector = Property(0)
    let first = Property(10)
    let hooks = Recorder<String>()
    let second = Property(
      20,
      onFirstObserver: {
        hooks.append("+")
        selector.value = 0
      }, onLastObserverGone: { hooks.append("-") })
    let followed = selector.flatMapLatest { $0 == 0 ? first : second }
    let seen = Recorder<Int>()
    let observer = followed.observe { seen.append($0) }
    #expect(completesOnAnotherThread { selector.value = 1 }, "hung")
    #expect(seen.wait { $0.last == 10 && $0.count >= 2 })
    #expect(followed.value == 10)
    #expect(hooks.values == ["+", "-"])
    #expect(second.observerCount == 0)
    #expect(first.observerCount == 1)
    observer.cancel()
    #expect(first.observerCount == 0)
  }

  /// The same, when the switch is made by the first observer arriving (no delivery on
  /// the stack): the hook's write reaches the value while its thread applies the links.
  @Test func waitsAStartHookThatWritesTheSelectorBackWhileTheFirstObserverArrivesSettlesOnTheLastPick() {
    let selector = Property(1)
    let first = Property(10)
    let hooks = Recorder<String>()
    let second = Property(
      20,
      onFirstObserver: {
        hooks.append("+")
        selector.value = 0
      }, onLastObserverGone: { hooks.append("-") })
    let followed = selector.flatMapLatest { $0 == 0 ? first : second }
    let seen = Recorder<Int>()
    let observer = Monitor<Subscription?>(nil)
    let done = completesOnAnotherThread {
      let subscription = followed.observe { seen.append($0) }
      observer.withLock { $0 = subscription }
    }
    #expect(done, "hung")
    #expect(seen.wait { $0.last == 10 })
    #expect(followed.value == 10)
    #expect(hooks.values == ["+", "-"])
    #expect(second.observerCount == 0)
    #expect(first.observerCount == 1)
    observer.current?.cancel()
    #expect(first.observerCount == 0)
  }

  /// Guarantees.md, promise 6: "two handlers cancelling each other from two threads:
  /// `cancel()` then returns without waiting". Here each is the last observer of a map
  /// of a lazy property, so each `cancel()` also ends a link running on the other
  /// thread: neither hangs, and both roots stop.
  @Test func waitsTwoLastDerivedObserversCancellingEachOtherFromTwoThreadsDoNotHangAndBothRootsStop() {
    for _ in 0..<20 {
      let hooks = (Recorder<String>(), Recorder<String>())
      let roots = (
        Property(0, onFirstObserver: { hooks.0.append("+") }, onLastObserverGone: { hooks.0.append("-") }),
        Property(0, onFirstObserver: { hooks.1.append("+") }, onLastObserverGone: { hooks.1.append("-") })
      )
      let maps = (roots.0.map { $0 }, roots.1.map { $0 })
      let boxes = (SubscriptionBox(), SubscriptionBox())
      let inside = (Gate(), Gate())
      boxes.0.subscription = maps.0.observe { value in
        guard value == 1 else { return }
        inside.0.open()
        _ = inside.1.wait()
        boxes.1.cancel()
      }
      boxes.1.subscription = maps.1.observe { value in
        guard value == 1 else { return }
        inside.1.open()
        _ = inside.0.wait()
        boxes.0.cancel()
      }
      let finished = onThreads(2) { index in
        if index == 0 { roots.0.value = 1 } else { roots.1.value = 1 }
      }
      #expect(finished, "hung: two last observers cancelling each other")
      guard finished else { return }
      #expect(hooks.0.values == ["+", "-"])
      #expect(hooks.1.values == ["+", "-"])
      #expect(roots.0.observerCount == 0 && roots.1.observerCount == 0)
    }
  }

  /// Two threads switch one value back and forth between lazy targets while a third
  /// subscribes and cancels: nothing hangs, each target's hooks alternate, and once
  /// every observer is gone every target has stopped.
  @Test func waitsTwoSwitchingThreadsAndASubscribingOneKeepLazyTargetsBalanced() {
    let targetCount = 3
    let hooks = (0..<targetCount).map { _ in Recorder<String>() }
    let targets = (0..<targetCount).map { index in
      Property(
        index * 100, onFirstObserver: { hooks[index].append("+") },
        onLastObserverGone: { hooks[index].append("-") })
    }
    let selector = Property(0)
    let followed = selector.flatMapLatest { targets[$0 % targetCount] }
    let base = followed.observe { _ in }
    let rounds = isThreadSanitized ? 200 : 2_000
    let finished = onThreads(3) { index in
      var random = SplitMix(seed: index)
      for round in 0..<rounds {
        switch index {
        case 0, 1:
          selector.value = Int.random(in: 0..<targetCount, using: &random)
          if round % 16 == 0 { transaction { selector.value = Int.random(in: 0..<targetCount, using: &random) } }
        default:
          let subscription = followed.observe { _ in }
          if round % 2 == 0 { base.cancel() }
          subscription.cancel()
        }
        if round % 8 == 0 { yieldProcessor() }
      }
    }
    #expect(finished, "hung")
    guard finished else { return }
    base.cancel()
    for index in 0..<targetCount {
      let values = hooks[index].values
      let alternates = values.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? "+" : "-") }
      #expect(alternates, "target \(index): \(values.suffix(6))")
      #expect(values.count % 2 == 0, "target \(index) still started: \(values.suffix(6))")
      #expect(targets[index].observerCount == 0)
    }
  }
}

extension PromiseProbeTests {
  // MARK: The last observer cancelled on the delivering thread

  /// DerivedValues.md: ending the last observer "unsubscribes the value from its roots
  /// at once, so a lazy source read only through derived values stops then". The last
  /// observer of a map cancels itself in its handler, in the lazy root's delivery.
  @Test func waitsTheLastDerivedObserverCancellingItselfInItsHandlerStopsTheLazyRootBeforeTheWriteReturns() {
    let hooks = Recorder<String>()
    let root = Property(0, onFirstObserver: { hooks.append("+") }, onLastObserverGone: { hooks.append("-") })
    let box = SubscriptionBox()
    box.subscription = root.map { $0 * 2 }.observe { value in
      if value == 2 { box.cancel() }
    }
    root.value = 1
    #expect(hooks.values == ["+", "-"], "the stop hook waits for the next meeting")
    _ = root.observerCount
    #expect(hooks.values == ["+", "-"])
  }

  /// The same, when the transform cancels the last observer.
  @Test func waitsATransformCancellingTheLastObserverStopsTheLazyRootBeforeTheWriteReturns() {
    let hooks = Recorder<String>()
    let root = Property(0, onFirstObserver: { hooks.append("+") }, onLastObserverGone: { hooks.append("-") })
    let box = SubscriptionBox()
    box.subscription = root.map { value -> Int in
      if value == 1 { box.cancel() }
      return value
    }.observe { _ in }
    root.value = 1
    #expect(hooks.values == ["+", "-"], "the stop hook waits for the next meeting")
    _ = root.observerCount
    #expect(hooks.values == ["+", "-"])
  }

  /// The same, with two roots: the one whose delivery cancels, and another.
  @Test func waitsTheLastObserverCancellingItselfStopsBothLazyRootsOfACombineLatestBeforeTheWriteReturns() {
    let hooks = (Recorder<String>(), Recorder<String>())
    let roots = (
      Property(0, onFirstObserver: { hooks.0.append("+") }, onLastObserverGone: { hooks.0.append("-") }),
      Property(0, onFirstObserver: { hooks.1.append("+") }, onLastObserverGone: { hooks.1.append("-") })
    )
    let box = SubscriptionBox()
    box.subscription = roots.0.combineLatest(roots.1).observe { pair in
      if pair.0 == 1 { box.cancel() }
    }
    roots.0.value = 1
    #expect(hooks.0.values == ["+", "-"], "the stop hook waits for the next meeting")
    #expect(hooks.1.values == ["+", "-"])
  }
}

extension PromiseProbeTests {
  // MARK: A switch that waits for the applier

  /// DerivedValues.md: the thread applying a value's links "subscribes and unsubscribes,
  /// and runs no user code but a lazy source's hooks". Guarantees.md, promise 6: a
  /// hook may cancel a subscription, and `cancel()` waits for its handler running on
  /// another thread. Here the start hook of the new target runs on the switching
  /// thread and cancels a handler; that handler, on another thread, subscribes to the
  /// switching value, whose state there is the same switch.
  @Test func waitsAStartHookThatCancelsAHandlerWhoseThreadObservesTheSwitchingValueDoesNotHang() {
    let selector = Property(false)
    let first = Property(1)
    let handlerRunning = Gate()
    let hookRunning = Gate()
    let box = SubscriptionBox()
    let hooks = Recorder<String>()
    let second = Property(
      2,
      onFirstObserver: {
        hooks.append("+")
        hookRunning.open()
        box.cancel()
      }, onLastObserverGone: { hooks.append("-") })
    let followed = selector.flatMapLatest { $0 ? second : first }
    let seen = Recorder<Int>()
    let observer = followed.observe { seen.append($0) }
    let trigger = EventSource<Int>()
    let late = Monitor<[Subscription]>([])
    box.subscription = trigger.observe { _ in
      handlerRunning.open()
      _ = hookRunning.wait()
      let subscription = followed.observe { _ in }
      late.withLock { $0.append(subscription) }
    }
    let sender = Spawned { trigger.send(1) }
    #expect(handlerRunning.wait())
    let switcher = Spawned { selector.value = true }
    let finished = switcher.join() && sender.join()
    #expect(finished, "hung: the switching thread waits for the handler, its thread for the switch")
    guard finished else { return }
    #expect(seen.wait { $0.last == 2 })
    #expect(followed.value == 2)
    observer.cancel()
    for subscription in late.current { subscription.cancel() }
    #expect(hooks.values == ["+", "-"])
  }

  /// Guarantees.md, Lazy sources: "A property's start hook writes the value that
  /// subscription receives first"; Transactions.md: a write from another thread to a
  /// source the open transaction wrote waits until it ends, and a subscription may be
  /// made inside a transaction. The start hook runs on the switching thread, while it
  /// applies the switch; the transaction's thread subscribes to the switching value.
  @Test func waitsAnObserverArrivingInATransactionWhileTheStartHookWritesItsSourceDoesNotHang() {
    let selector = Property(false)
    let first = Property(1)
    let hookEntered = Gate()
    let inside = Gate()
    let second = Property(
      0,
      onFirstObserver: { (property: Property<Int>) in
        hookEntered.open()
        _ = inside.wait()
        property.value = 2
      }, onLastObserverGone: { (_: Property<Int>) in })
    let followed = selector.flatMapLatest { $0 ? second : first }
    let seen = Recorder<Int>()
    let observer = followed.observe { seen.append($0) }
    let switcher = Spawned { selector.value = true }
    #expect(hookEntered.wait())
    let late = Monitor<[Subscription]>([])
    let joiner = Spawned {
      transaction {
        second.value = 5
        inside.open()
        let subscription = followed.observe { _ in }
        late.withLock { $0.append(subscription) }
      }
    }
    let finished = joiner.join() && switcher.join()
    #expect(finished, "hung: the hook's write waits for the transaction, the transaction for the switch")
    guard finished else { return }
    #expect(seen.wait { $0.last == followed.value })
    observer.cancel()
    for subscription in late.current { subscription.cancel() }
  }

  /// Two switching values whose new targets are lazy, each start hook observing the
  /// other value (a source that feeds itself from another one): each hook runs on the
  /// thread applying its own value's switch, and each subscription arrives during the
  /// other value's switch.
  @Test func waitsTwoStartHooksThatEachObserveTheOtherSwitchingValueDoNotHang() {
    let selectors = (Property(false), Property(false))
    let olds = (Property(1), Property(1))
    let entered = (Gate(), Gate())
    let values = Monitor<[Int: ReadOnlyProperty<Int>]>([:])
    let late = Monitor<[Subscription]>([])
    func hook(_ mine: Int) -> @Sendable () -> Void {
      {
        (mine == 0 ? entered.0 : entered.1).open()
        _ = (mine == 0 ? entered.1 : entered.0).wait()
        guard let other = values.current[1 - mine] else { return }
        let subscription = other.observe { _ in }
        late.withLock { $0.append(subscription) }
      }
    }
    let news = (
      Property(2, onFirstObserver: hook(0), onLastObserverGone: {}),
      Property(2, onFirstObserver: hook(1), onLastObserverGone: {})
    )
    let followed = (
      selectors.0.flatMapLatest { $0 ? news.0 : olds.0 },
      selectors.1.flatMapLatest { $0 ? news.1 : olds.1 }
    )
    values.withLock { $0 = [0: followed.0, 1: followed.1] }
    let observers = [followed.0.observe { _ in }, followed.1.observe { _ in }]
    let finished = onThreads(2) { index in
      if index == 0 { selectors.0.value = true } else { selectors.1.value = true }
    }
    #expect(finished, "hung: each switching thread waits for the other's switch")
    guard finished else { return }
    #expect(followed.0.value == 2 && followed.1.value == 2)
    for observer in observers { observer.cancel() }
    for subscription in late.current { subscription.cancel() }
  }

  // MARK: A lazy root left started

  /// DerivedValues.md: ending the last observer "unsubscribes the value from its roots
  /// at once, so a lazy source read only through derived values stops then. If another
  /// thread is delivering a commit of that source to the value at that instant,
  /// `cancel()` waits for that delivery to return". A transform cancels the last
  /// observer while another thread keeps writing a second lazy root of the value (and
  /// may run the transform, and cancel, too). Once both threads have returned, both
  /// roots must have stopped; the second one sometimes has not, until something sweeps
  /// it (reading its `observerCount` runs the stop hook).
  @Test func waitsATransformThatCancelsTheLastObserverWhileAnotherThreadDeliversStopsBothRootsOnce() {
    for round in 0..<(isThreadSanitized ? 100 : 1_000) {
      let hooks = (Recorder<String>(), Recorder<String>())
      let trigger = Property(0, onFirstObserver: { hooks.0.append("+") }, onLastObserverGone: { hooks.0.append("-") })
      let busy = Property(0, onFirstObserver: { hooks.1.append("+") }, onLastObserverGone: { hooks.1.append("-") })
      let box = SubscriptionBox()
      let pairs = trigger.combineLatest(busy).map { pair -> Int in
        if pair.0 == 1 { box.cancel() }
        return pair.1
      }
      box.subscription = pairs.observe { _ in }
      let stop = Atomic<Bool>(false)
      let started = Gate()
      let writer = Spawned {
        var i = 0
        started.open()
        while !stop.load(ordering: .relaxed) {
          i += 1
          busy.value = i
          yieldProcessor()
        }
      }
      #expect(started.wait())
      let wrote = completesOnAnotherThread { trigger.value = 1 }
      stop.store(true, ordering: .relaxed)
      let joined = writer.join()
      #expect(wrote && joined, "hung in round \(round)")
      guard wrote && joined else { return }
      let (first, second) = (hooks.0.values, hooks.1.values)
      #expect(first == ["+", "-"], "round \(round)")
      #expect(second == ["+", "-"], "round \(round): the root is still started after both threads returned")
      if first != ["+", "-"] || second != ["+", "-"] { return }
    }
  }
}

extension PromiseProbeTests {
  // MARK: Queue observers and transactions around a switch

  /// The last observer of a switching value delivers on a queue and cancels itself
  /// there, while another thread keeps switching the value between lazy targets and a
  /// third writes the targets: nothing hangs, and each target's hooks alternate.
  @Test func waitsAQueueObserverCancellingItselfWhileOthersSwitchAndWriteDoesNotHang() {
    for round in 0..<(isThreadSanitized ? 20 : 100) {
      let hooks = (0..<2).map { _ in Recorder<String>() }
      let targets = (0..<2).map { index in
        Property(0, onFirstObserver: { hooks[index].append("+") }, onLastObserverGone: { hooks[index].append("-") })
      }
      let selector = Property(0)
      let followed = selector.flatMapLatest { targets[$0 % 2] }
      let queue = DispatchQueue(label: "probe-waits-queue")
      let box = SubscriptionBox()
      let cancelled = Gate()
      let received = Number(0)
      box.subscription = followed.observe(on: .queue(queue)) { _ in
        if received.add(1) == 20 {
          box.cancel()
          cancelled.open()
        }
      }
      let stop = Atomic<Bool>(false)
      let threads = (0..<2).map { index in
        Spawned {
          var i = 0
          while !stop.load(ordering: .relaxed) {
            i += 1
            if index == 0 { selector.value = i } else { targets[i % 2].value = i }
            if i % 4 == 0 { yieldProcessor() }
          }
        }
      }
      let wasCancelled = cancelled.wait()
      stop.store(true, ordering: .relaxed)
      let finished = threads.allSatisfy { $0.join() } && wasCancelled
      #expect(finished, "hung in round \(round)")
      guard finished else { return }
      for index in 0..<2 {
        let values = hooks[index].values
        let alternates = values.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? "+" : "-") }
        #expect(alternates, "round \(round), target \(index): \(values.suffix(6))")
      }
    }
  }

  /// A transaction writes the selector and the new target while another thread
  /// switches the same value: nothing hangs, the observer ends on the value, and the
  /// old target's count drops before the new target's value arrives.
  @Test func waitsATransactionAroundASwitchWhileAnotherThreadSwitchesKeepsTheSwitchOneState() {
    for round in 0..<(isThreadSanitized ? 20 : 200) {
      let selector = Property(0)
      let targets = [Property(-1), Property(1), Property(2)]
      let followed = selector.flatMapLatest { targets[$0] }
      let seen = Recorder<Int>()
      let stale = Recorder<String>()
      let observer = followed.observe { value in
        if value > 0 && targets[0].observerCount != 0 { stale.append("target 0 still observed at \(value)") }
        seen.append(value)
      }
      let finished = onThreads(2) { index in
        if index == 0 {
          transaction {
            selector.value = 1
            targets[1].value = 11
          }
        } else {
          selector.value = 2
        }
      }
      #expect(finished, "hung in round \(round)")
      guard finished else { return }
      #expect(seen.wait { $0.last == followed.value }, "round \(round): \(seen.values)")
      #expect(targets[0].observerCount == 0)
      #expect(stale.values.isEmpty, "round \(round): \(stale.values.prefix(3))")
      observer.cancel()
      #expect(targets.allSatisfy { $0.observerCount == 0 })
    }
  }
}

extension PromiseProbeTests {
  /// As ``waitsATransformThatCancelsTheLastObserverWhileAnotherThreadDeliversStopsBothRootsOnce()``,
  /// with a plain `cancel()` on the test's thread: once it returned and the writer
  /// stopped, the lazy root the writer writes has stopped (DerivedValues.md: if another
  /// thread is delivering a commit of it at that instant, it stops when that delivery
  /// returns).
  @Test func waitsCancellingTheLastObserverOfACombineLatestWhileAnotherThreadWritesStopsTheLazyRoot() {
    var missed: [String] = []
    for round in 0..<(isThreadSanitized ? 100 : 1_000) {
      let hooks = Recorder<String>()
      let other = Property(0)
      let busy = Property(0, onFirstObserver: { hooks.append("+") }, onLastObserverGone: { hooks.append("-") })
      let subscription = other.combineLatest(busy).map { $0.1 }.observe { _ in }
      let stop = Atomic<Bool>(false)
      let started = Gate()
      let writer = Spawned {
        var i = 0
        started.open()
        while !stop.load(ordering: .relaxed) {
          i += 1
          busy.value = i
          yieldProcessor()
        }
      }
      #expect(started.wait())
      subscription.cancel()
      let atCancel = hooks.values
      stop.store(true, ordering: .relaxed)
      #expect(writer.join(), "hung in round \(round)")
      let afterJoin = hooks.values
      if afterJoin != ["+", "-"] {
        missed.append("round \(round): \(atCancel) at cancel, \(afterJoin) after the writer")
      }
    }
    #expect(missed.isEmpty, "\(missed.count) rounds: \(missed.prefix(3))")
  }
}

extension PromiseProbeTests {
  /// As ``waitsATransformThatCancelsTheLastObserverWhileAnotherThreadDeliversStopsBothRootsOnce()``,
  /// but only the thread writing `trigger` cancels (its transform). When the writer of
  /// `busy` is delivering the value's states at that instant, the write of `trigger`
  /// only marks the value and the writer runs it, so nothing cancels in that round
  /// (DerivedValues.md: states coalesce behind another thread's delivery). In every
  /// round where the trigger's thread cancelled, once both threads returned, `busy` has
  /// stopped.
  @Test func waitsOnlyTheTriggerThreadsTransformCancellingTheLastObserverStopsTheOtherLazyRoot() {
    var missed: [String] = []
    for round in 0..<(isThreadSanitized ? 100 : 1_000) {
      let hooks = (Recorder<String>(), Recorder<String>())
      let trigger = Property(0, onFirstObserver: { hooks.0.append("+") }, onLastObserverGone: { hooks.0.append("-") })
      let busy = Property(0, onFirstObserver: { hooks.1.append("+") }, onLastObserverGone: { hooks.1.append("-") })
      let box = SubscriptionBox()
      let cancelled = Flag()
      let pairs = trigger.combineLatest(busy).map { pair -> Int in
        if pair.0 == 1 && Thread.current.name == "trigger" {
          box.cancel()
          cancelled.set()
        }
        return pair.1
      }
      box.subscription = pairs.observe { _ in }
      let stop = Atomic<Bool>(false)
      let started = Gate()
      let writer = Spawned {
        var i = 0
        started.open()
        while !stop.load(ordering: .relaxed) {
          i += 1
          busy.value = i
          yieldProcessor()
        }
      }
      #expect(started.wait())
      let atWrite = Monitor<[String]>([])
      let wrote = completesOnAnotherThread {
        Thread.current.name = "trigger"
        trigger.value = 1
        atWrite.withLock { $0 = hooks.1.values }
      }
      stop.store(true, ordering: .relaxed)
      let joined = writer.join()
      #expect(wrote && joined, "hung in round \(round)")
      guard wrote && joined else { return }
      guard cancelled.isSet else { continue }
      if hooks.1.values != ["+", "-"] {
        missed.append("round \(round): at write \(atWrite.current), after \(hooks.1.values)")
      }
    }
    #expect(missed.isEmpty, "\(missed.count) rounds: \(missed.prefix(3))")
  }
}
