// The behaviours of the four libraries Evented descends from, as their documents show
// them, written with Evented's names. Collection properties belong to ArrayProperty and
// are not covered here.

import Evented
import Testing

@Suite struct SeedBehaviourTests {
  // MARK: HIPEventedProperty

  @Test func eventSourceFiresIffTheSubscribedObjectIsAlive() {
    let source = EventSource<Void>()
    let fired = Counter()
    var object: Owner? = Owner()
    source.observe(with: object!) { _, _ in fired.increment() }
    source.send()  // "Event fired"
    object = nil
    source.send()  // nothing happens
    #expect(fired.value == 1)
  }

  @Test func viewControllerSubscribesWithSelfWithoutAReferenceCycle() {
    final class TapViewController: @unchecked Sendable {
      // @unchecked Sendable: used on one thread only.
      let taps = EventSource<Void>()
      var label = "Tap"

      init() {
        taps.observe(with: self) { controller, _ in controller.label += " tap" }
      }
    }
    var controller: TapViewController? = TapViewController()
    weak let watcher = controller
    controller!.taps.send()
    controller!.taps.send()
    #expect(controller!.label == "Tap tap tap")
    controller = nil
    #expect(watcher == nil)
  }

  @Test func equatablePropertySkipsTheSameValue() {
    let numTaps = Property(0)
    let printed = Recorder<String>()
    let unsubscribe = numTaps.observeChanges { printed.append("Tap number: \($0.newValue)") }
    numTaps.modify { $0 += 1 }  // prints "Tap number: 1"
    numTaps.modify { $0 += 1 }  // prints "Tap number: 2"
    numTaps.value = 2  // does nothing; value is the same
    unsubscribe.cancel()
    numTaps.modify { $0 += 1 }  // does nothing; callback was removed
    #expect(printed.values == ["Tap number: 1", "Tap number: 2"])
  }

  @Test func optionalEquatablePropertySkipsTheSameValue() {
    let rating = Property<Int?>(nil)
    let printed = Recorder<String>()
    let subscription = rating.observeChanges { change in
      printed.append(change.newValue.map { "Has rating: \($0)" } ?? "Has no rating")
    }
    rating.value = nil  // does nothing; value was already nil
    rating.value = 1  // prints "Has rating: 1"
    rating.value = 1  // does nothing; value was already 1
    #expect(printed.values == ["Has rating: 1"])
    subscription.cancel()
  }

  @Test func basicPropertyRunsTheHandlerForEveryWrite() {
    final class Image: Sendable {}
    let asyncImage = Property<Image?>(nil)
    let set = Counter()
    let subscription = asyncImage.observeChanges { _ in set.increment() }
    let myImage = Image()
    asyncImage.value = myImage
    asyncImage.value = myImage  // runs the handler again; no equality check
    #expect(set.value == 2)
    subscription.cancel()
  }

  // MARK: Minimalist

  @Test func propertyWrapperIsObservedThroughItsProjection() {
    final class ViewModel {
      @Property var items: [String] = []
    }
    let viewModel = ViewModel()
    let screen = Owner()
    let shown = Recorder<[String]>()
    viewModel.$items.observe(with: screen) { _, items in shown.append(items) }
    viewModel.items = ["a"]
    viewModel.items.append("b")
    #expect(viewModel.items == ["a", "b"])
    #expect(shown.values == [[], ["a"], ["a", "b"]])
  }

  @Test func accessControlLetsOutsideCodeObserveButNotWrite() {
    final class ViewModel {
      @Property private(set) var value = "Minimalist"
      private let signalSource = EventSource<Void>()
      var signal: ReadOnlyEventSource<Void> { signalSource.readOnly }

      func update() {
        value = "abc"
        signalSource.send()
      }
    }
    let viewModel = ViewModel()
    let observer = Owner()
    let log = Recorder<String>()
    // `viewModel.value = …`, `viewModel.$value.value = …` and `viewModel.signal.send()`
    // do not compile: the setter is private and the views have no writers.
    viewModel.$value.observe(with: observer) { _, value in log.append(value) }
    viewModel.signal.observe(with: observer) { _, _ in log.append("signal") }
    viewModel.update()
    #expect(viewModel.value == "abc")
    #expect(log.values == ["Minimalist", "abc", "signal"])
  }

  @Test func keyPathScopesAndFiltersStateUpdates() {
    struct LoginScreen: Equatable, Sendable { var userName = "" }
    struct Screens: Equatable, Sendable {
      var loginScreen = LoginScreen()
      var badge = 0
    }
    struct AppState: Equatable, Sendable { var screens = Screens() }
    let appState = Property(AppState())
    let observer = Owner()
    let updates = Recorder<LoginScreen>()
    appState.observe(\.screens.loginScreen, with: observer) { _, state in updates.append(state) }
    appState.modify { $0.screens.badge = 3 }
    appState.modify { $0.screens.loginScreen.userName = "ada" }
    appState.modify { $0.screens.badge = 4 }
    #expect(updates.values == [LoginScreen(), LoginScreen(userName: "ada")])
  }

  @Test func keyPathSelfDiscardsTheSameValuesOfAPrimitive() {
    let count = Property(0, skipsDuplicates: false)
    let observer = Owner()
    let updates = Recorder<Int>()
    count.observe(\.self, with: observer) { _, value in updates.append(value) }
    for value in [0, 0, 1, 1, 0] { count.value = value }
    #expect(updates.values == [0, 1, 0])
  }

  // MARK: Observable-Swift

  @Test func afterChangeDeliversOldAndNewValues() {
    let x = Property(0)
    let printed = Recorder<String>()
    let subscription = x.observeChanges { printed.append("Changed x from \($0.oldValue) to \($0.newValue)") }
    x.value = 42
    #expect(printed.values == ["Changed x from 0 to 42"])
    subscription.cancel()
  }

  @Test func mutationsOfAValueTypeAreObserved() {
    struct Person: Equatable, Sendable {
      let first: String
      var last: String
      var full: String { "\(first) \(last)" }
    }
    let ramsay = Property(Person(first: "Ramsay", last: "Snow"))
    let printed = Recorder<String>()
    let subscription = ramsay.observeChanges { printed.append("\($0.oldValue.full) is now \($0.newValue.full)") }
    ramsay.modify { $0.last = "Bolton" }
    #expect(printed.values == ["Ramsay Snow is now Ramsay Bolton"])
    subscription.cancel()
  }

  @Test func invalidatedSubscriptionIsNotCalledAgain() {
    let x = Property(0)
    let changed = Counter()
    let subscription = x.observeChanges { _ in changed.increment() }
    x.value = 1
    subscription.cancel()
    x.value = 2
    #expect(changed.value == 1)
  }

  @Test func subscriptionTiedToAnObjectEndsWithIt() {
    let x = Property(0)
    let printed = Recorder<String>()
    for _ in 0..<1 {
      let o = Owner()
      x.observeChanges(with: o) { _, change in printed.append("\(change.oldValue) -> \(change.newValue)") }
      x.value = 42  // handler called
    }
    x.value = -1  // handler not called
    #expect(printed.values == ["0 -> 42"])
  }

  @Test func eventNotifiesEveryObserver() {
    final class SomeClass: Sendable {
      let somethingChanged = EventSource<String>()
      func doSomething() { somethingChanged.send("Hello!") }
    }
    let object = SomeClass()
    let printed = Recorder<String>()
    let a = object.somethingChanged.observe { printed.append($0) }
    let b = object.somethingChanged.observe { printed.append($0.uppercased()) }
    object.doSomething()
    #expect(printed.values == ["Hello!", "HELLO!"])
    a.cancel()
    b.cancel()
  }

  // MARK: ReactiveCocoa properties

  @Test func mutablePropertyIsExposedAsAReadOnlyViewAndConstantsNeverChange() {
    final class ProfileViewModel: Sendable {
      private let avatarSource = Property("placeholder")
      var avatar: ReadOnlyProperty<String> { avatarSource.readOnly }
      let title = ReadOnlyProperty(constant: "Profile")
      func load() { avatarSource.value = "photo" }
    }
    let viewModel = ProfileViewModel()
    let view = Owner()
    let images = Recorder<String>()
    viewModel.avatar.observe(with: view) { _, image in images.append(image) }
    viewModel.load()
    #expect(images.values == ["placeholder", "photo"])
    #expect(viewModel.title.value == "Profile")
  }
}
