// W10: a writer to a `Property<Int>` observed on a queue whose handler takes 200 µs.
// `evented-bench --slow-queue [N]` writes N new values (100,000 by default) with no
// observer, then N more with the slow observer, and prints, for each, the writer's
// total time, its longest single write and how much the process grew meanwhile; then
// whether the targets are met: the observed writes take at most 1.5 × the writes with
// no observer, no write takes longer than 1 ms, and the memory stays flat (grows by
// less than 16 MB). Exits 1 if a target is missed.
//
// The writer runs on the main thread; the observer's queue runs on a thread of the
// dispatch pool meanwhile, and ends on the last value written.

import Dispatch
import Evented
import Foundation
import Synchronization

/// What one run of writes took.
private struct WriterFigures {
  var total: UInt64 = 0
  var longest: UInt64 = 0
  var growth = 0

  var text: String {
    "total \(String(format: "%.1f", Double(total) / 1e6)) ms, longest write "
      + "\(String(format: "%.1f", Double(longest) / 1e3)) µs, memory +\(growth >> 20) MB"
  }
}

/// Writes `count` new values to `property`, timing each write.
private func timedWrites(_ property: Property<Int>, from base: Int, count: Int) -> WriterFigures {
  var figures = WriterFigures()
  let startMemory = residentBytes()
  var peakMemory = startMemory
  let start = now(CLOCK_MONOTONIC)
  for index in 0..<count {
    let before = now(CLOCK_MONOTONIC)
    property.value = base + index
    let took = now(CLOCK_MONOTONIC) - before
    if took > figures.longest { figures.longest = took }
    if index & 4_095 == 0 { peakMemory = max(peakMemory, residentBytes()) }
  }
  figures.total = now(CLOCK_MONOTONIC) - start
  figures.growth = max(0, max(peakMemory, residentBytes()) - startMemory)
  return figures
}

func slowQueueFigures(count: Int) -> Int32 {
  let plain = Property(0)
  _ = timedWrites(plain, from: 1, count: min(count, 10_000))  // warm up
  let alone = timedWrites(plain, from: 1_000_000_000, count: count)

  let progress = Property(0)
  let last = Atomic<Int>(0)
  let calls = Atomic<Int>(0)
  let ui = DispatchQueue(label: "ui")
  let subscription = progress.observe(on: .queue(ui)) { value in
    let end = now(CLOCK_MONOTONIC) + 200_000
    while now(CLOCK_MONOTONIC) < end {}
    last.store(value, ordering: .releasing)
    calls.add(1, ordering: .relaxed)
  }
  let observed = timedWrites(progress, from: 1, count: count)
  let drainStart = now(CLOCK_MONOTONIC)
  while last.load(ordering: .acquiring) != count, now(CLOCK_MONOTONIC) - drainStart < 120_000_000_000 {
    usleep(1_000)
  }
  let drained = last.load(ordering: .acquiring) == count
  subscription.cancel()

  let ratio = Double(observed.total) / Double(alone.total)
  let ratioMet = ratio <= 1.5
  let longestMet = observed.longest <= 1_000_000
  let memoryMet = observed.growth < 16 << 20
  print("W10 \(count) writes to a Property<Int>:")
  print("  no observer:                          \(alone.text)")
  print("  observed on a queue, 200 µs handler:  \(observed.text)")
  print(
    "  the observer ran \(calls.load(ordering: .relaxed)) times and "
      + (drained ? "ended on the last value" : "did NOT end on the last value"))
  print("  total \(String(format: "%.2f", ratio)) × no observer, target ≤ 1.5: \(ratioMet ? "met" : "MISSED")")
  print("  longest write ≤ 1,000 µs: \(longestMet ? "met" : "MISSED")")
  print("  memory flat (< 16 MB): \(memoryMet ? "met" : "MISSED")")
  return ratioMet && longestMet && memoryMet && drained ? 0 : 1
}
