// A property's `values` with a buffering limit of 0: no backlog, but the value current
// when the consumer next asks, so the sequence starts on the value current when the
// consumer first asks and ends on `value` however fast the writes come.

import Testing

@testable import Evented

@Suite struct ValuesBufferingTests {
  static let zeroLimits: [BufferingPolicy] = [.bufferingNewest(0), .bufferingOldest(0)]

  @Test(arguments: ValuesBufferingTests.zeroLimits)
  func valuesWithALimitOfZeroStartOnTheCurrentValueAndEndOnValue(_ policy: BufferingPolicy) async {
    let property = Property(41)
    let last = await lastValue(of: property.values(bufferingPolicy: policy), first: 41, until: 2_000) {
      for value in 42...2_000 { property.value = value }
    }
    #expect(last == 2_000)
  }

  @Test(arguments: ValuesBufferingTests.zeroLimits)
  func arrayValuesWithALimitOfZeroEndOnValue(_ policy: BufferingPolicy) async {
    let array = ArrayProperty([0])
    let values = array.values(bufferingPolicy: policy)
    let last = await lastValue(of: values, first: [0], until: [500]) {
      for value in 1...500 { array.value = [value] }
    }
    #expect(last == [500])
  }

  @Test(arguments: ValuesBufferingTests.zeroLimits)
  func actorValuesWithALimitOfZeroEndOnValue(_ policy: BufferingPolicy) async {
    let property = ActorProperty(0)
    let values = await property.values(bufferingPolicy: policy)
    let last = await lastValue(of: values, first: 0, until: 500) {
      for value in 1...500 { await property.setValue(value) }
    }
    #expect(last == 500)
  }

  @Test func zeroIsTheSameAsKeepingTheNewestOne() {
    #expect(BufferingPolicy.bufferingNewest(0).forValues == .bufferingNewest(1))
    #expect(BufferingPolicy.bufferingOldest(0).forValues == .bufferingNewest(1))
    #expect(BufferingPolicy.bufferingOldest(3).forValues == .bufferingOldest(3))
    #expect(BufferingPolicy.unbounded.forValues == .unbounded)
  }
}

/// Iterates `values` on a task of its own: takes the first element before `write`
/// starts (it must be `first`, the value current when the consumer first asks), then
/// runs `write` and returns the element received when `final` arrives, or the last one
/// received if the sequence ends or stalls (no `final` within a minute).
private func lastValue<Element: Equatable & Sendable>(
  of values: AsyncValues<Element>, first: Element, until final: Element,
  write: @escaping @Sendable () async -> Void
) async -> Element? {
  let askedFirst = AsyncGate()
  let finished = Flag()
  let consumer = Task { () -> (Element?, Element?) in
    defer { finished.set() }
    var iterator = values.makeAsyncIterator()
    let head = await iterator.next()
    askedFirst.open()
    var last = head
    while last != final, let next = await iterator.next() { last = next }
    return (head, last)
  }
  await askedFirst.wait()
  await write()
  // A consumer that stalls is cancelled after a minute, and ends on what it received.
  if await !settles(timeout: .seconds(60), { finished.isSet }) { consumer.cancel() }
  let (head, last) = await consumer.value
  #expect(head == first)
  return last
}
