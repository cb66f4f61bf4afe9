// Scenario "transactions": every worker runs transactions on the same sources (two
// properties written together, a property and an array that keep a ledger, a counter,
// an event source, two flags), some nested, some throwing, against plain `modify` calls
// and readers on other threads.
//
// Invariants:
// - no partial state: `a` and `b` are only ever written together, so every read and
//   every delivered state of `a.combineLatest(b)` has them equal, and `b` read after
//   `a` (written first) is never behind it; `total` is always the sum of `ledger`,
//   through a derived value read and observed;
// - nothing of a thrown transaction (or a thrown nested one) is ever seen: its writes
//   carry a poison value (negative), which no read, observer or event may show;
// - no lost update: `counter`, incremented inside transactions and by `modify` outside
//   them, ends at the number of increments made by committed transactions and calls;
//   `a` ends at the number of committed transactions, and the events observer has
//   received one event per committed transaction;
// - no write skew against a plain writer: a transaction sets `x` only when it reads
//   `x + y == 0` (else it clears both), and a plain `modify` of `y` sets it only when
//   it reads `x + y == 0`; run one at a time they never leave both set, so no
//   transaction reads, and no observer of `x.combineLatest(y)` receives, `x + y > 1`;
// - convergence: at every checkpoint and at the end, each observer's last state is
//   the current one.

import Evented
import Synchronization

/// Thrown to roll a transaction back.
private struct RollBack: Error {}

let transactions = Scenario(
  name: "transactions",
  summary: "transactions on shared sources against modify and readers; none seen in part or after a throw, none lost",
  unavailable: nil
) { run in
  let a = Property(0)
  let b = Property(0)
  let pair = a.combineLatest(b)
  let total = Property(0)
  let ledger = ArrayProperty<Int>([])
  let balanced = ledger.readOnly.map { $0.reduce(0, +) }.combineLatest(total)
  let counter = Property(0)
  let events = EventSource<Int>()
  let x = Property(0)
  let y = Property(0)

  let increments = Atomic<Int>(0)  // of `counter`, committed
  let committed = Atomic<Int>(0)  // transactions that wrote `a` and `b` and sent an event
  let received = Atomic<Int>(0)
  let lastPair = Atomic<Int>(-1)
  let lastBalance = Atomic<Int>(-1)

  let pairWatch = pair.observe { value in
    if value.0 != value.1 || value.0 < 0 {
      run.violation("delivered \(value) from a.combineLatest(b): part of a transaction")
    }
    if value.0 < lastPair.load(ordering: .relaxed) {
      run.violation("delivered \(value) after \(lastPair.load(ordering: .relaxed))")
    }
    lastPair.store(value.0, ordering: .releasing)
  }
  let balanceWatch = balanced.observe { value in
    if value.0 != value.1 || value.1 < 0 {
      run.violation("delivered ledger sum and total \(value): part of a transaction")
    }
    lastBalance.store(value.1, ordering: .releasing)
  }
  let ledgerWatch = ledger.observeChanges { changeset in
    if changeset.array.contains(where: { $0 < 0 }) {
      run.violation("a rolled-back append was delivered: \(changeset.array)")
    }
  }
  let skewWatch = x.combineLatest(y).observe { value in
    if value.0 + value.1 > 1 { run.violation("delivered x, y = \(value): write skew against a plain writer") }
  }
  let eventWatch = events.observe { event in
    if event < 0 { run.violation("an event sent by a rolled-back transaction was delivered") }
    received.add(1, ordering: .relaxed)
  }

  func converge(_ when: String) {
    let (current, balance) = (a.value, total.value)
    let converged = run.eventually(within: 10) {
      lastPair.load(ordering: .acquiring) == current && lastBalance.load(ordering: .acquiring) == balance
    }
    if !converged {
      run.violation(
        "\(when): observers last saw \(lastPair.load(ordering: .acquiring)) and \(lastBalance.load(ordering: .acquiring)), "
          + "values are \(current) and \(balance)")
    }
  }

  run.work(workers: run.threads, round: 500_000_000, checkpoint: { converge("at a checkpoint") }) { worker in
    while worker.proceed() {
      let roll = worker.thread.random.below(100)
      if roll < 30 {
        worker.at(.write)
        let amount = 1 + worker.thread.random.below(5)
        transaction {
          a.value += 1
          if a.value != b.value + 1 { run.violation("the transaction's thread read \(a.value), \(b.value) back") }
          b.value += 1
          if ledger.count >= 8 { ledger.value = [ledger.value.reduce(0, +)] }  // keeps the sum
          ledger.append(amount)
          total.value += amount
          counter.value += 1
          events.send(1)
          if pair.value.0 != pair.value.1 { run.violation("the transaction's thread read \(pair.value) back") }
        }
        increments.add(1, ordering: .relaxed)
        committed.add(1, ordering: .relaxed)
      } else if roll < 40 {
        worker.at(.write)
        transaction {
          a.value += 1
          do {
            try transaction { () throws(RollBack) in
              a.value = -1
              ledger.append(-1)
              total.value -= 1
              counter.modify { $0 -= 1_000_000 }
              events.send(-1)
              throw RollBack()
            }
          } catch {}
          if a.value < 0 { run.violation("a nested rollback left \(a.value) to its enclosing transaction") }
          b.value += 1
          counter.modify { $0 += 1 }
          events.send(2)
        }
        increments.add(1, ordering: .relaxed)
        committed.add(1, ordering: .relaxed)
      } else if roll < 50 {
        worker.at(.write)
        do {
          try transaction { () throws(RollBack) in
            a.value = -1
            ledger.append(-1)
            ledger[0] = -1  // never empty here: just appended
            total.value = -1
            counter.value -= 1_000_000
            events.send(-1)
            throw RollBack()
          }
        } catch {}
        if a.value < 0 || total.value < 0 { run.violation("a rolled-back write is still visible") }
      } else if roll < 70 {
        worker.at(.modify)
        counter.modify { $0 += 1 }
        increments.add(1, ordering: .relaxed)
      } else if roll < 77 {
        worker.at(.write)
        transaction {
          let (first, second) = (x.value, y.value)
          if first + second > 1 { run.violation("read x = \(first), y = \(second): write skew against a plain writer") }
          if first + second == 0 {
            x.value = 1
          } else {
            x.value = 0
            y.value = 0
          }
        }
      } else if roll < 84 {
        worker.at(.modify)
        // Reads `x` under the lock of `y`: the plain writer's side of the write skew.
        y.modify { value in
          if x.value + value == 0 { value = 1 }
        }
      } else {
        worker.at(.read)
        let first = a.value
        let second = b.value
        if second < first || first < 0 { run.violation("read a = \(first), then b = \(second): part of a transaction") }
        let whole = pair.value
        if whole.0 != whole.1 || whole.0 < 0 {
          run.violation("read \(whole) from a.combineLatest(b): part of a transaction")
        }
        let balance = balanced.value
        if balance.0 != balance.1 { run.violation("read ledger sum and total \(balance): part of a transaction") }
        if counter.value < 0 { run.violation("read the counter of a rolled-back transaction") }
      }
    }
  }

  converge("at the end")
  let expected = increments.load(ordering: .relaxed)
  if counter.value != expected {
    run.violation("the counter is \(counter.value) after \(expected) increments: lost updates")
  }
  let transactionCount = committed.load(ordering: .relaxed)
  if a.value != transactionCount || b.value != transactionCount {
    run.violation("a and b are \(a.value) and \(b.value) after \(transactionCount) committed transactions")
  }
  if !run.eventually(within: 10, { received.load(ordering: .relaxed) == transactionCount }) {
    run.violation(
      "\(received.load(ordering: .relaxed)) events received from \(transactionCount) committed transactions")
  }
  if x.value + y.value > 1 { run.violation("x and y are \(x.value) and \(y.value) at the end: write skew") }
  for subscription in [pairWatch, balanceWatch, ledgerWatch, eventWatch, skewWatch] { subscription.cancel() }
}
