import Testing

@testable import Evented

/// `flatMapLatest` takes closures of several statements without annotations, as
/// `Array.flatMap` does.
@Suite struct FlatMapLatestClosureTests {
  @Test func flatMapLatestAcceptsAMultiStatementClosureWithoutAnnotations() {
    let targets = [Property(10), Property(20)]
    let selector = Property(0)
    let followed = selector.flatMapLatest { index in
      let target = targets[index]
      return target
    }
    #expect(followed.value == 10)
    selector.value = 1
    #expect(followed.value == 20)
  }

  @Test func flatMapLatestAcceptsAMultiStatementClosureThatMayReturnNoTarget() {
    let targets = [Property(10), Property(20)]
    let selector = Property(-1)
    let followed = selector.flatMapLatest { index in
      guard targets.indices.contains(index) else { return nil as Property<Int>? }
      return targets[index]
    }
    #expect(followed.value == nil)
    selector.value = 1
    #expect(followed.value == 20)
  }
}
