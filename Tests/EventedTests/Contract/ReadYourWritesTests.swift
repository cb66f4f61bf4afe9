// Promise 7: after `value = x` returns on a thread, that thread reads `x` or a later
// committed value; `modify { }` is atomic and notifies once with the old and new value.

import Testing

@testable import Evented

@Suite struct ReadYourWritesContract {
  /// Every thread writes values of its own and reads right after. A subscriber logs
  /// the commit order (promise 4), against which each read is checked: it must be the
  /// value written or one committed after it.
  @Test(arguments: PropertySubjectKind.allCases)
  func readYourWritesOnEveryThread(_ kind: PropertySubjectKind) {
    let subject = kind.make(-1)
    let committed = Recorder<Int>()
    let subscription = subject.observeChanges(on: .synchronous) { committed.append($0.newValue) }
    let pairs = Recorder<(written: Int, read: Int)>()
    let perThread = 300
    #expect(
      onThreads { index in
        for step in 0..<perThread {
          let written = index * 10_000 + step
          subject.value = written
          pairs.append((written, subject.value))
        }
      })
    let order = committed.values
    #expect(order.count == contentionThreads * perThread)
    var position: [Int: Int] = [:]
    for (index, value) in order.enumerated() { position[value] = index }
    let stale = pairs.values.filter { pair in
      guard let written = position[pair.written], let read = position[pair.read] else { return true }
      return read < written
    }
    #expect(stale.isEmpty)
    #expect(subject.value == order.last)
    subscription.cancel()
  }

  @Test(arguments: PropertySubjectKind.allCases)
  func readYourWritesModifyIsAtomicAndNotifiesOnce(_ kind: PropertySubjectKind) {
    let subject = kind.make(0)
    let changes = Recorder<Change<Int>>()
    let subscription = subject.observeChanges(on: .synchronous) { changes.append($0) }
    let perThread = 500
    #expect(
      onThreads { _ in
        for _ in 0..<perThread {
          let before = subject.modify { value -> Int in
            defer { value += 1 }
            return value
          }
          precondition(before >= 0)
        }
      })
    let total = contentionThreads * perThread
    #expect(subject.value == total)
    let seen = changes.values
    #expect(seen.count == total)
    #expect(seen.allSatisfy { $0.newValue == $0.oldValue + 1 })
    #expect(seen.map(\.newValue) == Array(1...total))
    subscription.cancel()
  }

  @Test func readYourWritesOnOneThreadIsImmediate() {
    let property = Property("")
    for word in ["a", "b", "c"] {
      property.value = word
      #expect(property.value == word)
      #expect(property.readOnly.value == word)
    }
    let result = property.modify { value -> Int in
      value += "!"
      return value.count
    }
    #expect(result == 2)
    #expect(property.value == "c!")
  }

  // MARK: - Actor variants

  @Test(arguments: ActorPropertySubjectKind.allCases)
  func readYourWritesActorPropertyReadsTheWrittenValueAndModifyNotifiesOnce(_ kind: ActorPropertySubjectKind) async {
    let property = kind.make(1)
    let changes = Recorder<Change<Int>>()
    let subscription = await property.observeChanges { change in changes.append(change) }
    await property.setValue(5)
    #expect(await property.value == 5)
    let doubled = await property.modify { value -> Int in
      value *= 2
      return value
    }
    #expect(doubled == 10)
    #expect(await property.value == 10)
    // The handler may have been behind: the two changes then arrive merged into one.
    #expect(await settles { changes.values.last?.newValue == 10 })
    let received = changes.values
    #expect(
      received == [Change(oldValue: 1, newValue: 5), Change(oldValue: 5, newValue: 10)]
        || received == [Change(oldValue: 1, newValue: 10)])
    struct Refused: Error {}
    await #expect(throws: Refused.self) {
      try await property.modify { (value: inout Int) throws(Refused) in
        value = 99
        throw Refused()
      }
    }
    #expect(await property.value == 10, "a throwing modify leaves the value as it was")
    subscription.cancel()
  }
}
