import Synchronization

/// An observable array whose every mutation or batch commits atomically and delivers
/// exactly one ``ArrayChangeset``.
///
/// ```swift
/// let friends = ArrayProperty(["Ann", "Bob"])
/// friends.observeChanges(with: view) { view, changeset in view.apply(changeset) }
/// friends.append("Cy")                                     // one insert
/// friends.batch { $0.remove(at: 0); $0[0] = "Bo" }         // one changeset, two changes
/// friends.value = ["Cy", "Bo", "Di"]                       // a minimal diff
/// ```
///
/// Mutators have Array's names, results and costs: a mutation works on the stored
/// array in place unless someone else may hold it (see "Cost" in the Arrays guide).
/// Whole-array assignment through ``value`` records a difference, computed outside the
/// lock: for `Hashable` elements in O(*n* + *m*) time, with moves inferred, minimal in
/// the cases the Arrays guide names; for `Equatable` elements the standard library's
/// exact `CollectionDifference`, O((*n* + *m*) × *d*); an equal array notifies nobody.
/// Other elements are all removed and inserted anew. A mutation that changes nothing (`removeAll()`
/// of an empty array, a move to the same index, an empty `append(contentsOf:)`, a
/// batch that records nothing) notifies nobody. Replacing an element through the
/// subscript always records a replacement, even with an equal element: only
/// whole-array assignment compares elements.
///
/// An out-of-range index, or `removeFirst()` / `removeLast()` on an empty array, stops
/// the program with a message naming the operation, the index and the count, such as
/// `Evented: ArrayProperty.remove(at: 5): index out of range (count 3)`, before
/// anything is committed.
///
/// An array property is `Observable`: reading ``value``, ``count``, ``isEmpty`` or an
/// element inside a tracking scope (a SwiftUI body, `withObservationTracking`) registers
/// the access, and the next changeset notifies the scope once, after the commit,
/// through one subscription the array holds from the tracked read until that changeset
/// (``observerCount`` counts it). Nothing is paid on any mutation while no scope waits.
///
/// ## Concurrency
///
/// - **Thread safety:** `Sendable`; every member may be called from any thread at any
///   time. Handlers never run while an internal lock is held.
/// - **Ordering:** Each mutation, batch or assignment is one atomic commit. Each
///   subscription receives one changeset per commit, in commit order, so replaying
///   them onto the first array it received reproduces every later one; when writers
///   stop, the last array delivered to every live subscription equals ``value``. After
///   a mutation returns on a thread, that thread reads its result or a later array.
///   Different subscriptions are not ordered relative to each other.
/// - **Reentrancy:** A handler may read, mutate, batch, assign, subscribe and cancel,
///   on this property or any other. A change made inside a handler is committed at
///   once and delivered after the current delivery pass. A subscription made while a
///   batch runs receives the array before or after the whole batch, never part of it.
///   One piece of user code runs under the property's lock: the closure given to
///   ``batch(_:)``, with the `==` and `hash(into:)` it calls. It must not use this
///   property (doing so stops the program with a message) and should not use other
///   sources. Whole-array assignment compares and hashes elements outside the lock.
/// - **Lifetime:** A subscription ends when its owner deinitializes, or on
///   ``Subscription/cancel()``. Old arrays and removed elements are released outside
///   the lock.
public final class ArrayProperty<Element: Sendable>: Sendable {
  @usableFromInline let hub: Hub<ArrayChangeset<Element>, ArrayStore<Element>>
  /// The changes of a whole-array assignment: a difference for `Equatable` elements.
  @usableFromInline let assignment: @Sendable ([Element], [Element]) -> [ArrayChange<Element>]
  /// The node behind ``readOnly``, made by its first read.
  let view = AtomicLazyReference<DerivedProperty<[Element]>>()
  /// Observation's view of this array (see ArrayProperty+Observable.swift).
  @usableFromInline let observation = ObservationSlot()

  @usableFromInline
  init(
    elements: [Element], backlogLimit: Int,
    assignment: @escaping @Sendable ([Element], [Element]) -> [ArrayChange<Element>]
  ) {
    hub = Hub.make(ArrayStore(elements), backlogLimit: backlogLimit)
    self.assignment = assignment
  }

  deinit {
    endView()
  }

  /// Creates an array property; whole-array assignment removes every old element and
  /// inserts every new one.
  ///
  /// - Parameters:
  ///   - elements: The initial array.
  ///   - backlogLimit: How many committed changesets may wait for the thread that is
  ///     delivering for this property (1,024 unless given). At the limit, a mutation or
  ///     a replaying subscribe from a thread that is not running a handler or
  ///     delivering waits until there is room; see "Overload" in the guarantees guide.
  @inlinable
  public convenience init(_ elements: [Element], backlogLimit: Int = 1_024) {
    self.init(elements: elements, backlogLimit: backlogLimit, assignment: { replacingChanges(from: $0, to: $1) })
  }

  /// The current array. Setting it is a whole-array assignment: one changeset, which
  /// for `Equatable` elements is a difference (see the type's summary).
  ///
  /// The difference is computed outside the lock, against the array stored when the
  /// assignment began; if another commit came first meanwhile, it is computed again
  /// against the newer array, and after three tries the assignment commits as a
  /// replacement of every element. Reading copies nothing, but the next mutation
  /// copies the elements once, since the caller may hold them.
  ///
  /// - Complexity: Setting: O(*n* + *m*) for `Hashable` elements (plus O(*k* log *k*)
  ///   when *k* kept elements change order); O((*n* + *m*) × *d*) comparisons for
  ///   `Equatable` ones, *d* being the number of insertions and removals.
  /// - Note: `value.append(x)` reads, then assigns: two critical sections. Use the
  ///   property's own ``append(_:)`` or ``batch(_:)``.
  @inlinable
  public var value: [Element] {
    get {
      registerAccess()
      return hub.storage.withLock { state in
        hub.noteRead(&state)
        return state.hiddenElements() ?? state.stored.share()
      }
    }
    set { assign(newValue) }
  }

  /// The number of elements.
  @inlinable
  public var count: Int {
    registerAccess()
    return hub.storage.withLock { state in
      hub.noteRead(&state)
      return state.hiddenElements()?.count ?? state.stored.elements.count
    }
  }

  /// Whether the array is empty.
  @inlinable
  public var isEmpty: Bool {
    registerAccess()
    return hub.storage.withLock { state in
      hub.noteRead(&state)
      return state.hiddenElements()?.isEmpty ?? state.stored.elements.isEmpty
    }
  }

  /// The element at `index`. Setting it replaces that element (one `replace` change).
  ///
  /// - Precondition: `0 <= index < count`, checked under the lock; otherwise the
  ///   program stops with a message, and a setter commits nothing.
  @inlinable
  public subscript(index: Int) -> Element {
    get {
      registerAccess()
      let element = hub.storage.withLock { state -> Element? in
        hub.noteRead(&state)
        let elements = state.hiddenElements() ?? state.stored.elements
        return index >= 0 && index < elements.count ? elements[index] : nil
      }
      guard let element else { badInput("[\(index)]", count: count) }
      return element
    }
    set {
      perform("[\(index)] = …", .index(index)) { $0[index] = newValue }
    }
  }

  /// Appends `element`.
  ///
  /// - Complexity: Amortized O(1) when nobody else holds the array: no array read
  ///   through ``value`` since the last mutation, and no observer but synchronous ones
  ///   that do not keep it. Otherwise the elements are copied once, O(*n*).
  @inlinable
  public func append(_ element: Element) {
    // Performance: "Arrays at scale" (S5). Without subscribers and with a buffer of the
    // lock's own, an append needs neither a batch nor a changeset.
    let token = hub.lockForCommit()
    let store = token.state
    if transactionsBegun.load(ordering: .relaxed) && DeliveringThread.existing?.pointee.transaction != nil {
      token.unlock()
      return perform("append(_:)", .none) { $0.append(element) }
    }
    if store.pointee.recipientsOfCommit() == nil && store.pointee.prepareInPlace() {
      store.pointee.stored.elements.append(element)
      store.pointee.stored.version &+= 1
      token.unlock()
      return
    }
    token.unlock()
    perform("append(_:)", .none) { $0.append(element) }
  }

  /// Appends `elements`, in order, in one changeset.
  @inlinable
  public func append(contentsOf elements: some Sequence<Element>) {
    let elements = Array(elements)
    perform("append(contentsOf:)", .none) { $0.append(contentsOf: elements) }
  }

  /// Inserts `element` at `index`.
  ///
  /// - Precondition: `0 <= index <= count`.
  @inlinable
  public func insert(_ element: Element, at index: Int) {
    perform("insert(_:at: \(index))", .position(index)) { $0.insert(element, at: index) }
  }

  /// Inserts `elements` at `index`, in order, in one changeset.
  ///
  /// - Precondition: `0 <= index <= count`.
  @inlinable
  public func insert(contentsOf elements: some Collection<Element>, at index: Int) {
    let elements = Array(elements)
    perform("insert(contentsOf:at: \(index))", .position(index)) {
      $0.insert(contentsOf: elements, at: index)
    }
  }

  /// Removes and returns the element at `index`.
  ///
  /// - Precondition: `0 <= index < count`.
  @inlinable @discardableResult
  public func remove(at index: Int) -> Element {
    perform("remove(at: \(index))", .index(index)) { $0.remove(at: index) }
  }

  /// Removes and returns the first element.
  ///
  /// - Precondition: The array is not empty.
  @inlinable @discardableResult
  public func removeFirst() -> Element {
    perform("removeFirst()", .nonEmpty) { $0.removeFirst() }
  }

  /// Removes and returns the last element.
  ///
  /// - Precondition: The array is not empty.
  @inlinable @discardableResult
  public func removeLast() -> Element {
    perform("removeLast()", .nonEmpty) { $0.removeLast() }
  }

  /// Removes and returns the last element, or returns nil (notifying nobody) if the
  /// array is empty.
  @inlinable @discardableResult
  public func popLast() -> Element? {
    perform("popLast()", .none) { $0.popLast() }
  }

  /// Removes every element, in one changeset (removals from the last element down).
  @inlinable
  public func removeAll() {
    perform("removeAll()", .none) { $0.removeAll() }
  }

  /// Replaces the elements in `subrange` with `newElements`, in one changeset; the two
  /// may differ in length.
  ///
  /// Records a replacement for each position both have, then removals of the excess
  /// old elements or insertions of the excess new ones.
  ///
  /// - Precondition: `0 <= subrange.lowerBound` and `subrange.upperBound <= count`.
  @inlinable
  public func replaceSubrange(_ subrange: Range<Int>, with newElements: some Collection<Element>) {
    let elements = Array(newElements)
    perform(
      "replaceSubrange(\(subrange.lowerBound)..<\(subrange.upperBound), with:)",
      .range(subrange)
    ) { $0.replaceSubrange(subrange, with: elements) }
  }

  /// Moves the element at `from` so that it ends at index `to`: removed, then inserted
  /// at its final index, as UIKit's `moveRow(at:to:)`. A move to the same index notifies
  /// nobody.
  ///
  /// - Precondition: `0 <= from < count` and `0 <= to < count`.
  @inlinable
  public func move(from: Int, to: Int) {
    perform("move(from: \(from), to: \(to))", .indices(from, to)) {
      $0.move(from: from, to: to)
    }
  }

  /// Runs `body` on the array and commits everything it did as one changeset,
  /// atomically.
  ///
  /// ```swift
  /// let removed = friends.batch { array in
  ///   let first = array.removeFirst()
  ///   array.append(contentsOf: newcomers)
  ///   return first
  /// }
  /// ```
  ///
  /// - Parameter body: Changes the array through a ``Batch``, which records each
  ///   change in order. Runs under the property's lock, so keep it short. If it throws,
  ///   nothing is committed and nobody is notified.
  /// - Returns: What `body` returns.
  /// - Important: `body` must not read, change or observe this property: that would
  ///   deadlock, so it stops the program with a message instead. An out-of-range index
  ///   inside `body` stops the program before any part of the batch is committed.
  ///   Touching other sources from `body` can deadlock against a thread that does the
  ///   opposite.
  @inlinable @discardableResult
  public func batch<Result, Failure: Error>(
    _ body: (inout Batch) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    try mutate(isUserBatch: true, body).0.unsafelyUnwrapped
  }

  /// What a mutation needs of the array's count.
  @usableFromInline
  enum Requirement {
    case none
    /// A valid index: `0 <= index < count`.
    case index(Int)
    /// A valid insertion point: `0 <= index <= count`.
    case position(Int)
    /// Two valid indices.
    case indices(Int, Int)
    /// A range within `0...count`.
    case range(Range<Int>)
    /// At least one element.
    case nonEmpty

    @inlinable
    func isMet(byCount count: Int) -> Bool {
      switch self {
      case .none: true
      case .index(let index): index >= 0 && index < count
      case .position(let index): index >= 0 && index <= count
      case .indices(let first, let second): first >= 0 && first < count && second >= 0 && second < count
      case .range(let range): range.lowerBound >= 0 && range.upperBound <= count
      case .nonEmpty: count > 0
      }
    }

    /// Stops the program with a message about `operation` failing this requirement.
    @usableFromInline
    func fail(_ operation: String, count: Int) -> Never {
      switch self {
      case .range: badInput(operation, count: count, isRange: true)
      case .nonEmpty: badInput(operation, count: count, isEmpty: true)
      default: badInput(operation, count: count)
      }
    }
  }

  /// Runs one mutation, after checking its input against the stored array's count.
  ///
  /// Bad input stops the program after the lock is released, with nothing committed.
  @inlinable
  func perform<Outcome>(
    _ operation: @autoclosure () -> String,
    _ requirement: Requirement,
    _ body: (inout Batch) -> Outcome
  ) -> Outcome {
    let (outcome, badCount) = mutate(isUserBatch: false, check: { requirement.isMet(byCount: $0) }, body)
    if let badCount { requirement.fail(operation(), count: badCount) }
    return outcome.unsafelyUnwrapped
  }
}

extension ArrayProperty where Element: Equatable {
  /// Creates an array property; whole-array assignment records a minimal difference,
  /// and assigning an equal array notifies nobody.
  ///
  /// - Parameters:
  ///   - elements: The initial array.
  ///   - backlogLimit: How many committed changesets may wait for the delivering thread
  ///     (1,024 unless given), as for the initializer of any array property.
  @inlinable
  public convenience init(_ elements: [Element], backlogLimit: Int = 1_024) {
    self.init(elements: elements, backlogLimit: backlogLimit, assignment: { assignmentChanges(from: $0, to: $1) })
  }
}

extension ArrayProperty where Element: Hashable {
  /// Creates an array property; whole-array assignment records a minimal difference
  /// with moves inferred, and assigning an equal array notifies nobody.
  ///
  /// - Parameters:
  ///   - elements: The initial array.
  ///   - backlogLimit: How many committed changesets may wait for the delivering thread
  ///     (1,024 unless given), as for the initializer of any array property.
  @inlinable
  public convenience init(_ elements: [Element], backlogLimit: Int = 1_024) {
    self.init(elements: elements, backlogLimit: backlogLimit, assignment: { assignmentChanges(from: $0, to: $1) })
  }
}
