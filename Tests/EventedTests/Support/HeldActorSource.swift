// Actor event sources held full, for the tests of senders that wait for room.

import Testing

@testable import Evented

extension ActorEventSource {
  /// Where its senders wait for room; made by the first handler subscription.
  var senders: ActorBacklog { sinks.backlog! }
}

extension ActorBacklog {
  /// How many senders wait (for room or for their turn). Read without the actor, so
  /// that reading it never holds the actor when a sender arrives.
  var waiting: Int { waiterCount.load(ordering: .relaxed) }
}

/// A source with a backlog limit of `limit` whose one handler holds event 0 until
/// `gate` opens, and whose queue holds events 1 through `limit`: the next send from
/// outside a handler waits.
func heldActorSource(limit: Int) async -> (ActorEventSource<Int>, AsyncGate, Recorder<Int>, Subscription) {
  let source = ActorEventSource<Int>(backlogLimit: limit)
  let gate = AsyncGate()
  let holding = Flag()
  let received = Recorder<Int>()
  let subscription = await source.observe { event in
    if event == 0 {
      holding.set()
      await gate.wait()
    }
    received.append(event)
  }
  await source.send(0)
  #expect(await settles { holding.isSet })
  for event in 1...limit { await source.send(event) }
  return (source, gate, received, subscription)
}
