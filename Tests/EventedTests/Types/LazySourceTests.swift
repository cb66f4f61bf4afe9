import Dispatch
import Evented
import Observation
import Synchronization
import Testing

/// Records the hooks of a lazy source, and whether two ever ran at once.
private final class HookLog: Sendable {
  private let entries = Monitor<(log: [Character], running: Int, overlapped: Bool)>(([], 0, false))

  func enter(_ mark: Character) {
    entries.withLock { state in
      if state.running > 0 { state.overlapped = true }
      state.running += 1
      state.log.append(mark)
    }
  }

  func leave() { entries.withLock { $0.running -= 1 } }

  func hook(_ mark: Character, during body: @escaping @Sendable () -> Void = {}) -> @Sendable () -> Void {
    {
      self.enter(mark)
      body()
      self.leave()
    }
  }

  var log: String { String(entries.current.log) }
  var overlapped: Bool { entries.current.overlapped }

  func wait(for log: String) -> Bool { entries.wait { String($0.log) == log && $0.running == 0 } }
}

@Suite struct LazySourceTests {
  @Test func firstObserverStartsAndLastObserverGoneStops() {
    let hooks = HookLog()
    let source = EventSource<Int>(onFirstObserver: hooks.hook("+"), onLastObserverGone: hooks.hook("-"))
    #expect(hooks.log == "")
    let first = source.observe { _ in }
    #expect(hooks.log == "+")
    let second = source.readOnly.observe { _ in }
    #expect(hooks.log == "+")
    first.cancel()
    #expect(hooks.log == "+")
    second.cancel()
    #expect(hooks.log == "+-")
    let third = source.observe { _ in }
    #expect(hooks.log == "+-+")
    third.cancel()
    #expect(hooks.log == "+-+-")
  }

  /// A lazy property read only through derived values stops at the `cancel()` of their
  /// last observer, without waiting for the property to be written or counted.
  @Test func lastObserverOfADerivedValueGoneStopsItsLazyRootAtCancel() {
    let hooks = HookLog()
    let level = Property(0, onFirstObserver: hooks.hook("+"), onLastObserverGone: hooks.hook("-"))
    let doubled = level.map { $0 * 2 }
    let pair = level.combineLatest(doubled)
    let first = doubled.observe { _ in }
    #expect(hooks.log == "+")
    first.cancel()
    #expect(hooks.log == "+-")
    let second = pair.observe { _ in }
    let third = doubled.observe { _ in }
    #expect(hooks.log == "+-+")
    second.cancel()
    #expect(hooks.log == "+-+")
    third.cancel()
    #expect(hooks.log == "+-+-")
    var once: Subscription? = doubled.observeOnce { _ in }
    #expect(hooks.log == "+-+-+")
    level.value = 1  // the once-only observer runs, and its handler is released
    #expect(hooks.log == "+-+-+-")
    once = nil
    _ = once
  }

  /// The end of an async loop over a derived value is the end of its last observer too:
  /// a lazy root read only through it stops then, without being written or counted.
  @Test(arguments: ["map", "combineLatest"])
  func endOfAnAsyncLoopOverADerivedValueStopsItsLazyRoot(_ kind: String) async {
    let hooks = HookLog()
    let level = Property(0, onFirstObserver: hooks.hook("+"), onLastObserverGone: hooks.hook("-"))
    let derived = kind == "map" ? level.map { $0 * 3 } : level.combineLatest(level).map { $0 + $1 }
    for await value in derived.values {
      if value == 0 { level.value = 1 } else { break }
    }
    #expect(await settles { hooks.log == "+-" }, "\(hooks.log)")
  }

  /// An observed `flatMapLatest` that switches away from a derived target, or whose
  /// observer ends, is that target's observer no more: a lazy root read only through
  /// the target stops.
  @Test func switchingAwayFromADerivedTargetStopsItsLazyRoot() {
    let hooks = (0..<2).map { _ in HookLog() }
    let roots = hooks.map { log in Property(0, onFirstObserver: log.hook("+"), onLastObserverGone: log.hook("-")) }
    let targets = roots.map { root in root.map { $0 + 1 } }
    let pick = Property(0)
    let followed = pick.flatMapLatest { targets[$0] }
    #expect(hooks[0].log == "" && hooks[1].log == "", "unobserved, it follows nothing")
    let observer = followed.observe { _ in }
    #expect(hooks[0].log == "+" && hooks[1].log == "")
    pick.value = 1
    #expect(hooks[0].log == "+-" && hooks[1].log == "+")
    #expect(followed.value == 1)
    observer.cancel()
    #expect(hooks[1].log == "+-")
  }

  @Test func everyKindOfSubscriptionCounts() async {
    let hooks = HookLog()
    let level = Property(0, onFirstObserver: hooks.hook("+"), onLastObserverGone: hooks.hook("-"))
    let once = level.observeOnce { _ in }
    #expect(hooks.log == "+")
    level.value = 1
    #expect(hooks.log == "+-")
    let doubled = level.map { $0 * 2 }
    #expect(hooks.log == "+-", "an unobserved derived value follows nothing")
    let throughMap = doubled.observe { _ in }
    #expect(hooks.log == "+-+")
    throughMap.cancel()
    // The source meets the derived value's subscription, unobserved now, and drops it.
    #expect(level.observerCount == 0)
    #expect(hooks.log == "+-+-")
    let task = Task {
      for await value in level.values where value == 2 { return }
    }
    #expect(await settles { hooks.log == "+-+-+" })
    level.value = 2
    await task.value
    #expect(await settles { hooks.log == "+-+-+-" })
    withExtendedLifetime(once) {}
  }

  @Test func subscriptionOfADeadOwnerStopsWhenTheSourceMeetsIt() {
    let hooks = HookLog()
    let source = EventSource<Int>(onFirstObserver: hooks.hook("+"), onLastObserverGone: hooks.hook("-"))
    var owner: HookOwner? = HookOwner()
    source.observe(with: owner!) { _, _ in }
    #expect(hooks.log == "+")
    owner = nil
    #expect(source.observerCount == 0)
    #expect(hooks.log == "+-")
  }

  @Test func hooksMayUseTheirSource() {
    let source = EventSource<Int>()
    let received = Recorder<Int>()
    let lazy = Property(
      0,
      onFirstObserver: { source.send(1) },
      onLastObserverGone: { source.send(2) })
    let relay = source.observe { received.append($0) }
    let subscription = lazy.observe { _ in }
    subscription.cancel()
    #expect(received.values == [1, 2])
    withExtendedLifetime(relay) {}
  }

  @Test func lazyHooksReceiveTheirOwnSource() {
    let seen = Recorder<ObjectIdentifier>()
    let source = EventSource<Int>(
      onFirstObserver: { source in seen.append(ObjectIdentifier(source)) },
      onLastObserverGone: { source in seen.append(ObjectIdentifier(source)) })
    source.observe { _ in }.cancel()
    #expect(seen.values == [ObjectIdentifier(source), ObjectIdentifier(source)])

    let written = Recorder<Int>()
    let level = Property(
      0,
      onFirstObserver: { property in
        seen.append(ObjectIdentifier(property))
        property.value = 5
      },
      onLastObserverGone: { property in seen.append(ObjectIdentifier(property)) })
    let reader = level.observe { written.append($0) }
    reader.cancel()
    #expect(written.values == [5], "the start hook's write is the first value the observer receives")
    #expect(seen.values.suffix(2) == [ObjectIdentifier(level), ObjectIdentifier(level)])

    let name = Property(
      "", skipsDuplicates: false,
      onFirstObserver: { property in property.value = "on" },
      onLastObserverGone: { property in property.value = "off" })
    name.observe { _ in }.cancel()
    #expect(name.value == "off")
  }

  @Test func lazyHooksDoNotKeepTheirSourceAlive() {
    var source: EventSource<Int>? = EventSource(
      onFirstObserver: { source in source.send(1) },
      onLastObserverGone: { source in source.send(2) })
    var property: Property<Int>? = Property(
      0,
      onFirstObserver: { property in property.value = 1 },
      onLastObserverGone: { property in property.value = 2 })
    source!.observe { _ in }.cancel()
    property!.observe { _ in }.cancel()
    #expect(property!.value == 2)
    let sourceReference = WeakReference(source)
    let propertyReference = WeakReference(property)
    source = nil
    property = nil
    #expect(sourceReference.value == nil)
    #expect(propertyReference.value == nil)
  }

  /// A hook that receives its source does not run once the source is gone: one freed
  /// while observed ends its subscriptions without a stop hook.
  @Test func hookReceivingItsSourceDoesNotRunAfterTheSourceIsFreed() {
    let hooks = HookLog()
    var source: EventSource<Int>? = EventSource(
      onFirstObserver: { _ in
        hooks.enter("+")
        hooks.leave()
      },
      onLastObserverGone: { _ in
        hooks.enter("-")
        hooks.leave()
      })
    let subscription = source!.observe { _ in }
    #expect(hooks.log == "+")
    source = nil
    #expect(!subscription.isActive)
    subscription.cancel()
    #expect(hooks.log == "+")
  }

  @Test func startHookWriteIsTheFirstValueTheObserverReceives() {
    let holder = Monitor<Property<Int>?>(nil)
    let level = Property(0, onFirstObserver: { holder.current?.value = 5 }, onLastObserverGone: {})
    holder.withLock { $0 = level }
    let seen = Recorder<Int>()
    let reader = level.observe { seen.append($0) }
    #expect(seen.values == [5])
    withExtendedLifetime(reader) {}
  }

  @Test func observerArrivingWhileStopHookRunsGetsStartHookAfterIt() {
    let hooks = HookLog()
    let stopping = Gate()
    let mayFinish = Gate()
    let source = EventSource<Int>(
      onFirstObserver: hooks.hook("+"),
      onLastObserverGone: hooks.hook("-") {
        stopping.open()
        mayFinish.wait()
      })
    let first = source.observe { _ in }
    let stopper = Spawned { first.cancel() }
    #expect(stopping.wait())
    let arrived = Gate()
    let arriving = Spawned {
      let second = source.observe { _ in }
      arrived.open()
      withExtendedLifetime(second) {}
    }
    #expect(arrived.wait())
    #expect(hooks.log == "+-")
    mayFinish.open()
    #expect(stopper.join())
    #expect(arriving.join())
    #expect(hooks.wait(for: "+-+-"))
    #expect(!hooks.overlapped)
  }

  @Test func hooksKeepCrossingOrderUnderChurnFromSeveralThreads() {
    let hooks = HookLog()
    let source = EventSource<Int>(onFirstObserver: hooks.hook("+"), onLastObserverGone: hooks.hook("-"))
    let finished = onThreads { index in
      var random = SplitMix(seed: index)
      var held: [Subscription] = []
      for _ in 0..<2_000 {
        if held.isEmpty || Bool.random(using: &random) {
          held.append(source.observe { _ in })
        } else {
          held.removeLast().cancel()
        }
        if Int.random(in: 0..<10, using: &random) == 0 { source.send(index) }
      }
      held.removeAll()
    }
    #expect(finished)
    #expect(source.observerCount == 0)
    let log = hooks.log
    #expect(!log.isEmpty)
    #expect(log.count.isMultiple(of: 2))
    #expect(log == String(repeating: "+-", count: log.count / 2))
    #expect(!hooks.overlapped)
  }

  /// A view that shows a lazy property through Observation, directly or through a
  /// `map`: its first read starts the property; rendering each change again (a read in
  /// a new tracking scope) keeps it started, with no stop and restart per change; once
  /// the view stops rendering, the property stops within the lease (one second) after
  /// the next change.
  @Test(arguments: ["property", "view", "map"])
  func lazySourceShownThroughObservationStartsOnceAndStopsAfterTheViewLeaves(_ shape: String) {
    let hooks = HookLog()
    let level = Property(0, onFirstObserver: hooks.hook("+"), onLastObserverGone: hooks.hook("-"))
    let doubled = level.map { $0 * 2 }
    let read: @Sendable () -> Int =
      switch shape {
      case "property": { level.value }
      case "view": { level.readOnly.value }
      default: { doubled.value }
      }
    let view = ShownValue(read)
    view.show()
    #expect(hooks.log == "+")
    for value in 1...50 {
      level.value = value
      #expect(view.rendered(count: value))
    }
    #expect(hooks.log == "+")
    #expect(view.lastShown == (shape == "map" ? 100 : 50))
    view.leave()
    level.value = 51
    #expect(hooks.wait(for: "+-"))
    #expect(level.observerCount == 0)
  }
}

/// A SwiftUI-style view of one value: renders by reading it in a tracking scope, and
/// renders again on its own queue after each change, until it leaves.
private final class ShownValue: Sendable {
  private let read: @Sendable () -> Int
  private let queue = DispatchQueue(label: "view")
  private let renders = Counter()
  private let isShown = Atomic<Bool>(true)
  private let last = Atomic<Int>(-1)

  init(_ read: @escaping @Sendable () -> Int) { self.read = read }

  var lastShown: Int { last.load(ordering: .acquiring) }

  func show() { queue.sync { render() } }

  func leave() { isShown.store(false, ordering: .releasing) }

  /// Waits until the view rendered `count` changes.
  func rendered(count: Int) -> Bool { renders.wait(for: count) }

  private func render() {
    let value = withObservationTracking(
      { read() },
      onChange: {
        self.queue.async {
          guard self.isShown.load(ordering: .acquiring) else { return }
          self.render()
          self.renders.increment()
        }
      })
    last.store(value, ordering: .releasing)
  }

}

private final class HookOwner: Sendable {}
