// The actor variants' backlog under the two senders that once went past its bound:
// `evented-bench --actor-backlog cancelled|spawned` sends to an `ActorEventSource` for
// 3 s, against one handler that spins for 200 µs per event, and prints the events sent
// (sends that returned true) and not yet handled, and the growth of the process.
//
// - cancelled: a task cancelled before it starts sends in a loop;
// - spawned: the handler starts a task that sends in a loop, and returns at once.
//
// The time is kept on the main thread, outside the cooperative pool that the sender and
// the handler may keep busy.

import Evented
import Foundation
import Synchronization

private final class BacklogCounts: Sendable {
  let sent = Atomic<Int>(0)
  let handled = Atomic<Int>(0)
  let stop = Atomic<Bool>(false)
}

/// Sends until told to stop, counting the sends that were not refused.
private func sendUntilStopped(_ source: ActorEventSource<Int>, _ counts: BacklogCounts) async {
  var event = 0
  while !counts.stop.load(ordering: .relaxed) {
    event += 1
    if await source.send(event) { counts.sent.add(1, ordering: .relaxed) }
  }
}

func actorBacklogFigures(_ mode: String) -> Int32 {
  guard mode == "cancelled" || mode == "spawned" else { return 2 }
  let counts = BacklogCounts()
  let source = ActorEventSource<Int>()
  let subscription = Mutex<Subscription?>(nil)
  let start = residentBytes()
  Task.detached {
    let made = await source.observe { event in
      if event == -1 {
        Task { await sendUntilStopped(source, counts) }
        return
      }
      let end = ContinuousClock.now + .microseconds(200)
      while ContinuousClock.now < end {}
      counts.handled.add(1, ordering: .relaxed)
    }
    subscription.withLock { $0 = made }
    if mode == "spawned" {
      await source.send(-1)
    } else {
      let sender = Task { await sendUntilStopped(source, counts) }
      sender.cancel()
    }
  }
  Thread.sleep(forTimeInterval: 3)
  counts.stop.store(true, ordering: .relaxed)
  let sent = counts.sent.load(ordering: .relaxed)
  let undelivered = sent - counts.handled.load(ordering: .relaxed)
  print("\(mode): \(sent) sent, \(undelivered) undelivered, resident +\((residentBytes() - start) >> 20) MB")
  return 0
}
