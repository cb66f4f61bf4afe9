// State coalesces (Guarantees.md, "Overload"): an observer of state (a property, an
// array, a derived value) on a queue holds at most one undelivered state, so a writer
// never waits for it, however slow its queue.
//
// Each such subscription's target has a `Mailbox`: the one waiting message (inline
// when it is small, in a `Letter` on the heap when it is large, as `Parcel` does for
// the engine's deliveries) and whether a block that will take it is submitted. The
// states, under the mailbox's lock:
//
//   empty, no block     the queue has taken everything
//   waiting, block      a message waits; the submitted block will take it
//
// Transitions:
//
//   offer(m)   empty     -> waiting m, block: submit one
//              waiting w -> waiting merge(w, m): nothing to submit
//   take       (block)   -> empty, no block: it runs the handler with what it took
//
// The merge runs under the lock: it is the library's own code (an update's old and new
// values, an array's changesets), never a handler or an `==`. What it replaces leaves
// the lock with the transition and is released after unlocking, so no `deinit` of a
// user's value runs under it. The handler's duplicate check (`skips`, an `==`) runs in
// the block, outside the lock.

import Dispatch

/// How a state observer's waiting message takes a newer one.
@usableFromInline
struct Merging<Message>: Sendable {
  /// The waiting message and a newer one, as one.
  @usableFromInline let merge: @Sendable (Message, Message) -> Message
  /// Whether a merged message is no change for the handler (with duplicates skipped, a
  /// change that came back to the value delivered last), and is not delivered.
  @usableFromInline let skips: (@Sendable (Message) -> Bool)?

  @inlinable init(
    merge: @escaping @Sendable (Message, Message) -> Message, skips: (@Sendable (Message) -> Bool)? = nil
  ) {
    self.merge = merge
    self.skips = skips
  }

  /// Keeps the newer message (for a handler that reads only the newest state).
  @inlinable static var newest: Merging { Merging(merge: { _, newer in newer }) }

  /// Keeps the waiting message: a once-only subscription keeps its first state.
  @inlinable static var first: Merging { Merging(merge: { waiting, _ in waiting }) }
}

/// A message on the heap, passed on in place: a large value costs no copy on the stack
/// of the frames it passes through (Parcel.swift).
@usableFromInline
final class Letter<Message: Sendable>: Sendable {
  /// A constant, so that it is passed on in place, never copied out.
  @usableFromInline let message: Message

  @inlinable init(_ message: consuming Message) {
    self.message = message
  }

  /// A letter holding a copy of `message`. Not inlined, so that the temporaries of the
  /// copy are off the stack when it returns.
  @inlinable @inline(never)
  static func copying(_ message: borrowing Message) -> Letter {
    Letter(copy message)
  }

  /// The letter `waiting` and then `newer` make, as `merging` merges them. Not inlined,
  /// for the same reason.
  @inlinable @inline(never)
  static func merging(_ waiting: Letter, _ newer: Letter, by merging: Merging<Message>) -> Letter {
    Letter(merging.merge(waiting.message, newer.message))
  }
}

/// The mailbox's state, guarded by its lock.
@usableFromInline
struct MailboxState<Message: Sendable> {
  /// The small message not yet taken by the queue.
  @usableFromInline var waiting: Message?
  /// The large message not yet taken by the queue.
  @usableFromInline var letter: Letter<Message>?
  /// Whether a submitted block has not taken what waits yet.
  @usableFromInline var isScheduled = false

  @inlinable init() {}

  /// Whether messages wait in letters: when inline they would cost a copy on the stack
  /// in every frame they pass through (Parcel.swift).
  @inlinable static var usesLetters: Bool { MemoryLayout<Message>.size > largeMessageSize }

  /// Leaves a small `message`, merged into the one waiting, if any.
  ///
  /// - Returns: Whether to submit a block, and the message replaced, to release after
  ///   unlocking.
  @inlinable mutating func offer(
    _ message: borrowing Message, merging: Merging<Message>
  ) -> (submit: Bool, replaced: Message?) {
    if let replaced = waiting.take() {
      waiting = merging.merge(replaced, copy message)
      return (false, replaced)
    }
    waiting = copy message
    return (schedule(), nil)
  }

  /// Leaves a large message's `letter`, merged into the one waiting, if any.
  ///
  /// - Returns: Whether to submit a block, and the letter replaced, to release after
  ///   unlocking.
  @inlinable mutating func offer(
    _ fresh: Letter<Message>, merging: Merging<Message>
  ) -> (submit: Bool, replaced: Letter<Message>?) {
    if let replaced = letter.take() {
      letter = Letter.merging(replaced, fresh, by: merging)
      return (false, replaced)
    }
    letter = fresh
    return (schedule(), nil)
  }

  @inlinable mutating func schedule() -> Bool {
    if isScheduled { return false }
    isScheduled = true
    return true
  }

  /// Takes what waits, for the submitted block.
  @inlinable mutating func take() -> (Message?, Letter<Message>?) {
    isScheduled = false
    return (waiting.take(), letter.take())
  }

  /// Checks that a message waits exactly while a block is submitted to take it.
  @inlinable func _checkInvariants() {
    #if DEBUG
      if (waiting != nil || letter != nil) && !isScheduled {
        preconditionFailure("Evented: a state waits on a queue with no block to take it")
      }
    #endif
  }
}

/// One state observer's waiting state on its queue.
@usableFromInline
final class Mailbox<Message: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: `state` is guarded by the lock it is stored with; `merging`
  // is immutable.
  @usableFromInline let state = Lock<MailboxState<Message>>.make(MailboxState())
  @usableFromInline let merging: Merging<Message>

  @inlinable init(_ merging: Merging<Message>) {
    self.merging = merging
  }

  /// Leaves `message` for `entry` on `queue`, merged with the one waiting, if any.
  @inlinable func offer(_ message: Message, to entry: Entry<Message>, on queue: DispatchQueue) {
    let submits = MailboxState<Message>.usesLetters ? offerInLetter(message) : offerInline(message)
    if submits { submit(to: entry, on: queue) }
  }

  /// ``offer(_:to:on:)`` for a small message. Separate from the large messages' path,
  /// so that neither takes room on the stack for the other's temporaries.
  ///
  /// - Returns: Whether to submit a block.
  @inlinable @inline(never)
  func offerInline(_ message: Message) -> Bool {
    let (submit, replaced) = state.withLock { state in
      defer { state._checkInvariants() }
      return state.offer(message, merging: merging)
    }
    _ = consume replaced  // released here, after unlocking
    return submit
  }

  /// ``offer(_:to:on:)`` for a large message, which waits in a letter.
  ///
  /// - Returns: Whether to submit a block.
  @inlinable @inline(never)
  func offerInLetter(_ message: Message) -> Bool {
    let fresh = Letter.copying(message)
    let (submit, replaced) = state.withLock { state in
      defer { state._checkInvariants() }
      return state.offer(fresh, merging: merging)
    }
    _ = consume replaced  // released here, after unlocking
    return submit
  }

  /// Submits a block that takes what waits and runs the handler with it.
  @inlinable func submit(to entry: Entry<Message>, on queue: DispatchQueue) {
    queue.async {
      let (message, letter) = self.state.withLock { $0.take() }
      if let letter {
        self.deliver(letter.message, to: entry)
      } else if let message {
        self.deliver(message, to: entry)
      }
    }
  }

  /// Runs the handler with `message`, unless it is no change for it.
  @inlinable func deliver(_ message: borrowing Message, to entry: Entry<Message>) {
    if let skips = merging.skips, skips(message) { return }
    let thread = DeliveringThread.enter()
    _ = entry.run(message, me: currentThreadID())
    DeliveringThread.exit(thread)
  }
}
