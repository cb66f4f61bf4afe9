// Deep chains of derived values: building, delivering through and freeing a chain of
// 10,000 of each kind runs on a thread with a 1 MB stack (`Spawned` threads have one).
// A chain taller than `Snapshot.deepChain` is evaluated from the roots up, and freed
// one node at a time, so neither recursion grows with its length.

import Testing

@testable import Evented

@Suite struct DeepChainTests {
  static let length = 10_000

  /// Builds a chain of `length` links on `root` with `link`, observes its top, writes
  /// the root, reads the top, and frees the chain, on a thread with a 1 MB stack.
  func run(
    _ link: @escaping @Sendable (ReadOnlyProperty<Int>, Property<Int>) -> ReadOnlyProperty<Int>,
    expecting expected: @escaping @Sendable (Int) -> Int
  ) {
    let root = Property(0)
    let received = Recorder<Int>()
    let read = Recorder<Int>()
    let thread = Spawned {
      var chain = root.readOnly
      for _ in 0..<Self.length { chain = link(chain, root) }
      let subscription = chain.observe { received.append($0) }
      root.value = 1
      read.append(chain.value)
      subscription.cancel()
    }
    #expect(thread.join())
    #expect(received.values == [expected(0), expected(1)])
    #expect(read.values == [expected(1)])
    #expect(root.observerCount == 0)
  }

  @Test func aChainOfMaps() {
    run({ chain, _ in chain.map { $0 + 1 } }, expecting: { $0 + Self.length })
  }

  @Test func aChainOfCombineLatests() {
    run({ chain, root in chain.combineLatest(root).map { $0.0 + 1 } }, expecting: { $0 + Self.length })
  }

  @Test func aChainOfFlatMapLatestsAsOuterSources() {
    run({ chain, _ in chain.flatMapLatest { ReadOnlyProperty(constant: $0 + 1) } }, expecting: { $0 + Self.length })
  }

  @Test func aChainOfFlatMapLatestsAsTargets() {
    let selector = Property(true)
    run({ chain, _ in selector.flatMapLatest { _ in chain } }, expecting: { $0 })
  }

  /// Builds a chain of `length` derived event sources on `source` with `link`,
  /// observes its top, sends one event, and frees the chain, on a thread with a 1 MB
  /// stack.
  func runEvents(
    _ link: @escaping @Sendable (ReadOnlyEventSource<Int>, EventSource<Int>) -> ReadOnlyEventSource<Int>,
    expecting expected: Int
  ) {
    let source = EventSource<Int>()
    let received = Recorder<Int>()
    let thread = Spawned {
      var chain = source.readOnly
      for _ in 0..<Self.length { chain = link(chain, source) }
      let subscription = chain.observe { received.append($0) }
      source.send(0)
      subscription.cancel()
    }
    #expect(thread.join())
    #expect(received.values.first == expected)
    #expect(source.observerCount == 0)
  }

  /// A `flatMapLatest` inside a deep chain that switches to a target which is itself a
  /// deep chain, stale and unobserved: the target is evaluated from the roots up too.
  @Test(arguments: [false, true])
  func aSwitchInsideADeepChainToAStaleDeepTarget(observed: Bool) {
    let root = Property(0)
    let selector = Property(false)
    let other = Property(-1)
    let received = Recorder<Int>()
    let read = Recorder<Int>()
    let thread = Spawned {
      var target = root.readOnly
      for _ in 0..<Self.length { target = target.map { $0 + 1 } }
      let picked = target
      var top = selector.flatMapLatest { $0 ? picked : other.readOnly }
      for _ in 0..<40 { top = top.map { $0 + 1 } }
      let subscription = observed ? top.observe { received.append($0) } : nil
      read.append(top.value)
      root.value = 1  // the target, unobserved, is stale now
      selector.value = true
      read.append(top.value)
      subscription?.cancel()
    }
    #expect(thread.join())
    #expect(read.values == [39, Self.length + 41])
    #expect(received.values == (observed ? [39, Self.length + 41] : []))
  }

  /// One long chain leaves no cost to the thread's later passes: the table of nodes met
  /// is dropped once it grew past 4,096 slots.
  @Test func aLongChainLeavesTheThreadNoLargeTableOfNodesMet() {
    let root = Property(0)
    let sizes = Recorder<Int>()
    let thread = Spawned {
      var chain = root.readOnly
      for _ in 0..<Self.length { chain = chain.map { $0 + 1 } }
      root.value = 1
      _ = chain.value
      sizes.append(DeliveringThread.current.pointee.spareSnapshot?.met.count ?? 0)
    }
    #expect(thread.join())
    #expect(sizes.values.count == 1 && sizes.values[0] <= 4096)
  }

  @Test func aChainOfEventMapsAndFilters() {
    runEvents({ chain, _ in chain.map { $0 + 1 }.filter { $0 >= 0 } }, expecting: Self.length)
  }

  @Test func aChainOfNestedMerges() {
    let other = EventSource<Int>()
    runEvents({ chain, _ in chain.merge(with: other) }, expecting: 0)
  }

  @Test func aChainOfSourcesForwardingFromHandlersIsBuiltDeliveredAndFreed() {
    let received = Recorder<Int>()
    let thread = Spawned {
      let first = EventSource<Int>()
      var last = first
      var subscriptions: [Subscription] = []
      for _ in 0..<Self.length {
        let next = EventSource<Int>()
        subscriptions.append(last.observe { next.send($0 + 1) })
        last = next
      }
      subscriptions.append(last.observe { received.append($0) })
      first.send(0)
      // Freed from the first: each source's subscriptions keep the next alive.
      subscriptions.removeAll()
    }
    #expect(thread.join())
    #expect(received.values == [Self.length])
  }
}
