import Dispatch
import Observation
import Synchronization
import Testing

@testable import Evented

/// A person whose friend and last name are observable, as in Observable-Swift's chain.
private final class Person: Sendable {
  let lastName: Property<String>
  let friend = Property<Person?>(nil)

  init(_ lastName: String) { self.lastName = Property(lastName) }
}

/// A state container with a nested part, as in Minimalist's key-path observation.
private struct AppState: Equatable, Sendable {
  var login = "none"
  var counter = 0
}

@Suite struct PromiseSweepTests {
  struct Failure: Error {}

  // MARK: Capabilities of the seed libraries

  @Test func aChainThroughAnOptionalFriendFollowsTheCurrentFriendsNameOnly() {
    let me = Person("Me")
    let ned = Person("Stark")
    let ramsay = Person("Snow")
    let friendsName = me.friend.flatMapLatest { $0?.lastName }
    let seen = Recorder<String?>()
    let subscription = friendsName.observeChanges { seen.append($0.newValue) }
    me.friend.value = ned
    ned.lastName.value = "Stark of Winterfell"
    me.friend.value = ramsay
    ned.lastName.value = "Headless"
    ramsay.lastName.value = "Bolton"
    me.friend.value = nil
    ramsay.lastName.value = "Dead"
    #expect(seen.values == ["Stark", "Stark of Winterfell", "Snow", "Bolton", nil])
    #expect(friendsName.value == nil)
    withExtendedLifetime(subscription) {}
  }

  @Test func aSlidingWindowOfAnOptionalPropertyWithAnOwnerSeesOldAndNewAndEndsWithTheOwner() {
    let rating = Property<Int?>(nil)
    var owner: Owner? = Owner()
    let seen = Recorder<String>()
    rating.observeChanges(with: owner!) { _, change in
      seen.append("\(String(describing: change.oldValue))>\(String(describing: change.newValue))")
    }
    rating.value = nil
    rating.value = 1
    rating.value = 1
    rating.value = nil
    owner = nil
    rating.value = 2
    #expect(seen.values == ["nil>Optional(1)", "Optional(1)>nil"])
    #expect(rating.observerCount == 0)
  }

  @Test func aKeyPathObserverOfAReadOnlyViewSeesOnePartChangePerTransaction() {
    let state = Property(AppState())
    let seen = Recorder<String>()
    let owner = Owner()
    state.readOnly.observe(\.login, with: owner) { _, login in seen.append(login) }
    transaction {
      state.value.counter += 1
      state.value.login = "half"
      state.value.login = "done"
    }
    transaction { state.value.counter += 1 }
    #expect(seen.values == ["none", "done"])
    withExtendedLifetime(owner) {}
  }

  @Test func aKeyPathObserverOfADerivedValueSeesNothingOfAThrowingTransaction() {
    let state = Property(AppState())
    let doubled = state.map { AppState(login: $0.login + $0.login, counter: $0.counter * 2) }
    let seen = Recorder<String>()
    let owner = Owner()
    doubled.observe(\.login, with: owner) { _, login in seen.append(login) }
    #expect(throws: Failure.self) {
      try transaction {
        state.value.login = "x"
        throw Failure()
      }
    }
    state.value.login = "y"
    #expect(seen.values == ["nonenone", "yy"])
    withExtendedLifetime(owner) {}
  }

  @Test func everyMutatorOfAMutableCollectionPropertyCommitsOneChangesetThatReproducesTheArray() {
    let items = ArrayProperty(["a", "b", "c", "d"])
    let changesets = Recorder<ArrayChangeset<String>>()
    let subscription = items.observeChanges { changesets.append($0) }
    var replica = items.value
    items.append("e")
    items.append(contentsOf: ["f", "g"])
    items.insert("z", at: 0)
    _ = items.removeFirst()
    _ = items.removeLast()
    _ = items.remove(at: 1)
    items.replaceSubrange(1..<3, with: ["x", "y", "w"])
    items.move(from: 0, to: 3)
    items.removeAll()
    #expect(changesets.count == 9)
    for changeset in changesets.values {
      replica = changeset.applied(to: replica)
      #expect(replica == changeset.array)
    }
    #expect(replica == items.value)
    withExtendedLifetime(subscription) {}
  }

  // MARK: Observation

  @Test func aScopeOverACombinationFiresOnceAfterATransactionAndReadsBothNewValues() {
    let first = Property("Ada")
    let last = Property("Lovelace")
    let name = first.combineLatest(last).map { "\($0) \($1)" }
    let fires = Recorder<String>()
    withObservationTracking {
      _ = name.value
    } onChange: {
      fires.append("\(first.value)|\(last.value)|\(name.value)")
    }
    transaction {
      first.value = "Grace"
      last.value = "Hopper"
      first.value = "Grace B."
    }
    #expect(fires.wait(forCount: 1))
    first.value = "Later"
    #expect(fires.values == ["Grace B.|Hopper|Grace B. Hopper"])
  }

  @Test func aScopeOverADerivedValueIsNotNotifiedByAThrowingTransactionAndFiresOnTheNextCommit() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let fires = Recorder<Int>()
    withObservationTracking {
      _ = doubled.value
    } onChange: {
      fires.append(doubled.value)
    }
    #expect(throws: Failure.self) {
      try transaction {
        count.value = 5
        throw Failure()
      }
    }
    #expect(fires.count == 0)
    count.value = 1
    #expect(fires.wait(forCount: 1))
    #expect(fires.values == [2])
  }

  @Test func aScopeOverAnArraysCountIsNotNotifiedByAThrowingTransaction() {
    let items = ArrayProperty([1, 2])
    let fires = Recorder<Int>()
    withObservationTracking {
      _ = items.count
    } onChange: {
      fires.append(items.count)
    }
    #expect(throws: Failure.self) {
      try transaction {
        items.append(3)
        throw Failure()
      }
    }
    #expect(fires.count == 0)
    items.append(4)
    #expect(fires.wait(forCount: 1))
    #expect(fires.values == [3])
  }

  @Test func aScopeInstalledOnAnotherThreadWhileATransactionRunsReadsTheStateBeforeAndFiresAtItsCommit() {
    let a = Property(0)
    let b = Property(0)
    let sum = a.combineLatest(b).map { $0 + $1 }
    let wrote = Gate()
    let commit = Gate()
    let writer = Spawned {
      transaction {
        a.value = 1
        b.value = 1
        wrote.open()
        commit.wait()
      }
    }
    #expect(wrote.wait())
    let read = Recorder<Int>()
    let fires = Recorder<Int>()
    withObservationTracking {
      read.append(a.value)
      read.append(sum.value)
    } onChange: {
      fires.append(sum.value)
    }
    commit.open()
    #expect(writer.join())
    #expect(read.values == [0, 0])
    #expect(fires.wait(forCount: 1))
    #expect(fires.values.first == 2)
  }

  @Test func aScopeReadingADerivedValueInsideTheTransactionThatChangedItFiresWhenItEnds() {
    let count = Property(0)
    let tens = count.map { $0 * 10 }
    let fires = Recorder<Int>()
    let ended = Flag()
    transaction {
      count.value = 3
      withObservationTracking {
        #expect(tens.value == 30)
      } onChange: {
        #expect(ended.isSet)
        fires.append(tens.value)
      }
      count.value = 4
      ended.set()
    }
    #expect(fires.wait(forCount: 1))
    #expect(fires.values.first == 40)
  }

  @Test func aScopeOverAnArrayWrittenInsideAHandlerFiresOnlyAfterTheHandlerReturns() {
    let trigger = EventSource<Int>()
    let items = ArrayProperty<Int>([])
    let handlerReturned = Flag()
    let firedBeforeReturn = Flag()
    let fires = Counter()
    let subscription = trigger.observe { value in
      items.append(value)
      handlerReturned.set(false)
      handlerReturned.set(true)
    }
    withObservationTracking {
      _ = items.count
    } onChange: {
      if !handlerReturned.isSet { firedBeforeReturn.set() }
      fires.increment()
    }
    trigger.send(1)
    #expect(fires.wait(for: 1))
    #expect(!firedBeforeReturn.isSet)
    withExtendedLifetime(subscription) {}
  }

  // MARK: Lazy sources, removeAllObservers, owners and once-only observers

  @Test func removeAllObserversInsideATransactionEndsTheUsersObserversAndLeavesDerivedOnesFollowing() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let direct = Recorder<Int>()
    let derived = Recorder<Int>()
    let mine = count.observeChanges { direct.append($0.newValue) }
    let throughMap = doubled.observeChanges { derived.append($0.newValue) }
    transaction {
      count.value = 1
      count.removeAllObservers()
    }
    count.value = 2
    #expect(direct.values.isEmpty)
    #expect(!mine.isActive)
    #expect(derived.values == [2, 4])
    withExtendedLifetime(throughMap) {}
  }

  @Test func anOwnerDyingInsideATransactionIsNeverCalledForItsCommit() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let events = EventSource<Int>()
    let calls = Recorder<String>()
    var owner: Owner? = Owner()
    count.observeChanges(with: owner!) { _, change in calls.append("property \(change.newValue)") }
    doubled.observeChanges(with: owner!) { _, change in calls.append("derived \(change.newValue)") }
    events.observe(with: owner!) { _, event in calls.append("event \(event)") }
    events.map { $0 * 3 }.observe(with: owner!) { _, event in calls.append("mapped \(event)") }
    transaction {
      count.value = 1
      events.send(1)
      owner = nil
    }
    count.value = 2
    events.send(2)
    #expect(calls.values.isEmpty)
  }

  @Test func aSubscriptionCancelledInsideATransactionIsNeverCalledForItsCommit() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let events = EventSource<Int>()
    let calls = Recorder<String>()
    let onProperty = count.observeChanges { calls.append("property \($0.newValue)") }
    let onDerived = doubled.observeChanges { calls.append("derived \($0.newValue)") }
    let onEvents = events.observe { calls.append("event \($0)") }
    let onMapped = events.map { $0 * 3 }.observe { calls.append("mapped \($0)") }
    transaction {
      count.value = 1
      events.send(1)
      onProperty.cancel()
      onDerived.cancel()
      onEvents.cancel()
      onMapped.cancel()
    }
    #expect(calls.values.isEmpty)
  }

  @Test func observeOnceOnADerivedValueReceivesTheTransactionsFinalStateOnce() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let seen = Recorder<Int>()
    let once = doubled.observeOnce { seen.append($0) }
    transaction {
      count.value = 1
      count.value = 2
    }
    count.value = 3
    #expect(seen.values == [4])
    #expect(!once.isActive)
  }

  @Test func observeOnceOnADerivedValueIsNotCalledForAThrowingTransactionOrAnEqualState() {
    let count = Property(0)
    let parity = count.map { $0 % 2 }
    let seen = Recorder<Int>()
    let once = parity.observeOnce { seen.append($0) }
    #expect(throws: Failure.self) {
      try transaction {
        count.value = 1
        throw Failure()
      }
    }
    count.value = 2
    #expect(seen.values.isEmpty)
    count.value = 3
    count.value = 5
    count.value = 6
    #expect(seen.values == [1])
    withExtendedLifetime(once) {}
  }

  @Test func observeOnceOnADerivedValueRunsOnceWhileThreadsWriteAndItsHandlerWritesTheRoot() {
    for _ in 0..<20 {
      let count = Property(0)
      let doubled = count.map { $0 * 2 }
      let calls = Counter()
      let once = doubled.observeOnce { _ in
        calls.increment()
        count.value += 1000
      }
      #expect(onThreads { _ in for _ in 0..<50 { count.value += 1 } })
      #expect(calls.value == 1)
      #expect(!once.isActive)
    }
  }

  @Test func aLazyPropertyObservedOnlyThroughADerivedValueStopsWhenRemoveAllObserversEndsTheUsersSubscription() {
    let starts = Counter()
    let stops = Counter()
    let source = Property(0, onFirstObserver: { starts.increment() }, onLastObserverGone: { stops.increment() })
    let doubled = source.map { $0 * 2 }
    let seen = Recorder<Int>()
    let subscription = doubled.observe { seen.append($0) }
    #expect(starts.value == 1)
    source.removeAllObservers()
    source.value = 1
    #expect(seen.values == [0, 2])
    #expect(stops.value == 0)
    subscription.cancel()
    #expect(stops.wait(for: 1))
    #expect(starts.value == 1)
  }

  @Test func aLazyPropertysStartHookRunsOnceWhenItIsFirstObservedInsideATransaction() {
    let starts = Counter()
    let stops = Counter()
    let source = Property(0, onFirstObserver: { starts.increment() }, onLastObserverGone: { stops.increment() })
    let other = Property(0)
    let seen = Recorder<Int>()
    let subscription = transaction {
      other.value = 1
      return source.map { $0 + 1 }.observe { seen.append($0) }
    }
    #expect(starts.value == 1)
    source.value = 1
    #expect(seen.values == [1, 2])
    subscription.cancel()
    #expect(stops.wait(for: 1))
  }

  // MARK: Derived event sources in transactions

  @Test func filteredAndCompactMappedEventsOfATransactionArriveOnceAfterItInOrder() {
    let numbers = EventSource<Int>()
    let evens = numbers.filter { $0 % 2 == 0 }
    let halves = evens.compactMap { $0 % 4 == 0 ? $0 / 4 : nil }
    let seen = Recorder<String>()
    let inside = Flag()
    let first = evens.observe { event in
      if inside.isSet { seen.append("early") }
      seen.append("even \(event)")
    }
    let second = halves.observe { event in
      if inside.isSet { seen.append("early") }
      seen.append("quarter \(event)")
    }
    transaction {
      inside.set()
      for number in 1...8 { numbers.send(number) }
      inside.set(false)
    }
    #expect(seen.values.filter { $0.hasPrefix("even") } == ["even 2", "even 4", "even 6", "even 8"])
    #expect(seen.values.filter { $0.hasPrefix("quarter") } == ["quarter 1", "quarter 2"])
    #expect(!seen.values.contains("early"))
    withExtendedLifetime((first, second)) {}
  }

  @Test func eventsOfAThrowingTransactionNeverReachAFilterACompactMapOrAMerge() {
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    let merged = a.filter { $0 > 0 }.merge(with: b.compactMap { $0 > 0 ? $0 : nil })
    let seen = Recorder<Int>()
    let subscription = merged.observe { seen.append($0) }
    #expect(throws: Failure.self) {
      try transaction {
        a.send(1)
        b.send(2)
        throw Failure()
      }
    }
    a.send(3)
    b.send(4)
    #expect(seen.values == [3, 4])
    withExtendedLifetime(subscription) {}
  }

  @Test func aMergeOfASourceWithItselfDeliversEachEventOfATransactionAsOftenAsOutside() {
    let a = EventSource<Int>()
    let merged = a.merge(with: a.map { $0 * 10 })
    let outside = Recorder<Int>()
    let subscription = merged.observe { outside.append($0) }
    a.send(1)
    let afterPlain = outside.values
    transaction { a.send(2) }
    #expect(afterPlain.sorted() == [1, 10])
    #expect(outside.values.dropFirst(2).sorted() == [2, 20])
    withExtendedLifetime(subscription) {}
  }

  @Test func eventsAndAStateWrittenInOneTransactionAreSeenTogetherByTheEventsObserver() {
    let done = EventSource<Int>()
    let total = Property(0)
    let mapped = done.map { $0 + 100 }
    let seen = Recorder<String>()
    let subscription = mapped.observe { event in seen.append("\(event) at \(total.value)") }
    transaction {
      done.send(1)
      total.value = 1
      done.send(2)
      total.value = 2
    }
    #expect(seen.values == ["101 at 2", "102 at 2"])
    withExtendedLifetime(subscription) {}
  }

  // MARK: Memory bounds

  @Test func aMapOfAMergeObservedOnAHeldQueueRunsEveryEventInOrderOnceReleased() {
    let a = EventSource<Int>(backlogLimit: 8)
    let b = EventSource<Int>(backlogLimit: 8)
    let merged = a.merge(with: b).map { $0 }
    let queue = DispatchQueue(label: "held")
    let held = Gate()
    queue.async { held.wait() }
    let seen = Recorder<Int>()
    let subscription = merged.observe(on: .queue(queue)) { seen.append($0) }
    let sent = Number(0)
    let sender = Spawned {
      for number in 0..<200 {
        if number % 2 == 0 { a.send(number) } else { b.send(number) }
        sent.increment()
      }
    }
    #expect(eventually { sent.value >= 8 })
    #expect(sent.value <= 16)
    held.open()
    #expect(sender.join())
    #expect(seen.wait(forCount: 200))
    #expect(seen.values == Array(0..<200))
    withExtendedLifetime(subscription) {}
  }

  @Test func aCombinationObservedOnAHeldQueueDeliversOnlyTheNewestStateOnceReleased() {
    let a = Property(0)
    let b = Property(0)
    let both = a.combineLatest(b)
    let queue = DispatchQueue(label: "held")
    let held = Gate()
    queue.async { held.wait() }
    let seen = Recorder<String>()
    let subscription = both.observe(on: .queue(queue)) { seen.append("\($0.0),\($0.1)") }
    for number in 1...2_000 {
      transaction {
        a.value = number
        b.value = number
      }
    }
    held.open()
    #expect(seen.wait(until: { $0.last == "2000,2000" }))
    #expect(seen.count <= 2)
    withExtendedLifetime(subscription) {}
  }

  // MARK: More Observation

  @Test func aTransactionThatRestoresEveryValueNotifiesNoScope() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let items = ArrayProperty([1, 2])
    let fires = Recorder<String>()
    withObservationTracking {
      _ = count.value
    } onChange: {
      fires.append("property")
    }
    withObservationTracking {
      _ = doubled.value
    } onChange: {
      fires.append("derived")
    }
    withObservationTracking {
      _ = items.readOnly.value
    } onChange: {
      fires.append("array view")
    }
    transaction {
      count.value = 5
      count.value = 0
      items.append(3)
      _ = items.removeLast()
    }
    let marker = Property(0)
    let markerFired = Gate()
    withObservationTracking {
      _ = marker.value
    } onChange: {
      markerFired.open()
    }
    marker.value = 1
    #expect(markerFired.wait())
    #expect(fires.values.isEmpty)
  }

  @Test func observationsOverACombinationWrittenByTransactionsOnAnotherThreadYieldOnlyWholeStatesAndEndOnTheLast()
    async
  {
    for run in 0..<10 {
      let a = Property(0)
      let b = Property(0)
      let both = a.combineLatest(b)
      let last = 200
      let pairs = Observations { both.value }
      let writer = Spawned {
        for i in 1...last {
          transaction {
            a.value = i
            b.value = i
          }
        }
      }
      let seen = Recorder<String>()
      let torn = Flag()
      let consumer = Task {
        for await pair in pairs {
          if pair.0 != pair.1 { torn.set() }
          seen.append("\(pair.0),\(pair.1)")
          if pair.0 == last && pair.1 == last { break }
        }
      }
      #expect(await settles { writer.isFinished })
      let ended = await settles { seen.values.last == "\(last),\(last)" }
      consumer.cancel()
      #expect(ended, "run \(run) ended on \(seen.values.last ?? "nothing")")
      #expect(!torn.isSet, "run \(run) saw \(seen.values)")
    }
  }

  @Test func aScopeOverAFlatMapLatestSwitchedInATransactionFiresOnceAndNotForTheOldTarget() {
    let useFirst = Property(true)
    let first = Property("one")
    let second = Property("two")
    let chosen = useFirst.flatMapLatest { $0 ? first : second }
    let fires = Recorder<String>()
    withObservationTracking {
      _ = chosen.value
    } onChange: {
      fires.append(chosen.value)
    }
    transaction {
      useFirst.value = false
      second.value = "TWO"
    }
    #expect(fires.wait(forCount: 1))
    let fires2 = Recorder<String>()
    withObservationTracking {
      _ = chosen.value
    } onChange: {
      fires2.append(chosen.value)
    }
    first.value = "ONE"
    second.value = "2"
    #expect(fires2.wait(forCount: 1))
    #expect(fires.values == ["TWO"])
    #expect(fires2.values == ["2"])
  }

  // MARK: More once-only observers and derived event sources

  @Test func observeOnceOnADerivedEventSourceInsideATransactionReceivesOnlyTheFirstEvent() {
    let numbers = EventSource<Int>()
    let doubled = numbers.map { $0 * 2 }
    let seen = Recorder<Int>()
    let once = doubled.observeOnce { seen.append($0) }
    transaction {
      numbers.send(1)
      numbers.send(2)
      numbers.send(3)
    }
    numbers.send(4)
    #expect(seen.values == [2])
    #expect(!once.isActive)
  }

  @Test func observeOnceOnAnArrayIsNotCalledForAThrowingTransactionAndGetsTheNextChangeset() {
    let items = ArrayProperty([1])
    let seen = Recorder<[Int]>()
    let once = items.observeOnce { seen.append($0) }
    #expect(throws: Failure.self) {
      try transaction {
        items.append(2)
        throw Failure()
      }
    }
    #expect(seen.values.isEmpty)
    items.append(3)
    items.append(4)
    #expect(seen.values == [[1, 3]])
    withExtendedLifetime(once) {}
  }

  @Test func aTransactionInsideAHandlerOfAMappedEventSourceDeliversItsEventsAfterTheHandlerInOrder() {
    let numbers = EventSource<Int>()
    let mapped = numbers.map { $0 }
    let seen = Recorder<String>()
    let subscription = mapped.observe { number in
      seen.append("start \(number)")
      if number == 1 {
        transaction {
          numbers.send(2)
          numbers.send(3)
        }
      }
      seen.append("end \(number)")
    }
    numbers.send(1)
    #expect(seen.values == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"])
    withExtendedLifetime(subscription) {}
  }

  @Test func removeAllObserversOfAnEventSourceWhileAnotherThreadsTransactionSendsLeavesItsMergeFollowing() {
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    let merged = a.merge(with: b)
    let direct = Recorder<Int>()
    let throughMerge = Recorder<Int>()
    let mine = a.observe { direct.append($0) }
    let followed = merged.observe { throughMerge.append($0) }
    let sent = Gate()
    let removed = Gate()
    let writer = Spawned {
      transaction {
        a.send(1)
        b.send(2)
        sent.open()
        removed.wait()
      }
    }
    #expect(sent.wait())
    a.removeAllObservers()
    removed.open()
    #expect(writer.join())
    a.send(3)
    #expect(throughMerge.wait(forCount: 3))
    #expect(throughMerge.values.sorted() == [1, 2, 3])
    #expect(direct.values.isEmpty)
    #expect(!mine.isActive)
    withExtendedLifetime(followed) {}
  }

  @Test func anOwnerDyingOnAnotherThreadWhileATransactionIsOpenIsNeverCalledForItsCommit() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let calls = Recorder<String>()
    let owners = Monitor<Owner?>(Owner())
    owners.withLock { owner in
      count.observeChanges(with: owner!) { _, change in calls.append("property \(change.newValue)") }
      doubled.observeChanges(with: owner!) { _, change in calls.append("derived \(change.newValue)") }
    }
    let wrote = Gate()
    let died = Gate()
    let writer = Spawned {
      transaction {
        count.value = 1
        wrote.open()
        died.wait()
      }
    }
    #expect(wrote.wait())
    let dropped = completesOnAnotherThread {
      var dying = owners.withLock { $0.take() }
      precondition(dying != nil)
      dying = nil
    }
    #expect(dropped)
    died.open()
    #expect(writer.join())
    #expect(calls.values.isEmpty)
  }

  // MARK: Observation around handlers, other threads and removeAllObservers

  @Test func aPropertyWrittenInsideAHandlerNotifiesItsScopeBeforeTheHandlerReturns() {
    let trigger = EventSource<Int>()
    let count = Property(0)
    let firedInside = Flag()
    let inHandler = Flag()
    let fired = Gate()
    withObservationTracking {
      _ = count.value
    } onChange: {
      if inHandler.isSet { firedInside.set() }
      fired.open()
    }
    let subscription = trigger.observe { value in
      inHandler.set()
      count.value = value
      inHandler.set(false)
    }
    trigger.send(1)
    #expect(fired.wait())
    #expect(firedInside.isSet)
    withExtendedLifetime(subscription) {}
  }

  @Test func aScopeInstalledOnAnotherThreadWhileATransactionRunsIsNotNotifiedWhenItThrows() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let items = ArrayProperty([1])
    let wrote = Gate()
    let release = Gate()
    let writer = Spawned {
      #expect(throws: Failure.self) {
        try transaction {
          count.value = 1
          items.append(2)
          wrote.open()
          release.wait()
          throw Failure()
        }
      }
    }
    #expect(wrote.wait())
    let fires = Recorder<String>()
    let read = Recorder<Int>()
    withObservationTracking {
      read.append(count.value)
    } onChange: {
      fires.append("property")
    }
    withObservationTracking {
      read.append(doubled.value)
    } onChange: {
      fires.append("derived")
    }
    withObservationTracking {
      read.append(items.count)
    } onChange: {
      fires.append("array")
    }
    release.open()
    #expect(writer.join())
    let marker = Property(0)
    let markerFired = Gate()
    withObservationTracking {
      _ = marker.value
    } onChange: {
      markerFired.open()
    }
    marker.value = 1
    #expect(markerFired.wait())
    #expect(read.values == [0, 0, 1])
    #expect(fires.values.isEmpty)
  }

  @Test func aScopeOverADerivedValueStillFiresAfterRemoveAllObserversOfItsRoot() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let fires = Recorder<Int>()
    withObservationTracking {
      _ = doubled.value
    } onChange: {
      fires.append(doubled.value)
    }
    count.removeAllObservers()
    count.value = 1
    #expect(fires.wait(forCount: 1))
    #expect(fires.values == [2])
  }

  @Test func aScopeReadingAPropertyInsideTheTransactionThatWroteItFiresWhenItEnds() {
    let count = Property(0)
    let fires = Recorder<Int>()
    let ended = Flag()
    transaction {
      count.value = 3
      withObservationTracking {
        #expect(count.value == 3)
      } onChange: {
        #expect(ended.isSet)
        fires.append(count.value)
      }
      count.value = 4
      ended.set()
    }
    #expect(fires.wait(forCount: 1))
    #expect(fires.values.first == 4)
  }

  // MARK: Once-only observers of the seeds

  @Test func aOnceOnlyValueObserverWhoseOwnerDiedIsNeverCalledAndIsReleased() {
    let rating = Property<Int?>(nil)
    let live = LiveCount()
    var owner: Tracked? = Tracked(live)
    let seen = Recorder<Int?>()
    rating.observeOnce(with: owner!) { _, value in seen.append(value) }
    owner = nil
    #expect(live.wait(for: 0))
    rating.value = 1
    #expect(seen.values.isEmpty)
    #expect(rating.observerCount == 0)
  }

  @Test func observeOnceOnAFilteredSourceReceivesTheFirstEventThatPasses() {
    let numbers = EventSource<Int>()
    let evens = numbers.filter { $0 % 2 == 0 }
    let firstEven = Recorder<Int>()
    let once = evens.observeOnce { firstEven.append($0) }
    transaction {
      numbers.send(1)
      numbers.send(3)
      numbers.send(4)
      numbers.send(6)
    }
    numbers.send(8)
    #expect(firstEven.values == [4])
    #expect(!once.isActive)
  }

  // MARK: Under contention

  @Test func everyScopeOverADerivedValueInstalledWhileAnotherThreadRunsTransactionsFiresOnTheNextChange() {
    let a = Property(0)
    let b = Property(0)
    let sum = a.combineLatest(b).map { $0 + $1 }
    let stop = Atomic<Bool>(false)
    let started = Gate()
    let writer = Spawned {
      var i = 0
      while !stop.load(ordering: .relaxed) {
        i += 1
        transaction {
          a.value = i
          b.value = i
        }
        if i == 1 { started.open() }
      }
    }
    #expect(started.wait())
    let scopes = 200
    let fired = (0..<scopes).map { _ in Flag() }
    let torn = Flag()
    for flag in fired {
      withObservationTracking {
        if sum.value % 2 != 0 { torn.set() }
      } onChange: {
        flag.set()
      }
    }
    stop.store(true, ordering: .relaxed)
    #expect(writer.join())
    transaction {
      a.value += 1
      b.value += 1
    }
    #expect(eventually { fired.allSatisfy(\.isSet) })
    #expect(!torn.isSet)
  }

  @Test func removeAllObserversRepeatedWhileAnotherThreadWritesLeavesADerivedObserverEndingOnValue() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let last = Number(-1)
    let subscription = doubled.observe { last.store($0) }
    let stop = Atomic<Bool>(false)
    let remover = Spawned {
      while !stop.load(ordering: .relaxed) {
        count.removeAllObservers()
        yieldProcessor()
      }
    }
    for i in 1...2_000 { count.value = i }
    stop.store(true, ordering: .relaxed)
    #expect(remover.join())
    count.value = 5_000
    #expect(last.value == 10_000)
    #expect(doubled.value == 10_000)
    withExtendedLifetime(subscription) {}
  }

  @Test func aFlatMapLatestObservedOnAHeldQueueFollowsOnlyItsCurrentTarget() {
    let targets = (0..<100).map { Property($0) }
    let index = Property(0)
    let chosen = index.flatMapLatest { targets[$0] }
    let queue = DispatchQueue(label: "held")
    let held = Gate()
    queue.async { held.wait() }
    let seen = Recorder<Int>()
    let subscription = chosen.observe(on: .queue(queue)) { seen.append($0) }
    for i in 1..<100 { index.value = i }
    let followed = targets.indices.filter { targets[$0].observerCount > 0 }
    held.open()
    #expect(seen.wait(until: { $0.last == 99 }))
    #expect(followed == [99])
    #expect(seen.count <= 2)
    withExtendedLifetime(subscription) {}
  }

  @Test func aMergeOfSourcesWrittenInOneTransactionOnAnotherThreadIsSeenWholeByAHeldQueue() {
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    let count = Property(0)
    let merged = a.merge(with: b)
    let queue = DispatchQueue(label: "held")
    let held = Gate()
    queue.async { held.wait() }
    let seen = Recorder<String>()
    let subscription = merged.observe(on: .queue(queue)) { event in seen.append("\(event)@\(count.value)") }
    let writer = Spawned {
      for round in 1...50 {
        transaction {
          a.send(round * 10 + 1)
          count.value = round
          b.send(round * 10 + 2)
        }
      }
    }
    held.open()
    #expect(writer.join())
    #expect(seen.wait(forCount: 100))
    let events = seen.values.map { Int($0.split(separator: "@")[0])! }
    let rounds = seen.values.map { Int($0.split(separator: "@")[1])! }
    var expected: [Int] = []
    for round in 1...50 { expected += [round * 10 + 1, round * 10 + 2] }
    #expect(events == expected)
    for (event, round) in zip(events, rounds) { #expect(round >= event / 10) }
    withExtendedLifetime(subscription) {}
  }

  // MARK: Replicas, combinations of collections, lazy event sources

  @Test func aReplicaFromEmptyMadeInsideATransactionThatChangedTheArrayEndsOnItsValue() {
    let items = ArrayProperty([1, 2, 3])
    let changesets = Recorder<ArrayChangeset<Int>>()
    let subscription = transaction {
      items.append(4)
      let subscription = items.observeChanges(fromEmpty: true) { changesets.append($0) }
      _ = items.removeFirst()
      return subscription
    }
    items.append(5)
    var replica: [Int] = []
    for changeset in changesets.values { replica = changeset.applied(to: replica) }
    #expect(replica == items.value)
    #expect(replica == [2, 3, 4, 5])
    withExtendedLifetime(subscription) {}
  }

  @Test func aCombinationOfACollectionOfPropertiesReceivesOneUpdatePerTransaction() {
    let parts = (0..<5).map { Property($0) }
    let all = parts.combineLatest()
    let seen = Recorder<[Int]>()
    let subscription = all.observe { seen.append($0) }
    transaction {
      for part in parts { part.value += 10 }
    }
    #expect(seen.values == [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])
    withExtendedLifetime(subscription) {}
  }

  @Test func aMergeOfLazyEventSourcesStartsEachOnceAndStopsThemWhenItIsFreed() {
    let starts = Counter()
    let stops = Counter()
    let a = EventSource<Int>(onFirstObserver: { starts.increment() }, onLastObserverGone: { stops.increment() })
    let b = EventSource<Int>(onFirstObserver: { starts.increment() }, onLastObserverGone: { stops.increment() })
    var merged: ReadOnlyEventSource<Int>? = a.merge(with: b.filter { $0 > 0 })
    #expect(starts.value == 2)
    let seen = Recorder<Int>()
    let first = merged!.observe { seen.append($0) }
    let second = merged!.map { $0 * 2 }.observe { seen.append($0) }
    transaction {
      a.send(1)
      b.send(2)
    }
    #expect(seen.values.sorted() == [1, 2, 2, 4])
    first.cancel()
    second.cancel()
    #expect(stops.value == 0)
    merged = nil
    #expect(stops.wait(for: 2))
    #expect(starts.value == 2)
  }

  @Test func aOnceOnlyObserverOfAFilteredLazySourceStopsItAfterItsEvent() {
    let starts = Counter()
    let stops = Counter()
    let sensor = EventSource<Int>(onFirstObserver: { starts.increment() }, onLastObserverGone: { stops.increment() })
    let seen = Recorder<Int>()
    let once = sensor.filter { $0 > 10 }.observeOnce { seen.append($0) }
    #expect(starts.value == 1)
    sensor.send(5)
    #expect(stops.value == 0)
    sensor.send(15)
    #expect(stops.wait(for: 1))
    sensor.send(20)
    #expect(seen.values == [15])
    withExtendedLifetime(once) {}
  }

  @Test func inPlaceMutationsThroughTheWrapperInsideATransactionCommitOnce() {
    final class Model: @unchecked Sendable {
      @Property var names: [String] = []
      @Property var count = 0
    }
    let model = Model()
    let seen = Recorder<String>()
    let first = model.$names.observeChanges { seen.append("names \($0.oldValue)>\($0.newValue)") }
    let second = model.$count.observeChanges { seen.append("count \($0.oldValue)>\($0.newValue)") }
    transaction {
      model.names.append("a")
      model.count += 1
      model.names.append("b")
      model.count += 1
    }
    #expect(seen.values == ["names []>[\"a\", \"b\"]", "count 0>2"])
    withExtendedLifetime((first, second)) {}
  }

  // MARK: Owners of derived event subscriptions, restored derived values

  @Test func anOwnerThatDiesWhileMappedEventsWaitOnAHeldQueueIsNeverCalled() {
    let numbers = EventSource<Int>()
    let queue = DispatchQueue(label: "held")
    let held = Gate()
    queue.async { held.wait() }
    let calls = Counter()
    var owner: Owner? = Owner()
    numbers.map { $0 * 2 }.observe(with: owner!, on: .queue(queue)) { _, _ in calls.increment() }
    numbers.merge(with: EventSource<Int>()).observe(with: owner!, on: .queue(queue)) { _, _ in calls.increment() }
    for number in 1...3 { numbers.send(number) }
    owner = nil
    held.open()
    let drained = Gate()
    queue.async { drained.open() }
    #expect(drained.wait())
    #expect(calls.value == 0)
  }

  @Test func theCapturesOfAMergeObserverWhoseOwnerDiedAreReleasedByTheNextEvent() {
    let a = EventSource<Int>()
    let b = EventSource<Int>()
    let merged = a.merge(with: b)
    let live = LiveCount()
    var owner: Owner? = Owner()
    let captured = Tracked(live)
    merged.observe(with: owner!) { _, _ in withExtendedLifetime(captured) {} }
    _ = consume captured
    owner = nil
    b.send(1)
    #expect(live.wait(for: 0))
    #expect(merged.observerCount == 0)
  }

  @Test func aTransactionThatRestoresADerivedValuesRootsNotifiesNoneOfItsObservers() {
    let a = Property(0)
    let b = Property(0)
    let sum = a.combineLatest(b).map { $0 + $1 }
    let calls = Recorder<String>()
    let first = sum.observeChanges { calls.append("sum \($0.oldValue)>\($0.newValue)") }
    let second = a.combineLatest(b).observeChanges { calls.append("pair \($0.newValue)") }
    transaction {
      a.value = 5
      b.value = -5
    }
    transaction {
      a.value = 1
      a.value = 5
      b.value = 7
      b.value = -5
    }
    #expect(calls.values == ["pair (5, -5)"])
    withExtendedLifetime((first, second)) {}
  }

  // MARK: Tracking subscriptions stay one

  @Test func manyScopesReadingADerivedValueAndAnArrayAreFollowedByOneSubscriptionEach() {
    let count = Property(0)
    let doubled = count.map { $0 * 2 }
    let items = ArrayProperty([1])
    let fires = Counter()
    for _ in 0..<50 {
      withObservationTracking {
        _ = doubled.value
        _ = items.count
      } onChange: {
        fires.increment()
      }
    }
    #expect(count.observerCount == 1)
    #expect(items.observerCount == 1)
    count.value = 1
    #expect(fires.wait(for: 50))
  }

  @Test func aScopeThatRegistersAgainOnEveryChangeKeepsOneSubscriptionOnTheRoots() {
    let count = Property(0)
    let items = ArrayProperty<Int>([])
    let sum = count.combineLatest(items.readOnly).map { $0 + $1.count }
    for round in 1...100 {
      let fired = Gate()
      withObservationTracking {
        _ = sum.value
        _ = items.isEmpty
      } onChange: {
        fired.open()
      }
      if round % 2 == 0 { count.value = round } else { items.append(round) }
      #expect(fired.wait())
    }
    #expect(count.observerCount <= 1)
    #expect(items.observerCount <= 2)
  }

  @Test func observationsOverAnArrayAndAFlatMapLatestWrittenOnAnotherThreadEndOnTheFinalState() async {
    for run in 0..<10 {
      let items = ArrayProperty<Int>([])
      let targets = (0..<4).map { Property($0 * 1_000) }
      let index = Property(0)
      let chosen = index.flatMapLatest { targets[$0] }
      let last = 150
      let states = Observations { "\(items.count) \(chosen.value)" }
      let writer = Spawned {
        for i in 1...last {
          items.append(i)
          index.value = i % 4
          targets[i % 4].value += 1
        }
      }
      let expected = Monitor<String?>(nil)
      let seen = Recorder<String>()
      let consumer = Task {
        for await state in states {
          seen.append(state)
          if let final = expected.current, state == final { break }
        }
      }
      #expect(await settles { writer.isFinished })
      let final = "\(last) \(targets[last % 4].value)"
      expected.withLock { $0 = final }
      let ended = await settles { seen.values.last == final }
      consumer.cancel()
      #expect(ended, "run \(run) ended on \(seen.values.last ?? "nothing"), not \(final)")
    }
  }

  // MARK: Event sources and non-skipping properties in transactions

  @Test func removeAllObserversOfAnEventSourceInsideATransactionEndsItsObserversBeforeTheCommit() {
    let numbers = EventSource<Int>()
    let doubled = numbers.map { $0 * 2 }
    let direct = Recorder<Int>()
    let derived = Recorder<Int>()
    let mine = numbers.observe { direct.append($0) }
    let followed = doubled.observe { derived.append($0) }
    transaction {
      numbers.send(1)
      numbers.removeAllObservers()
      numbers.send(2)
    }
    #expect(direct.values.isEmpty)
    #expect(!mine.isActive)
    #expect(derived.values == [2, 4])
    withExtendedLifetime(followed) {}
  }

  @Test func aNonSkippingPropertyWrittenSeveralTimesInATransactionCommitsOnceEvenWhenEqual() {
    let image = Property("same", skipsDuplicates: false)
    let changes = Recorder<String>()
    let subscription = image.observeChanges { changes.append("\($0.oldValue)>\($0.newValue)") }
    transaction {
      image.value = "other"
      image.value = "same"
    }
    #expect(throws: Failure.self) {
      try transaction {
        image.value = "thrown"
        throw Failure()
      }
    }
    #expect(changes.values == ["same>same"])
    withExtendedLifetime(subscription) {}
  }

  @Test func aDerivedObserverSubscribingOnAnotherThreadWhileATransactionRunsGetsOneWholeChange() {
    let a = Property(0)
    let b = Property(0)
    let pair = a.combineLatest(b).map { "\($0),\($1)" }
    let wrote = Gate()
    let subscribed = Gate()
    let writer = Spawned {
      transaction {
        a.value = 1
        b.value = 1
        wrote.open()
        subscribed.wait()
      }
    }
    #expect(wrote.wait())
    let changes = Recorder<String>()
    let subscription = pair.observeChanges { changes.append("\($0.oldValue)>\($0.newValue)") }
    subscribed.open()
    #expect(writer.join())
    #expect(changes.wait(forCount: 1))
    a.value = 2
    #expect(changes.values == ["0,0>1,1", "1,1>2,1"])
    withExtendedLifetime(subscription) {}
  }

  // MARK: Memory held for slow observers

  @Test func aDerivedValueObservedOnAHeldQueueKeepsOnlyAFewOfTheValuesWrittenAlive() {
    let live = LiveCount()
    let current = Property(Tracked(live, id: 0))
    let ids = current.map { $0 }.map { $0 }
    let queue = DispatchQueue(label: "held")
    let held = Gate()
    queue.async { held.wait() }
    let seen = Recorder<Int>()
    let subscription = ids.observe(on: .queue(queue)) { seen.append($0.id) }
    let changes = current.observeChanges(on: .queue(queue)) { _ in }
    for id in 1...200 { current.value = Tracked(live, id: id) }
    let aliveWhileHeld = live.value
    held.open()
    #expect(seen.wait(until: { $0.last == 200 }))
    #expect(aliveWhileHeld <= 8, "\(aliveWhileHeld) values alive behind a held queue")
    withExtendedLifetime((subscription, changes)) {}
  }

  @Test func aKeyPathObserverOfAnArraysViewIsCalledOnlyWhenTheCountChanges() {
    let items = ArrayProperty(["a", "b"])
    let owner = Owner()
    let counts = Recorder<Int>()
    items.readOnly.observe(\.count, with: owner) { _, count in counts.append(count) }
    items[0] = "z"
    transaction {
      items.append("c")
      _ = items.removeFirst()
    }
    items.append("d")
    #expect(counts.values == [2, 3])
    withExtendedLifetime(owner) {}
  }

  @Test func removeAllObserversOfALazySourceStopsItOnceAndANewObserverStartsItAgain() {
    let hooks = Recorder<String>()
    let sensor = EventSource<Int>(onFirstObserver: { hooks.append("+") }, onLastObserverGone: { hooks.append("-") })
    let level = Property(0, onFirstObserver: { hooks.append("p+") }, onLastObserverGone: { hooks.append("p-") })
    let first = sensor.observe { _ in }
    let second = sensor.observe { _ in }
    let third = level.observe { _ in }
    sensor.removeAllObservers()
    level.removeAllObservers()
    #expect(hooks.wait(forCount: 4))
    first.cancel()
    second.cancel()
    third.cancel()
    let again = sensor.observe { _ in }
    #expect(hooks.wait(forCount: 5))
    #expect(hooks.values == ["+", "p+", "-", "p-", "+"])
    withExtendedLifetime(again) {}
  }

  @Test func aLazyPropertyReadInAScopeStaysStartedThroughRemoveAllObservers() {
    let hooks = Recorder<String>()
    let level = Property(0, onFirstObserver: { hooks.append("+") }, onLastObserverGone: { hooks.append("-") })
    let fired = Gate()
    withObservationTracking {
      _ = level.map { $0 + 1 }.value
    } onChange: {
      fired.open()
    }
    #expect(hooks.wait(forCount: 1))
    level.removeAllObservers()
    #expect(hooks.values == ["+"])
    level.value = 1
    #expect(fired.wait())
    #expect(hooks.values.first == "+")
  }

  // MARK: Reentrancy from onChange, hooks racing transactions

  @Test func anOnChangeThatRunsATransactionAfterATransactionCommitsItWithoutDeadlock() {
    let a = Property(0)
    let b = Property(0)
    let tens = a.map { $0 * 10 }
    let seen = Recorder<Int>()
    let subscription = b.observeChanges { seen.append($0.newValue) }
    let fired = Gate()
    withObservationTracking {
      _ = tens.value
    } onChange: {
      transaction {
        b.value = tens.value
        b.value += 1
      }
      fired.open()
    }
    let finished = completesOnAnotherThread {
      transaction { a.value = 1 }
    }
    #expect(finished)
    #expect(fired.wait())
    #expect(b.value == 11)
    #expect(seen.values == [11])
    withExtendedLifetime(subscription) {}
  }
}
