// The overload bound (Guarantees.md, "Overload"): where a committing thread waits for
// room in a full backlog or queue subscription, and where it waits to take the
// delivering role over from a deliverer past its turn (the hand-off: DeliveryQueue.swift).
// A thread waits only where it may: outside every handler and delivery, or at a
// boundary of its outermost delivery frame for what a handler of it went without.

extension Hub {
  /// Waits, unless this thread is delivering for a source or running a handler: first,
  /// without the lock, until no queue subscription it may wait for is full; then, in
  /// arrival order, until the backlog has room.
  @inlinable @inline(never)
  func waitForRoom(_ token: consuming Token) -> Token {
    // Also waits, first and after any wait that released the lock, while an open
    // transaction of another thread holds the source (Transaction.swift): even a thread
    // that delivers waits for that, as the transaction never waits for it.
    while true {
      if token.state.pointee.core.unsafelyUnwrapped.pointee.transaction != nil { token = waitForTransaction(token) }
      let core = token.state.pointee.core.unsafelyUnwrapped
      guard !DeliveringThread.isDelivering, core.pointee.queue.mayHaveToWait || core.pointee.pressure?.isFull == true
      else { return token }
      if let pressure = core.pointee.pressure, pressure.isFull {
        // A queue's handler may need this lock to return (to read the value), so the wait
        // for the queue is made without it.
        token.unlock()
        pressure.waitForRoom()
        token = storage.lock()
      }
      token = waitInLine(token)
      if token.state.pointee.core.unsafelyUnwrapped.pointee.transaction == nil { return token }
    }
  }

  /// Waits, in arrival order, until the backlog has room.
  @inlinable
  func waitInLine(_ token: consuming Token) -> Token {
    let (room, ticket) = token.state.pointee.queue.enterRoom()
    while !token.state.pointee.queue.hasRoom(for: ticket, in: room) {
      room.asleep += 1
      token.wait(room)
    }
    if token.state.pointee.queue.leaveRoom(room) { room.broadcast() }
    return token
  }

  /// Waits for the room that a ``forward(_:)`` of this thread went without, after taking
  /// the delivering role over if the deliverer is past its turn: called at a boundary of
  /// the thread's outermost delivery frame, where it holds no delivering role but that
  /// frame's own. Waits for the source's queue subscriptions only on a
  /// thread that runs no dispatch queue's block (two blocks waiting for each other's
  /// queues would wait forever).
  @usableFromInline func waitForOwedRoom() {
    var token = storage.lock()
    if let ticket = token.state.pointee.core?.pointee.queue.claimTurn() {
      // Another thread has delivered past its turn: take the role over (no hostage).
      waitForTurn(token, ticket)
      token = storage.lock()
    }
    if QueuePressure.currentQueue == 0, let pressure = token.state.pointee.core?.pointee.pressure, pressure.isFull {
      token.unlock()
      pressure.waitForRoom()
      token = storage.lock()
    }
    if token.state.pointee.queue.mayHaveToWait {
      token = waitInLine(token)
      // The deliverer's turn may have passed meanwhile.
      if let ticket = token.state.pointee.queue.claimTurn() { return waitForTurn(token, ticket) }
    }
    token.unlock()
  }

  /// Waits until the deliverer hands the role over (then delivers the queue) or the
  /// delivery with `ticket` has been taken by a deliverer.
  @inlinable @inline(never)
  func waitForTurn(_ token: consuming Token, _ ticket: UInt) {
    let thread = DeliveringThread.current
    while true {
      switch token.state.pointee.queue.heirStep(ticket, newestFirst: Self.plantedNewestFirst) {
      case .takeOver(let first, let wake):
        wake?.broadcast()
        let core = token.state.pointee.core.unsafelyUnwrapped
        token.unlock()
        guard let first else { return }
        drain(first, core: core, thread: thread)
        return
      case .leave:
        token.unlock()
        return
      case .wait(let room):
        token.wait(room)
      }
    }
  }
}

extension HubStorage: OwedRoom {
  @usableFromInline func waitForOwedRoom() {
    Hub(storage: self).waitForOwedRoom()
  }
}
