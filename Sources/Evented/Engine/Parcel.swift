// The stack footprint promise (a 64 KB value works on a 1 MB stack) and promise 4's
// queue: how a message travels from its commit to its delivery.
//
// A message travels in one of two packages, chosen once per message type by
// `Hub.usesParcels`: inline, in an `Inline` value, when it is small; in a `Parcel` on
// the heap when it is larger than `largeMessageSize` bytes, since an inline large
// message would cost a copy on the stack in every frame it passes through. A parcel is
// made by a function that returns before the message is delivered, so the temporaries
// of making it are off the stack by then. The engine's path (commit, proceed, drain)
// is generic over the package: written once, specialized for each.
//
// A delivery queued for another thread is always a parcel: an inline one is boxed when
// it is queued.

/// Messages larger than this many bytes travel in a `Parcel`.
@usableFromInline let largeMessageSize = 1_024

/// Whom a committed message is for.
@usableFromInline
enum Recipients<Message> {
  /// Every subscription of the snapshot taken at commit time.
  case all(ContiguousArray<Entry<Message>>)
  /// One new subscription only (a property's current value).
  case one(Entry<Message>)

  /// Calls `deliver` for each recipient, in order.
  ///
  /// - Returns: false if a recipient has ended or its owner is gone.
  @inlinable @inline(__always)
  func each(_ deliver: (Entry<Message>) -> Bool) -> Bool {
    switch self {
    case .all(let entries):
      var allLive = true
      entries.withUnsafeBufferPointer { buffer in
        for index in buffer.indices {
          let live = unretainedEntry(buffer, index)._withUnsafeGuaranteedRef { deliver($0) }
          if !live { allLive = false }
        }
      }
      return allLive
    case .one(let entry):
      return deliver(entry)
    }
  }

  /// Whether every recipient's handler is a user's, run on the delivering thread (see
  /// `SubscriptionCore.keepsNoMessage`).
  @inlinable var keepNoMessage: Bool {
    switch self {
    case .all(let entries): entries.allSatisfy { $0.keepsNoMessage }
    case .one(let entry): entry.keepsNoMessage
    }
  }
}

/// The entry at `index` of a snapshot's buffer, unretained, to be used at +0 without a
/// retain and release (two atomic operations) per delivery: the snapshot, which is
/// never mutated, keeps every entry alive for the pass. Reading the reference as a
/// raw pointer is what keeps it unretained; a `for` loop over the buffer, or a
/// subscript, copies it.
@inlinable @inline(__always)
func unretainedEntry<Message>(
  _ buffer: UnsafeBufferPointer<Entry<Message>>, _ index: Int
) -> Unmanaged<Entry<Message>> {
  let raw = UnsafeRawPointer(buffer.baseAddress.unsafelyUnwrapped)
  let opaque = raw.load(fromByteOffset: index &* MemoryLayout<Entry<Message>>.stride, as: UnsafeRawPointer.self)
  return Unmanaged.fromOpaque(opaque)
}

/// A committed message and its recipients, as it travels to the delivering thread.
@usableFromInline
protocol Package<Message> {
  associatedtype Message: Sendable

  /// Packs the message `build` makes, for `recipients`.
  static func make(for recipients: consuming Recipients<Message>, _ build: () -> Message) -> Self

  /// Delivers the message to its recipients.
  ///
  /// - Returns: false if a recipient has ended or its owner is gone.
  func deliver(me: UInt) -> Bool

  /// This delivery on the heap, for the queue.
  consuming func parcel() -> Parcel<Message>
}

/// A small message, held inline.
@usableFromInline
struct Inline<Message: Sendable>: Package {
  @usableFromInline let message: Message
  @usableFromInline let recipients: Recipients<Message>

  @inlinable @inline(__always)
  init(message: consuming Message, recipients: Recipients<Message>) {
    self.message = message
    self.recipients = recipients
  }

  @inlinable @inline(__always)
  static func make(for recipients: consuming Recipients<Message>, _ build: () -> Message) -> Inline {
    Inline(message: build(), recipients: consume recipients)
  }

  @inlinable @inline(__always)
  func deliver(me: UInt) -> Bool {
    recipients.each { $0.deliver(message, me: me) }
  }

  @inlinable
  consuming func parcel() -> Parcel<Message> {
    Parcel(message: message, recipients: recipients)
  }
}

/// A delivery on the heap: a queued one, or one whose message is large.
@usableFromInline
final class Parcel<Message: Sendable>: Package {
  /// The message. A constant, so that it is passed on in place, never copied out.
  @usableFromInline let message: Message
  @usableFromInline let recipients: Recipients<Message>

  @inlinable init(message: consuming Message, recipients: Recipients<Message>) {
    self.message = message
    self.recipients = recipients
  }

  /// Not inlined, so that the temporaries of making the message are off the stack
  /// before it is delivered.
  @inlinable @inline(never)
  static func make(for recipients: consuming Recipients<Message>, _ build: () -> Message) -> Self {
    Self(message: build(), recipients: consume recipients)
  }

  @inlinable func deliver(me: UInt) -> Bool {
    recipients.each { deliver(to: $0, me: me) }
  }

  /// Delivers the message to `entry`. Not inlined, so that the room a delivery takes
  /// on the stack is taken once, not once per place that delivers.
  @inlinable @inline(never)
  func deliver(to entry: Entry<Message>, me: UInt) -> Bool {
    entry.deliver(message, me: me)
  }

  @inlinable consuming func parcel() -> Parcel<Message> { self }
}
