// The contract suite talks to sources through small protocols, so that the same tests
// can run against every kind of source: the lock-based EventSource and Property, seen
// directly, through their read-only views and through derived values, and the actor
// variants ActorEventSource and ActorProperty, directly and through their views. The
// actor variants' sends are awaited and their handlers are `async`, so they have
// protocols of their own with the same members, awaited. Another kind of source joins
// by adding an adapter and a case to the kind enums below.

import Evented

/// A source of `Int` events under test: something to send to and to observe.
protocol EventSubject: Sendable {
  /// Commits `event` and, with synchronous delivery, delivers it.
  func send(_ event: Int)

  /// Observes every event from now on; the returned handle owns the subscription.
  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription

  /// Observes every event from now on, for as long as `owner` lives.
  @discardableResult
  func observe<O: AnyObject & Sendable>(
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
  func observe<O: AnyObject & Sendable>(with owner: O, _ handler: @escaping @Sendable (O, Int) -> Void) -> Subscription
  {
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
  /// `EventSource` observed through `map` (a derived source).
  case eventSourceMapped
  /// `EventSource` observed through a `merge` with another source.
  case eventSourceMerged
  /// `Property` observed through `map` (a derived property).
  case propertyMapped

  var description: String { rawValue }

  /// Whether the subject is observed through a derived source, which commits an event
  /// when its own source delivers it.
  /// Whether the subject is state (a property, seen as events): an observer of it on
  /// a queue receives the newest state, not every one.
  var isState: Bool {
    switch self {
    case .property, .propertyView, .propertyMapped: true
    case .eventSource, .eventSourceView, .eventSourceMapped, .eventSourceMerged: false
    }
  }

  var isDerived: Bool {
    switch self {
    case .eventSource, .eventSourceView, .property, .propertyView: false
    case .eventSourceMapped, .eventSourceMerged, .propertyMapped: true
    }
  }

  func make() -> any EventSubject {
    switch self {
    case .eventSource: EventSourceSubject(.direct)
    case .eventSourceView: EventSourceSubject(.viewed)
    case .eventSourceMapped: EventSourceSubject(.mapped)
    case .eventSourceMerged: EventSourceSubject(.merged)
    case .property: PropertyEventSubject(.direct)
    case .propertyView: PropertyEventSubject(.viewed)
    case .propertyMapped: PropertyEventSubject(.mapped)
    }
  }
}

/// How a subject's source is observed: directly, through a view, or derived.
enum Observation: Sendable {
  case direct, viewed, mapped, merged
}

struct EventSourceSubject: EventSubject {
  let source = EventSource<Int>()
  private let observed: any EventSourceProtocol<Int>

  init(_ observation: Observation) {
    switch observation {
    case .direct: observed = source
    case .viewed: observed = source.readOnly
    case .mapped: observed = source.map { $0 }
    case .merged: observed = source.merge(with: EventSource<Int>())
    }
  }

  func send(_ event: Int) { source.send(event) }

  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    observed.observe(on: delivery, handler)
  }

  func observe<O: AnyObject & Sendable>(
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
  /// Boxed, so that the derived value is not `Equatable` and skips no write.
  private let observed: ReadOnlyProperty<Box>?

  init(_ observation: Observation) {
    switch observation {
    case .direct, .viewed: observed = nil
    case .mapped, .merged: observed = property.map { Box(value: $0 + 1) }.map { Box(value: $0.value - 1) }
    }
    self.observation = observation
  }

  private let observation: Observation

  func send(_ event: Int) { property.value = event }

  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    switch observation {
    case .direct: property.observeChanges(on: delivery) { change in handler(change.newValue) }
    case .viewed: property.readOnly.observeChanges(on: delivery) { change in handler(change.newValue) }
    case .mapped, .merged: observed!.observeChanges(on: delivery) { change in handler(change.newValue.value) }
    }
  }

  func observe<O: AnyObject & Sendable>(
    with owner: O, on delivery: Delivery, _ handler: @escaping @Sendable (O, Int) -> Void
  ) -> Subscription {
    switch observation {
    case .direct:
      property.observeChanges(with: owner, on: delivery) { owner, change in handler(owner, change.newValue) }
    case .viewed:
      property.readOnly.observeChanges(with: owner, on: delivery) { owner, change in handler(owner, change.newValue) }
    case .mapped, .merged:
      observed!.observeChanges(with: owner, on: delivery) { owner, change in handler(owner, change.newValue.value) }
    }
  }

  var observerCount: Int {
    switch observation {
    case .direct, .viewed: property.observerCount
    case .mapped, .merged: observed!.observerCount
    }
  }
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
  /// `Property(0)` written directly, read and observed through a chain of two `map`s.
  case mapped
  /// `Property(0)` paired with a constant by `combineLatest`, then unpaired by `map`.
  case combined
  /// `Property(0)` followed through `flatMapLatest` from a selector property.
  case followed

  var description: String { rawValue }

  func make(_ initial: Int = 0) -> any PropertySubject {
    switch self {
    case .property: return PlainPropertySubject(Property(initial), observed: nil)
    case .wrapped: return WrappedPropertySubject(model: WrappedModel(initial))
    case .mapped:
      let property = Property(initial)
      return PlainPropertySubject(property, observed: property.map { $0 + 1 }.map { $0 - 1 })
    case .combined:
      let property = Property(initial)
      return PlainPropertySubject(property, observed: property.combineLatest(ReadOnlyProperty(constant: 7)).map(\.0))
    case .followed:
      let property = Property(initial)
      let selector = Property(0)
      return PlainPropertySubject(property, observed: selector.flatMapLatest { _ in property })
    }
  }
}

/// A value that is not `Equatable`, so that a `map` through it skips nothing.
struct Box: Sendable {
  let value: Int
}

struct PlainPropertySubject: PropertySubject {
  let property: Property<Int>
  /// What is read and observed: the property itself, or a value derived from it.
  let observed: ReadOnlyProperty<Int>

  init(_ property: Property<Int>, observed: ReadOnlyProperty<Int>?) {
    self.property = property
    self.observed = observed ?? property.readOnly
  }

  var value: Int {
    get { observed.value }
    nonmutating set { property.value = newValue }
  }

  func modify<R>(_ body: (inout Int) -> R) -> R { property.modify(body) }

  func observe(on delivery: Delivery, _ handler: @escaping @Sendable (Int) -> Void) -> Subscription {
    observed.observe(on: delivery, handler)
  }

  func observeChanges(on delivery: Delivery, _ handler: @escaping @Sendable (Change<Int>) -> Void) -> Subscription {
    observed.observeChanges(on: delivery, handler)
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

// MARK: - Actor variants

/// An actor-isolated source of `Int` events under test: sends are awaited, and each
/// subscription's `async` handler runs in a task of its own.
protocol ActorEventSubject: Sendable {
  /// Commits `event`; handlers receive it afterwards, in their own tasks.
  func send(_ event: Int) async

  /// Observes every event from now on; the returned handle owns the subscription.
  func observe(_ handler: @escaping @Sendable (Int) async -> Void) async -> Subscription

  /// Observes every event from now on, for as long as `owner` lives.
  @discardableResult
  func observe<O: AnyObject & Sendable>(with owner: O, _ handler: @escaping @Sendable (O, Int) async -> Void) async
    -> Subscription

  /// The number of live subscriptions.
  var observerCount: Int { get async }
}

/// The kinds of actor event subject the contract runs against.
enum ActorEventSubjectKind: String, CaseIterable, Sendable, CustomStringConvertible {
  /// `ActorEventSource`, observed directly.
  case actorEventSource
  /// `ActorEventSource`, observed through its `ActorReadOnlyEventSource` view.
  case actorEventSourceView
  /// `ActorProperty` written with `setValue` and observed with `observeChanges`.
  case actorProperty
  /// `ActorProperty` observed through its `ActorReadOnlyProperty` view.
  case actorPropertyView

  var description: String { rawValue }

  /// Whether it is state: a handler holds one waiting value, the newest, so a slow one
  /// skips to it instead of receiving every value.
  var coalesces: Bool { self == .actorProperty || self == .actorPropertyView }

  func make() -> any ActorEventSubject {
    switch self {
    case .actorEventSource: ActorEventSourceSubject(viewed: false)
    case .actorEventSourceView: ActorEventSourceSubject(viewed: true)
    case .actorProperty: ActorPropertyEventSubject(viewed: false)
    case .actorPropertyView: ActorPropertyEventSubject(viewed: true)
    }
  }
}

struct ActorEventSourceSubject: ActorEventSubject {
  let source = ActorEventSource<Int>()
  let viewed: Bool

  func send(_ event: Int) async { await source.send(event) }

  func observe(_ handler: @escaping @Sendable (Int) async -> Void) async -> Subscription {
    viewed ? await source.readOnly.observe(handler) : await source.observe(handler)
  }

  func observe<O: AnyObject & Sendable>(with owner: O, _ handler: @escaping @Sendable (O, Int) async -> Void) async
    -> Subscription
  {
    viewed ? await source.readOnly.observe(with: owner, handler) : await source.observe(with: owner, handler)
  }

  var observerCount: Int {
    get async { viewed ? await source.readOnly.observerCount : await source.observerCount }
  }
}

/// An actor property seen as a stream of events: every write is an event (duplicates
/// are not skipped), observed without the replay of the current value.
struct ActorPropertyEventSubject: ActorEventSubject {
  let property = ActorProperty(-1, skipsDuplicates: false)
  let viewed: Bool

  func send(_ event: Int) async { await property.setValue(event) }

  func observe(_ handler: @escaping @Sendable (Int) async -> Void) async -> Subscription {
    let changes: @Sendable (Change<Int>) async -> Void = { change in await handler(change.newValue) }
    return viewed ? await property.readOnly.observeChanges(changes) : await property.observeChanges(changes)
  }

  func observe<O: AnyObject & Sendable>(with owner: O, _ handler: @escaping @Sendable (O, Int) async -> Void) async
    -> Subscription
  {
    let changes: @Sendable (O, Change<Int>) async -> Void = { owner, change in await handler(owner, change.newValue) }
    return viewed
      ? await property.readOnly.observeChanges(with: owner, changes)
      : await property.observeChanges(with: owner, changes)
  }

  var observerCount: Int {
    get async { viewed ? await property.readOnly.observerCount : await property.observerCount }
  }
}

/// An actor property of `Int` under test.
protocol ActorPropertySubject: Sendable {
  /// The latest committed value.
  var value: Int { get async }

  /// Commits `value`.
  func setValue(_ value: Int) async

  /// Atomically changes the value and notifies once; if `body` throws, the value stays.
  @discardableResult
  func modify<R: Sendable, F: Error>(_ body: @Sendable (inout Int) throws(F) -> R) async throws(F) -> R

  /// The current value, then every new one, keeping only the newest undelivered one.
  var values: AsyncValues<Int> { get async }

  /// Observes the current value, then every new one.
  func observe(_ handler: @escaping @Sendable (Int) async -> Void) async -> Subscription

  /// Observes every change from now on, as old and new value.
  func observeChanges(_ handler: @escaping @Sendable (Change<Int>) async -> Void) async -> Subscription

  /// The number of live subscriptions.
  var observerCount: Int { get async }
}

/// The kinds of actor property subject the contract runs against.
enum ActorPropertySubjectKind: String, CaseIterable, Sendable, CustomStringConvertible {
  /// `ActorProperty(initial)`, which skips duplicates.
  case actorProperty
  /// `ActorProperty(initial)` written directly, read and observed through its
  /// `ActorReadOnlyProperty` view.
  case actorPropertyView

  var description: String { rawValue }

  func make(_ initial: Int = 0) -> any ActorPropertySubject {
    ActorPropertyValueSubject(property: ActorProperty(initial), viewed: self == .actorPropertyView)
  }
}

struct ActorPropertyValueSubject: ActorPropertySubject {
  let property: ActorProperty<Int>
  let viewed: Bool

  var value: Int {
    get async { viewed ? await property.readOnly.value : await property.value }
  }

  func setValue(_ value: Int) async { await property.setValue(value) }

  func modify<R: Sendable, F: Error>(_ body: @Sendable (inout Int) throws(F) -> R) async throws(F) -> R {
    try await property.modify(body)
  }

  var values: AsyncValues<Int> {
    get async { viewed ? await property.readOnly.values : await property.values }
  }

  func observe(_ handler: @escaping @Sendable (Int) async -> Void) async -> Subscription {
    viewed ? await property.readOnly.observe(handler) : await property.observe(handler)
  }

  func observeChanges(_ handler: @escaping @Sendable (Change<Int>) async -> Void) async -> Subscription {
    viewed ? await property.readOnly.observeChanges(handler) : await property.observeChanges(handler)
  }

  var observerCount: Int {
    get async { viewed ? await property.readOnly.observerCount : await property.observerCount }
  }
}
