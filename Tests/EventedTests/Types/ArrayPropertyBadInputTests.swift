// Bad input stops the program with a message naming the operation, the index and the
// count, before anything is committed. Each case runs in a child process.

import Testing

@testable import Evented

/// The standard error of an exit test, as text.
private func message(_ result: ExitTest.Result?) -> String {
  result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
}

@Suite struct ArrayPropertyBadInputTests {
  @Test func removeAtAnOutOfRangeIndexStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      property.remove(at: 5)
    }
    #expect(message(result).contains("Evented: ArrayProperty.remove(at: 5): index out of range (count 3)"))
  }

  @Test func removeFirstOfAnEmptyArrayStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty<Int>([])
      property.removeFirst()
    }
    #expect(
      message(result).contains("Evented: ArrayProperty.removeFirst(): can't remove from an empty array (count 0)"))
  }

  @Test func removeLastOfAnEmptyArrayStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty<Int>([])
      property.removeLast()
    }
    #expect(message(result).contains("Evented: ArrayProperty.removeLast(): can't remove from an empty array (count 0)"))
  }

  @Test func subscriptReadOutOfRangeStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      _ = property[3]
    }
    #expect(message(result).contains("Evented: ArrayProperty[3]: index out of range (count 3)"))
  }

  @Test func subscriptWriteOutOfRangeStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      property[-1] = 0
    }
    #expect(message(result).contains("Evented: ArrayProperty[-1] = …: index out of range (count 3)"))
  }

  @Test func insertBeyondTheEndStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      property.insert(4, at: 4)
    }
    #expect(message(result).contains("Evented: ArrayProperty.insert(_:at: 4): index out of range (count 3)"))
  }

  @Test func moveToAnOutOfRangeIndexStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      property.move(from: 0, to: 3)
    }
    #expect(message(result).contains("Evented: ArrayProperty.move(from: 0, to: 3): index out of range (count 3)"))
  }

  @Test func replaceSubrangeBeyondTheEndStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      property.replaceSubrange(2..<5, with: [9])
    }
    #expect(
      message(result).contains("Evented: ArrayProperty.replaceSubrange(2..<5, with:): range out of bounds (count 3)"))
  }

  @Test func badIndexInsideABatchStopsBeforeAnyPartOfTheBatchIsCommitted() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      let subscription = property.observeChanges { changeset in
        print("delivered \(changeset.array)")
      }
      property.batch { array in
        array.append(4)
        array.remove(at: 9)
      }
      subscription.cancel()
    }
    let text = message(result)
    #expect(
      text.contains(
        "Evented: ArrayProperty.batch: remove(at: 9): index out of range (count 4); nothing of the batch was committed"
      ))
    #expect(!text.contains("delivered"))
  }

  @Test func usingThePropertyInsideItsOwnBatchStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1])
      property.batch { $0.append(property.count) }
    }
    #expect(message(result).contains("used from inside its own locked section"))
  }

  @Test func aRangeSubscriptOutOfBoundsInsideABatchStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      property.batch { array in
        array.append(4)
        _ = array[2..<9]
      }
    }
    #expect(
      message(result).contains(
        "Evented: ArrayProperty.batch: [2..<9]: range out of bounds (count 4); nothing of the batch was committed"))
  }

  @Test func aSliceBeyondTheEndInsideABatchStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let property = ArrayProperty([1, 2, 3])
      property.batch { array in _ = array[1...3] }
    }
    #expect(message(result).contains("Evented: ArrayProperty.batch: [1..<4]: range out of bounds (count 3)"))
  }

  @Test func applyingAChangesetToAnArrayItDoesNotFitStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let changeset = ArrayChangeset(changes: [.remove(index: 0, element: 1)], array: [2, 3])
      _ = changeset.applied(to: [1, 2, 3, 4, 5])
    }
    #expect(
      message(result).contains("Evented: ArrayChangeset.applied(to:): the changeset fits an array of 3 elements, not 5")
    )
  }
}
