// SCRATCH (review): delete after use.
import Foundation
import Synchronization
import Testing

@testable import Evented

@Suite struct ScratchReviewMemoTests {
  /// A thread inside a transaction reads `y.combineLatest(x)` after writing `x` and before
  /// writing `y`: the memo takes (y: i-1, x: i). Another thread that reads `y`'s version
  /// while the transaction is open (hidden: i-1) and `x`'s after it ends (i) finds it.
  @Test func aTransactionsPartialStateInTheMemoIsNotReadByAnotherThread() {
    let x = Property(0)
    let y = Property(0)
    let pair = y.combineLatest(x)  // roots [y, x]
    let stop = Atomic<Bool>(false)
    let writer = Spawned {
      var i = 0
      while !stop.load(ordering: .relaxed) {
        i += 1
        transaction {
          x.value = i
          let own = pair.value  // fills the memo with (y: i-1, x: i)
          precondition(own == (i - 1, i))
          y.value = i
        }
      }
    }
    var reads = 0
    var torn: (Int, Int)?
    let deadline = Date().addingTimeInterval(8)
    while torn == nil, Date() < deadline {
      for _ in 0..<1000 {
        let seen = pair.value
        reads += 1
        if seen.0 != seen.1 { torn = seen; break }
      }
    }
    stop.store(true, ordering: .relaxed)
    #expect(writer.join())
    #expect(torn == nil, "after \(reads) reads, another thread read \(String(describing: torn)): part of a transaction")
  }
}
