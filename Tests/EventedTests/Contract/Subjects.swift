// The contract suite talks to sources through these two small protocols, so that the
// same tests can run against every kind of source: today the lock-based EventSource
// and Property, seen directly and through their read-only views. Another kind of
// source joins by adding an adapter and a case to the kind enums below.

import Evented

/// A source of `Int` events under test: something to send to and to observe.
protocol EventSubject: Sendable {
  /// Commits `event` and, with synchronous delivery, delivers it.
  func send(_ event: Int)

  /// Observes every event from now on; the returned handle owns the subscription.
  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription

  /// Observes every event from now on, for as long as `owner` lives.
  @discardableResult
  func observe<O: AnyObject>(
    with owner: O, on delivery: Delivery, _ handler: @escaping @Sendable (O, Int) -> Void
  ) -> Subscription

  /// The number of subscriptions whose owner is alive.
  var observerCount: Int { get }
}

extension EventSubject {
  func observe(_ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    observe(on: .synchronous, handler)
  }

  @discardableResult
  func observe<O: AnyObject>(with owner: O, _ handler: @escaping @Sendable (O, Int) -> Void) -> Subscription {
    observe(with: owner, on: .synchronous, handler)
  }
}

/// The kinds of event subject the contract runs against.
enum EventSubjectKind: String, CaseIterable, Sendable, CustomStringConvertible {
  /// `EventSource`, observed directly.
  case eventSource
  /// `EventSource`, observed through its `ReadOnlyEventSource` view.
  case eventSourceView
  /// `Property` written with `value =` and observed with `observeChanges`.
  case property
  /// `Property` observed through its `ReadOnlyProperty` view.
  case propertyView

  var description: String { rawValue }

  func make() -> any EventSubject {
    switch self {
    case .eventSource: EventSourceSubject(viewed: false)
    case .eventSourceView: EventSourceSubject(viewed: true)
    case .property: PropertyEventSubject(viewed: false)
    case .propertyView: PropertyEventSubject(viewed: true)
    }
  }
}

struct EventSourceSubject: EventSubject {
  let source = EventSource<Int>()
  let viewed: Bool

  private var observed: any EventSourceProtocol<Int> { viewed ? source.readOnly : source }

  func send(_ event: Int) { source.send(event) }

  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    observed.observe(on: delivery, handler)
  }

  func observe<O: AnyObject>(
    with owner: O, on delivery: Delivery, _ handler: @escaping @Sendable (O, Int) -> Void
  ) -> Subscription {
    observed.observe(with: owner, on: delivery, handler)
  }

  var observerCount: Int { observed.observerCount }
}

/// A property seen as a stream of events: every write is an event (duplicates are not
/// skipped), observed without the replay of the current value.
struct PropertyEventSubject: EventSubject {
  let property = Property(-1, skipsDuplicates: false)
  let viewed: Bool

  private var observed: any PropertyProtocol<Int> { viewed ? property.readOnly : property }

  func send(_ event: Int) { property.value = event }

  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    observed.observeChanges(on: delivery) { change in handler(change.newValue) }
  }

  func observe<O: AnyObject>(
    with owner: O, on delivery: Delivery, _ handler: @escaping @Sendable (O, Int) -> Void
  ) -> Subscription {
    observed.observeChanges(with: owner, on: delivery) { owner, change in handler(owner, change.newValue) }
  }

  var observerCount: Int { observed.observerCount }
}

/// A property of `Int` under test.
protocol PropertySubject: Sendable {
  /// The latest committed value; setting it commits.
  var value: Int { get nonmutating set }

  /// Atomically changes the value and notifies once.
  @discardableResult
  func modify<R>(_ body: (inout Int) -> R) -> R

  /// Observes the current value, then every new one.
  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription

  /// Observes every change from now on, as old and new value.
  func observeChanges(on delivery: Delivery, _ handler: @escaping @Sendable (Change<Int>) -> Void) -> Subscription
}

/// The kinds of property subject the contract runs against.
enum PropertySubjectKind: String, CaseIterable, Sendable, CustomStringConvertible {
  /// `Property(0)`, which skips duplicates.
  case property
  /// `@Property var` inside a class, written through the wrapper, observed through `$`.
  case wrapped

  var description: String { rawValue }

  func make(_ initial: Int = 0) -> any PropertySubject {
    switch self {
    case .property: PlainPropertySubject(property: Property(initial))
    case .wrapped: WrappedPropertySubject(model: WrappedModel(initial))
    }
  }
}

struct PlainPropertySubject: PropertySubject {
  let property: Property<Int>

  var value: Int {
    get { property.value }
    nonmutating set { property.value = newValue }
  }

  func modify<R>(_ body: (inout Int) -> R) -> R { property.modify(body) }

  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    property.observe(on: delivery, handler)
  }

  func observeChanges(on delivery: Delivery, _ handler: @escaping @Sendable (Change<Int>) -> Void) -> Subscription {
    property.observeChanges(on: delivery, handler)
  }
}

/// A model object that exposes its property the way view models do.
final class WrappedModel: @unchecked Sendable {
  // @unchecked Sendable: `_number` is assigned once, in init; Property is Sendable.
  @Property var number: Int

  init(_ initial: Int) { _number = Property(initial) }

  func modifyNumber<R>(_ body: (inout Int) -> R) -> R { _number.modify(body) }
}

struct WrappedPropertySubject: PropertySubject {
  let model: WrappedModel

  var value: Int {
    get { model.number }
    nonmutating set { model.number = newValue }
  }

  func modify<R>(_ body: (inout Int) -> R) -> R { model.modifyNumber(body) }

  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    model.$number.observe(on: delivery, handler)
  }

  func observeChanges(on delivery: Delivery, _ handler: @escaping @Sendable (Change<Int>) -> Void) -> Subscription {
    model.$number.observeChanges(on: delivery, handler)
  }
}
