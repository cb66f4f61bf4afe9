import Testing

@testable import Evented

@Suite struct PropertyTests {
  @Test func observeDeliversTheCurrentValueFirstThenChanges() {
    let property = Property(1)
    let owner = Owner()
    let seen = Recorder<Int>()
    property.observe(with: owner) { _, value in seen.append(value) }
    #expect(seen.values == [1])
    property.value = 2
    property.value = 3
    #expect(seen.values == [1, 2, 3])
  }

  @Test func observeChangesDoesNotReplayAndSlidesOldToNew() {
    let property = Property("a")
    let owner = Owner()
    let changes = Recorder<Change<String>>()
    property.observeChanges(with: owner) { _, change in changes.append(change) }
    #expect(changes.values.isEmpty)
    property.value = "b"
    property.value = "c"
    property.modify { $0 += "d" }
    #expect(
      changes.values == [
        Change(oldValue: "a", newValue: "b"), Change(oldValue: "b", newValue: "c"),
        Change(oldValue: "c", newValue: "cd"),
      ])
  }

  @Test func modifyReturnsTheResultOfItsClosureAndNotifiesOnce() {
    let property = Property([1, 2, 3])
    let changes = Recorder<Change<[Int]>>()
    let subscription = property.observeChanges { changes.append($0) }
    let removed = property.modify { array -> Int? in
      array.append(4)
      array.removeFirst()
      return array.popLast()
    }
    #expect(removed == 4)
    #expect(property.value == [2, 3])
    #expect(changes.values == [Change(oldValue: [1, 2, 3], newValue: [2, 3])])
    subscription.cancel()
  }

  @Test func modifyThatThrowsLeavesTheValueAndNotifiesNobody() {
    struct Refused: Error {}
    let property = Property(5)
    let changes = Recorder<Change<Int>>()
    let subscription = property.observeChanges { changes.append($0) }
    #expect(throws: Refused.self) {
      try property.modify { value throws(Refused) in
        value = 6
        throw Refused()
      }
    }
    #expect(property.value == 5)
    #expect(changes.values.isEmpty)
    subscription.cancel()
  }

  @Test func equatableValuesSkipEqualWrites() {
    let property = Property(0)
    let seen = Recorder<Int>()
    let subscription = property.observe { seen.append($0) }
    property.value = 0
    property.value = 1
    property.value = 1
    #expect(seen.values == [0, 1])
    subscription.cancel()
  }

  @Test func optionalEquatableValuesSkipEqualWrites() {
    let rating = Property<Int?>(nil)
    let seen = Recorder<Int?>()
    let subscription = rating.observe { seen.append($0) }
    rating.value = nil
    rating.value = 1
    rating.value = 1
    rating.value = nil
    #expect(seen.values == [nil, 1, nil])
    subscription.cancel()
  }

  @Test func skipsDuplicatesFalseNotifiesEveryWrite() {
    let property = Property(0, skipsDuplicates: false)
    let seen = Recorder<Int>()
    let subscription = property.observe { seen.append($0) }
    property.value = 0
    property.value = 0
    property.modify { _ in }
    #expect(seen.values == [0, 0, 0, 0])
    subscription.cancel()
  }

  @Test func nonEquatableValuesNeverSkip() {
    final class Image: Sendable {}
    let image = Image()
    let property = Property<Image?>(nil)
    let seen = Counter()
    let subscription = property.observe { _ in seen.increment() }
    property.value = image
    property.value = image
    property.value = nil
    property.value = nil
    #expect(seen.value == 5)
    subscription.cancel()
  }

  @Test func keyPathObservationDeliversOnlyWhenThatPartChanges() {
    struct Login: Equatable, Sendable {
      var userName = ""
      var attempts = 0
    }
    struct AppState: Equatable, Sendable {
      var login = Login()
      var screen = "home"
    }
    let state = Property(AppState())
    let owner = Owner()
    let names = Recorder<String>()
    let screens = Recorder<String>()
    state.observe(\.login.userName, with: owner) { _, name in names.append(name) }
    let subscription = state.observe(\.screen) { screens.append($0) }
    state.modify { $0.login.attempts += 1 }
    state.modify { $0.login.userName = "ada" }
    state.modify { $0.screen = "login" }
    state.modify { $0.login.userName = "ada" }
    state.modify { $0.login.userName = "bob" }
    #expect(names.values == ["", "ada", "bob"])
    #expect(screens.values == ["home", "login"])
    subscription.cancel()
  }

  @Test func keyPathSelfSkipsEqualValuesOfAPropertyThatDoesNotSkip() {
    let property = Property(1, skipsDuplicates: false)
    let owner = Owner()
    let all = Recorder<Int>()
    let distinct = Recorder<Int>()
    let subscription = property.observe { all.append($0) }
    property.observe(\.self, with: owner) { _, value in distinct.append(value) }
    for value in [1, 2, 2, 3, 3, 1] { property.value = value }
    #expect(all.values == [1, 1, 2, 2, 3, 3, 1])
    #expect(distinct.values == [1, 2, 3, 1])
    subscription.cancel()
  }

  @Test func propertyWrapperReadsAndWritesTheValueAndProjectsAReadOnlyView() {
    final class ViewModel {
      @Property private(set) var title = "Minimalist"
      @Property(skipsDuplicates: false) var taps = 0
      func rename(_ title: String) { self.title = title }
    }
    let model = ViewModel()
    let owner = Owner()
    let titles = Recorder<String>()
    let taps = Recorder<Int>()
    // Outside the class, `title` can be read and `$title` observed, but neither written:
    // `ReadOnlyProperty` has no setter, and neither does a copy of it.
    let view: ReadOnlyProperty<String> = model.$title
    let copy = view
    copy.observe(with: owner) { _, title in titles.append(title) }
    model.$taps.observe(with: owner) { _, count in taps.append(count) }
    model.rename("Evented")
    model.rename("Evented")
    model.taps = 0
    #expect(model.title == "Evented")
    #expect(view.value == "Evented")
    #expect(titles.values == ["Minimalist", "Evented"])
    #expect(taps.values == [0, 0])
  }

  @Test func readOnlyViewFollowsItsPropertyAndKeepsItAlive() {
    var property: Property<Int>? = Property(1)
    let view = property!.readOnly
    let seen = Recorder<Int>()
    let subscription = view.observe { seen.append($0) }
    property!.value = 2
    property = nil
    #expect(view.value == 2)
    #expect(seen.values == [1, 2])
    #expect(view.observerCount == 1)
    subscription.cancel()
  }

  @Test func constantPropertyDeliversItsValueOnce() {
    let constant = ReadOnlyProperty(constant: "fixed")
    let seen = Recorder<String>()
    let changes = Recorder<Change<String>>()
    let a = constant.observe { seen.append($0) }
    let b = constant.observeChanges { changes.append($0) }
    #expect(constant.value == "fixed")
    #expect(seen.values == ["fixed"])
    #expect(changes.values.isEmpty)
    a.cancel()
    b.cancel()
  }

  @Test func observerCountCountsLiveSubscriptions() {
    let property = Property(0)
    var owner: Owner? = Owner()
    property.observe(with: owner!) { _, _ in }
    let handle = property.observeChanges { _ in }
    #expect(property.observerCount == 2)
    owner = nil
    #expect(property.observerCount == 1)
    handle.cancel()
    #expect(property.observerCount == 0)
  }

  @Test func nestedModifyOfTheSamePropertyStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = Property(0)
      property.modify { _ in property.modify { $0 += 1 } }
    }
    if let result {
      let message = String(decoding: result.standardErrorContent, as: UTF8.self)
      #expect(message.contains("used from inside its own locked section"))
    }
  }

  @Test func readingTheValueInsideModifyStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = Property(0)
      property.modify { $0 = property.value + 1 }
    }
    if let result {
      let message = String(decoding: result.standardErrorContent, as: UTF8.self)
      #expect(message.contains("used from inside its own locked section"))
    }
  }

  @Test func writingTheSamePropertyFromItsEqualityCheckStopsWithAMessage() async {
    await #expect(processExitsWith: .failure) {
      final class Loop: Equatable, Sendable {
        static let property = Property(Loop())
        static func == (lhs: Loop, rhs: Loop) -> Bool { property.observerCount == 0 }
      }
      Loop.property.value = Loop()
    }
  }

  @Test func inPlaceMutationThroughTheWrapperIsAtomicAndNotifiesOnce() {
    final class Model: @unchecked Sendable {
      // @unchecked Sendable: `_names` and `_count` are assigned once, in init;
      // Property is Sendable.
      @Property var names: [String] = []
      @Property var count = 0
    }
    let model = Model()
    let changes = Counter()
    let counts = Counter()
    let names = model.$names.observeChanges { change in
      if change.newValue.count == change.oldValue.count + 1 { changes.increment() }
    }
    let count = model.$count.observeChanges { change in
      if change.newValue == change.oldValue + 1 { counts.increment() }
    }
    #expect(
      onThreads(4) { thread in
        for index in 0..<1_000 {
          model.names.append("\(thread).\(index)")
          model.count += 1
        }
      })
    #expect(model.names.count == 4_000)
    #expect(Set(model.names).count == 4_000)
    #expect(model.count == 4_000)
    #expect(changes.value == 4_000)
    #expect(counts.value == 4_000)
    names.cancel()
    count.cancel()
  }

  @Test func inPlaceMutationThroughValueIsAtomicAndNotifiesOnce() {
    let property = Property(0)
    let list = Property<[Int]>([])
    let changes = Counter()
    let subscription = property.observeChanges { change in
      if change.newValue == change.oldValue + 1 { changes.increment() }
    }
    #expect(
      onThreads(4) { thread in
        for index in 0..<1_000 {
          property.value += 1
          list.value.append(thread * 1_000 + index)
        }
      })
    #expect(property.value == 4_000)
    #expect(changes.value == 4_000)
    #expect(list.value.count == 4_000)
    #expect(Set(list.value).count == 4_000)
    subscription.cancel()
  }

  @Test func inPlaceMutationThatLeavesAnEqualValueNotifiesNobody() {
    let property = Property([1, 2])
    let changes = Recorder<Change<[Int]>>()
    let subscription = property.observeChanges { changes.append($0) }
    property.value.append(3)
    property.value.removeLast()
    property.value.sort()
    #expect(
      changes.values == [
        Change(oldValue: [1, 2], newValue: [1, 2, 3]), Change(oldValue: [1, 2, 3], newValue: [1, 2]),
      ])
    subscription.cancel()
  }

  @Test func inPlaceMutationThatUsesTheSamePropertyStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = Property([0])
      mutate(&property.value) { $0.append(property.value.count) }
    }
    if let result {
      let message = String(decoding: result.standardErrorContent, as: UTF8.self)
      #expect(message.contains("used from inside its own locked section"))
    }
  }
}

private func mutate<Value>(_ value: inout Value, _ body: (inout Value) -> Void) {
  body(&value)
}
