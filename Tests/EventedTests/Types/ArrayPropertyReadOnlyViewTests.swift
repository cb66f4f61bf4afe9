import Testing

@testable import Evented

@Suite struct ArrayPropertyReadOnlyViewTests {
  @Test func everyReadOfReadOnlyIsTheSameView() {
    let friends = ArrayProperty(["Ann"])
    let first = friends.readOnly
    let second = friends.readOnly
    #expect(first.derived != nil)
    #expect(first.derived === second.derived)
    #expect(first.hub.storage === second.hub.storage)
  }

  @Test func readingReadOnlyAgainAddsNoSubscriptionToTheArray() {
    let friends = ArrayProperty(["Ann"])
    for _ in 0..<5 { _ = friends.readOnly }
    #expect(friends.hub.liveCount == 0, "the view follows the array only while it is observed")
    #expect(friends.observerCount == 0)
  }

  @Test func aSubscriptionThroughOneReadIsSeenThroughAnother() {
    let friends = ArrayProperty(["Ann"])
    let seen = Recorder<[String]>()
    let subscription = friends.readOnly.observe { seen.append($0) }
    #expect(friends.readOnly.observerCount == 1)
    #expect(friends.observerCount == 1, "the view, while it is observed")
    friends.append("Bob")
    #expect(seen.values == [["Ann"], ["Ann", "Bob"]])
    #expect(friends.readOnly.value == ["Ann", "Bob"])
    subscription.cancel()
    #expect(friends.observerCount == 0)
  }

  @Test func derivedValuesOfTheViewFollowTheArray() {
    let friends = ArrayProperty(["Ann"])
    let title = friends.readOnly.map { "\($0.count) friends" }
    let seen = Recorder<String>()
    let subscription = title.observe { seen.append($0) }
    friends.append("Bob")
    #expect(seen.values == ["1 friends", "2 friends"])
    withExtendedLifetime(subscription) {}
  }

  @Test func theViewDoesNotKeepTheArrayObjectAlive() {
    let live = LiveCount()
    var friends: ArrayProperty<Tracked>? = ArrayProperty([Tracked(live)])
    let view = friends!.readOnly
    friends = nil
    #expect(view.value.count == 1)
    #expect(live.value == 1)
  }

  @Test func readsRacingForTheFirstViewAllGetTheSameOne() {
    let friends = ArrayProperty([1])
    let nodes = Recorder<ObjectIdentifier>()
    #expect(
      onThreads(4) { _ in
        if let node = friends.readOnly.derived { nodes.append(ObjectIdentifier(node)) }
      })
    #expect(Set(nodes.values).count == 1)
    #expect(nodes.count == 4)
    #expect(friends.hub.liveCount == 0)
  }
}
