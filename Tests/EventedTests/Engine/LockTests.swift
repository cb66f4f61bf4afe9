// The lock under Thread Sanitizer, and a planted race that proves TSan is watching.
//
// `plantedRaceIsReportedByThreadSanitizer` is off unless EVENTED_PLANTED_RACE=1 is set.
// Then two real threads write a plain variable with no lock, and a TSan build must
// report it:
//
//   EVENTED_PLANTED_RACE=1 swift test --sanitize=thread --filter plantedRace
//
// must print "WARNING: ThreadSanitizer: data race" (or "Swift access race") and exit
// non-zero. `theSameAccessesThroughLockAreRaceFree` makes the same accesses through
// `Lock` from four threads, always runs, and must stay clean: together they show that
// TSan sees the lock's happens-before edges and would see a missing one.

import Foundation
import Testing

@testable import Evented

/// A plain variable shared without synchronization, on purpose.
private final class Unguarded: @unchecked Sendable {
  // @unchecked Sendable: deliberately racy, for the planted race only.
  var value = 0
}

@Suite struct LockTests {
  @Test(.enabled(if: ProcessInfo.processInfo.environment["EVENTED_PLANTED_RACE"] == "1"))
  func plantedRaceIsReportedByThreadSanitizer() {
    let shared = Unguarded()
    #expect(
      onThreads(2) { _ in
        for _ in 0..<10_000 { shared.value += 1 }
      })
    #expect(shared.value > 0)
  }

  @Test func theSameAccessesThroughLockAreRaceFree() {
    let lock = Lock.make(0)
    #expect(
      onThreads { _ in
        for _ in 0..<10_000 { lock.withLock { $0 += 1 } }
      })
    #expect(lock.withLock { $0 } == contentionThreads * 10_000)
  }

  @Test func lockReturnsWhatItsBodyReturnsAndRethrows() {
    struct Failure: Error {}
    let lock = Lock.make([1, 2])
    #expect(lock.withLock { $0.count } == 2)
    #expect(throws: Failure.self) {
      try lock.withLock { (state: inout [Int]) throws(Failure) in
        state.append(3)
        throw Failure()
      }
    }
    #expect(lock.withLock { $0 } == [1, 2, 3])
  }

  @Test func lockingTwiceOnOneThreadStopsWithAMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let lock = Lock.make(0)
      lock.withLock { _ in lock.withLock { $0 += 1 } }
    }
    if let result {
      let message = String(decoding: result.standardErrorContent, as: UTF8.self)
      #expect(message.contains("would deadlock"))
    }
  }
}
