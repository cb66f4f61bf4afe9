import Testing

@testable import Evented

private final class Values<Item: Sendable>: Sendable {
  private let items = Monitor<[Item]>([])
  func append(_ item: Item) { items.withLock { $0.append(item) } }
  var all: [Item] { items.current }
}

private final class Scoreboard: Sendable {}

@Suite struct ActorPropertyObserveOnceTests {
  @Test func observeOnceDeliversOnlyTheNextNewValue() async {
    let score = ActorProperty(0)
    let seen = Values<Int>()
    let screen = Scoreboard()
    let withOwner = await score.observeOnce(with: screen) { _, value in seen.append(value) }
    let withoutOwner = await score.observeOnce { value in seen.append(value * 10) }
    #expect(await score.observerCount == 2)
    await score.setValue(1)
    await score.setValue(2)
    #expect(await settles { seen.all.count == 2 })
    #expect(Set(seen.all) == [1, 10])
    #expect(await score.observerCount == 0)
    #expect(!withOwner.isActive)
    #expect(!withoutOwner.isActive)
  }

  @Test func observeOnceIsOnceEvenWhenItsHandlerWritesAgain() async {
    let score = ActorProperty(0)
    let seen = Values<Int>()
    let screen = Scoreboard()
    await score.observeOnce(with: screen) { _, value in
      seen.append(value)
      await score.setValue(value + 100)
    }
    for value in 1...5 { await score.setValue(value) }
    #expect(await settles { seen.all.count == 1 })
    await score.setValue(6)
    // A once-subscription ends before its handler runs, and the handler has run.
    #expect(await score.observerCount == 0)
    #expect(seen.all == [1])
  }

  @Test func observeOnceMayRunOnTheMainActor() async {
    let score = ActorProperty("a")
    let seen = Values<String>()
    let kept = await score.readOnly.observeOnce { @MainActor value in
      MainActor.assertIsolated()
      seen.append(value)
    }
    await score.setValue("b")
    #expect(await settles { seen.all == ["b"] })
    withExtendedLifetime(kept) {}
  }

  @Test func observeOnceThroughAReadOnlyViewEndsWithItsOwner() async {
    let score = ActorProperty(0)
    let seen = Values<Int>()
    var screen: Scoreboard? = Scoreboard()
    await score.readOnly.observeOnce(with: screen!) { _, value in seen.append(value) }
    screen = nil
    await score.setValue(1)
    #expect(await score.observerCount == 0, "the count leaves out a subscription whose owner is gone")
    #expect(seen.all.isEmpty)
  }
}
