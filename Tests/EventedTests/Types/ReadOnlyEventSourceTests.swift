import Testing

@testable import Evented

@Suite struct ReadOnlyEventSourceInitTests {
  @Test func initializerMakesTheSameViewAsReadOnly() {
    let source = EventSource<Int>()
    let view = ReadOnlyEventSource(source)
    #expect(view.hub.storage === source.readOnly.hub.storage)
    #expect(view.derived == nil)
  }

  @Test func aViewMadeWithTheInitializerObservesTheSource() {
    let source = EventSource<Int>()
    let view = ReadOnlyEventSource(source)
    let seen = Recorder<Int>()
    let subscription = view.observe { seen.append($0) }
    #expect(source.observerCount == 1)
    source.send(1)
    #expect(seen.values == [1])
    withExtendedLifetime(subscription) {}
  }
}

@Suite struct EventSourceViewLifetimeTests {
  @Test(arguments: ["readOnly", "ReadOnlyEventSource(_:)", "map", "filter", "compactMap", "merge"])
  func lifetimeAViewOrDerivedEventSourceKeepsTheEventSourceObjectAlive(_ kind: String) {
    var source: EventSource<Int>? = EventSource<Int>()
    weak let weakSource = source
    let kept: ReadOnlyEventSource<Int> =
      switch kind {
      case "readOnly": source!.readOnly
      case "ReadOnlyEventSource(_:)": ReadOnlyEventSource(source!)
      case "map": source!.map { $0 }
      case "filter": source!.filter { _ in true }
      case "compactMap": source!.compactMap { $0 }
      default: source!.merge(with: EventSource<Int>())
      }
    source = nil
    #expect(weakSource != nil)
    withExtendedLifetime(kept) {}
  }

  @Test func lifetimeABindingOwnedByTheSourceKeepsRunningWhileAViewIsKept() {
    let seen = Recorder<Int>()
    var source: EventSource<Int>? = EventSource<Int>()
    source!.observe(with: source!) { _, event in seen.append(event) }
    let view = source!.readOnly
    let mapped = view.map { $0 * 2 }
    let doubled = Recorder<Int>()
    let subscription = mapped.observe { doubled.append($0) }
    source = nil
    #expect(view.observerCount == 2)
    view.viewed?.send(3)
    #expect(seen.values == [3])
    #expect(doubled.values == [6])
    subscription.cancel()
  }
}
