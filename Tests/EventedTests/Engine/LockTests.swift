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
//
// The contention tests put more threads on one lock than the machine has cores, with
// holders that give up the processor under the lock, so that waiters park: every
// increment must count, and every parked thread must be woken by the unlocks of its
// own lock (a lost wake-up shows as a thread that never returns).

import Foundation
import Synchronization
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

  @Test func contendedLockLosesNoIncrementWithMoreThreadsThanCores() {
    let lock = Lock.make(0)
    let threads = 16
    let increments = 2_000
    #expect(
      onThreads(threads) { _ in
        for index in 0..<increments {
          lock.withLock { count in
            count += 1
            // Holding the lock across a yield now and then makes the others park.
            if index % 64 == 0 { yieldProcessor() }
          }
        }
      })
    #expect(lock.withLock { $0 } == threads * increments)
  }

  @Test func everyThreadParkedForALockIsWokenByItsUnlocks() {
    let lock = Lock.make(0)
    let threads = 8
    for round in 1...20 {
      let token = lock.storage.lock()
      let started = Atomic<Int>(0)
      let waiters = (0..<threads).map { _ in
        Spawned {
          started.add(1, ordering: .relaxed)
          lock.withLock { $0 += 1 }
        }
      }
      // Released once every waiter has started and at least one has marked the lock as
      // waited for; how many parked by then does not change what is checked.
      #expect(eventually { started.load(ordering: .relaxed) == threads && lock.isWaitedFor })
      token.unlock()
      #expect(waiters.allSatisfy { $0.join() })
      #expect(lock.withLock { $0 } == threads * round)
    }
  }

  @Test func threadsParkedForLocksSharingAParkingPlaceAreWokenByTheirOwnLock() {
    // More locks than the parking lot has places, so at least two share one.
    let locks = (0..<65).map { _ in Lock.make(0) }
    let release = Gate()
    let holding = Atomic<Int>(0)
    let holders = locks.map { lock in
      Spawned {
        lock.withLock { _ in
          holding.add(1, ordering: .relaxed)
          _ = release.wait()
        }
      }
    }
    #expect(eventually { holding.load(ordering: .relaxed) == locks.count })
    let waiters = locks.map { lock in Spawned { lock.withLock { $0 += 1 } } }
    #expect(eventually { locks.allSatisfy(\.isWaitedFor) })
    release.open()
    #expect(holders.allSatisfy { $0.join() })
    #expect(waiters.allSatisfy { $0.join() })
    #expect(locks.allSatisfy { lock in lock.withLock { $0 } == 1 })
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

extension Lock {
  /// Whether a thread has marked the lock as one it parks for.
  fileprivate var isWaitedFor: Bool {
    storage.withUnsafeMutablePointerToElements { $0.pointee.word.load(ordering: .relaxed) } & LockCell.waitersBit != 0
  }
}
