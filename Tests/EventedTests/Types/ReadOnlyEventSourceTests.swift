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
