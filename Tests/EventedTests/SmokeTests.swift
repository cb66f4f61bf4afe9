import Testing
import Synchronization
@testable import Evented

final class Box: Sendable {}

@MainActor final class Screen {
  var shown: [Int] = []
  func show(_ v: Int) { shown.append(v) }
}

@Test func smoke() async {
  let source = EventSource<Int>()
  let seen = Mutex<[Int]>([])
  var owner: Box? = Box()
  source.observe(with: owner!) { _, e in seen.withLock { $0.append(e) } }
  source.send(1)
  owner = nil
  source.send(2)
  #expect(seen.withLock { $0 } == [1])
  #expect(source.observerCount == 0)

  let p = Property(1)
  let values = Mutex<[Int]>([])
  let t = p.observe { v in values.withLock { $0.append(v) } }
  p.value = 1
  p.value = 2
  p.modify { $0 += 1 }
  #expect(values.withLock { $0 } == [1, 2, 3])
  t.cancel()
  p.value = 5
  #expect(values.withLock { $0 } == [1, 2, 3])

  // reentrancy
  let order = Mutex<[String]>([])
  let a = source.observe { e in
    order.withLock { $0.append("a\(e)") }
    if e == 1 { source.send(2) }
  }
  let b = source.observe { e in order.withLock { $0.append("b\(e)") } }
  source.send(1)
  #expect(order.withLock { $0 } == ["a1", "b1", "a2", "b2"])
  _ = (a, b)

  let screen = await Screen()
  await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
    let cont = Mutex<CheckedContinuation<Void, Never>?>(c)
    source.observe(with: screen, on: .main) { screen, e in
      screen.show(e)
      if e == 7 { cont.withLock { $0.take()?.resume() } }
    }
    source.send(7)
  }
  #expect(await screen.shown == [7])
}
