import Dispatch
import Testing

@testable import Evented

@Suite struct ArrayPropertyObserveOnceTests {
  @Test func observeOnceDeliversOnlyTheArrayAfterTheNextCommit() {
    let friends = ArrayProperty(["Ann"])
    let owner = Owner()
    let seen = Recorder<[String]>()
    let withOwner = friends.observeOnce(with: owner) { _, array in seen.append(array) }
    let withoutOwner = friends.observeOnce { seen.append($0.map { $0.uppercased() }) }
    #expect(seen.values.isEmpty)
    #expect(friends.observerCount == 2)
    friends.append("Bob")
    friends.append("Cy")
    #expect(seen.values == [["Ann", "Bob"], ["ANN", "BOB"]])
    #expect(!withOwner.isActive)
    #expect(!withoutOwner.isActive)
    #expect(friends.observerCount == 0)
  }

  @Test func observeOnceIsOnceEvenWhenItsHandlerMutatesAgain() {
    let numbers = ArrayProperty<Int>([])
    let owner = Owner()
    let seen = Recorder<[Int]>()
    numbers.observeOnce(with: owner) { _, array in
      seen.append(array)
      numbers.append(array.count + 1)
    }
    numbers.append(1)
    #expect(seen.values == [[1]])
    #expect(numbers.value == [1, 2])
  }

  @Test func observeOnceIsOnceUnderConcurrentCommits() {
    let numbers = ArrayProperty<Int>([])
    let owner = Owner()
    let calls = Recorder<[Int]>()
    numbers.observeOnce(with: owner) { _, array in calls.append(array) }
    #expect(
      onThreads(4) { thread in
        for i in 0..<50 { numbers.append(thread * 100 + i) }
      })
    #expect(calls.count == 1)
    #expect(calls.values.first?.count == 1)
  }

  @Test func observeOnceEndsWithoutACallWhenItsOwnerDeinitializes() {
    let numbers = ArrayProperty([1])
    let seen = Recorder<[Int]>()
    var owner: Owner? = Owner()
    numbers.observeOnce(with: owner!) { _, array in seen.append(array) }
    owner = nil
    numbers.append(2)
    #expect(seen.values.isEmpty)
    #expect(numbers.observerCount == 0)
  }

  @Test func observeOnceOnAQueueRunsOnThatQueue() {
    let queue = DispatchQueue(label: "once")
    let numbers = ArrayProperty([1])
    let seen = Recorder<[Int]>()
    let subscription = numbers.observeOnce(on: .queue(queue)) { array in
      dispatchPrecondition(condition: .onQueue(queue))
      seen.append(array)
    }
    numbers.append(2)
    numbers.append(3)
    #expect(seen.wait(forCount: 1))
    queue.sync {}
    #expect(seen.values == [[1, 2]])
    withExtendedLifetime(subscription) {}
  }

  @Test func observeOnceOnMainRunsOnTheMainActor() async {
    let numbers = ArrayProperty([1])
    let seen = Recorder<[Int]>()
    let owner = Owner()
    numbers.observeOnce(with: owner, on: .main) { @MainActor _, array in
      MainActor.assertIsolated()
      seen.append(array)
    }
    let kept = numbers.observeOnce(on: .main) { @MainActor array in seen.append(array.reversed()) }
    numbers.append(2)
    numbers.append(3)
    #expect(await settles { seen.count == 2 })
    await MainActor.run {}
    #expect(Set(seen.values) == [[1, 2], [2, 1]])
    withExtendedLifetime((owner, kept)) {}
  }
}
