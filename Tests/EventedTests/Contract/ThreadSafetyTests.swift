// Promise 1: every member of a lock-based type may be called from any thread at any
// time, with no data race. Run under Thread Sanitizer, these tests are the proof; run
// without it, they check that the books balance afterwards.
//
// The actor variants are free of data races by isolation; their test calls every
// member from many tasks at once and checks that the books balance afterwards.

import Dispatch
import Synchronization
import Testing

@testable import Evented

@Suite struct ThreadSafetyContract {
  @Test(arguments: EventSubjectKind.allCases)
  func threadSafetyEveryMemberFromManyThreads(_ kind: EventSubjectKind) {
    let subject = kind.make()
    let delivered = Atomic<Int>(0)
    let queue = DispatchQueue(label: "thread-safety", attributes: .concurrent)
    let finished = onThreads { index in
      var random = SplitMix(seed: index)
      var kept: [Subscription] = []
      var owners: [Owner] = []
      var set = Set<Subscription>()
      for step in 0..<300 {
        switch Int.random(in: 0..<9, using: &random) {
        case 0, 1: subject.send(step)
        case 2: kept.append(subject.observe { _ in delivered.add(1, ordering: .relaxed) })
        case 3:
          let owner = Owner()
          owners.append(owner)
          subject.observe(with: owner) { _, _ in delivered.add(1, ordering: .relaxed) }
        case 4:
          subject.observe(on: .queue(queue)) { _ in delivered.add(1, ordering: .relaxed) }.store(in: &set)
        case 5: if !kept.isEmpty { kept.remove(at: Int.random(in: 0..<kept.count, using: &random)).cancel() }
        case 6: if !owners.isEmpty { owners.removeFirst() }
        case 7: _ = subject.observerCount
        default:
          _ = kept.last?.isActive
          if set.count > 8 { set.removeAll() }
        }
      }
      for subscription in kept { subscription.cancel() }
    }
    #expect(finished)
    // A handler still running on the queue holds its owner-less handle, whose deinit
    // then ends the subscription on that queue's thread: wait for those to return.
    #expect(eventually { subject.observerCount == 0 })
  }

  @Test func threadSafetyEveryEventSourceMemberFromManyThreads() {
    let source = EventSource<Int>()
    let signal = EventSource<Void>()
    let delivered = Atomic<Int>(0)
    let finished = onThreads { index in
      var random = SplitMix(seed: 100 + index)
      var kept = Set<Subscription>()
      let owner = Owner()
      for step in 0..<300 {
        switch Int.random(in: 0..<8, using: &random) {
        case 0: source.send(step)
        case 1: signal.send()
        case 2: source.readOnly.observe { _ in delivered.add(1, ordering: .relaxed) }.store(in: &kept)
        case 3: source.observeOnce(with: owner) { _, _ in delivered.add(1, ordering: .relaxed) }
        case 4: source.observeOnce { _ in delivered.add(1, ordering: .relaxed) }.store(in: &kept)
        case 5: signal.observe(with: owner) { _, _ in delivered.add(1, ordering: .relaxed) }
        case 6: if step % 50 == 0 { source.removeAllObservers() }
        default:
          _ = source.observerCount + signal.readOnly.observerCount
          kept.removeAll()
        }
      }
    }
    #expect(finished)
    source.removeAllObservers()
    signal.removeAllObservers()
    #expect(source.observerCount == 0)
    #expect(signal.observerCount == 0)
  }

  @Test func threadSafetyEveryPropertyMemberFromManyThreads() {
    struct Pair: Equatable, Sendable {
      var left = 0
      var right = 0
    }
    let property = Property(Pair())
    let delivered = Atomic<Int>(0)
    let queue = DispatchQueue(label: "thread-safety-property")
    let finished = onThreads { index in
      var random = SplitMix(seed: 200 + index)
      var kept = Set<Subscription>()
      let owner = Owner()
      for step in 0..<300 {
        switch Int.random(in: 0..<9, using: &random) {
        case 0: property.value = Pair(left: step, right: index)
        case 1: property.modify { $0.left += 1 }
        case 2: _ = property.value.left + property.readOnly.value.right
        case 3: property.observe { _ in delivered.add(1, ordering: .relaxed) }.store(in: &kept)
        case 4: property.observeChanges(with: owner) { _, _ in delivered.add(1, ordering: .relaxed) }
        case 5: property.observe(\.left, with: owner) { _, _ in delivered.add(1, ordering: .relaxed) }
        case 6:
          property.readOnly.observe(on: .queue(queue)) { _ in delivered.add(1, ordering: .relaxed) }.store(in: &kept)
        case 7: _ = property.observerCount
        default: kept.removeAll()
        }
      }
    }
    #expect(finished)
    #expect(property.observerCount == 0)
  }

  // MARK: - Actor variants

  /// Actor isolation rules out data races at compile time; this checks that every
  /// member called from many tasks at once leaves the books balanced.
  @Test(arguments: ActorEventSubjectKind.allCases)
  func threadSafetyEveryActorMemberFromManyTasks(_ kind: ActorEventSubjectKind) async {
    let subject = kind.make()
    let delivered = Counter()
    await withTaskGroup(of: Void.self) { group in
      for index in 0..<contentionThreads {
        group.addTask {
          var random = SplitMix(seed: index)
          var kept: [Subscription] = []
          var owners: [Owner] = []
          for step in 0..<300 {
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1: await subject.send(step)
            case 2: kept.append(await subject.observe { _ in delivered.increment() })
            case 3:
              let owner = Owner()
              owners.append(owner)
              await subject.observe(with: owner) { _, _ in delivered.increment() }
            case 4: if !kept.isEmpty { kept.removeLast().cancel() }
            default: _ = await subject.observerCount
            }
          }
          for subscription in kept { subscription.cancel() }
          owners.removeAll()
        }
      }
    }
    // A handler still running on the actor's delivery task holds its owner until it
    // returns, so the count reaches 0 once the deliveries in flight are done (an
    // owner's deinit signals the wait).
    #expect(await settles { await subject.observerCount == 0 })
  }
}
