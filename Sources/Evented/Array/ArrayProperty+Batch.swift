extension ArrayProperty {
  /// The array as a batch changes it: Array's mutators, `count`, `isEmpty` and the
  /// subscript, each recording what it does. Given to the closure of
  /// ``ArrayProperty/batch(_:)``.
  ///
  /// ```swift
  /// friends.batch { array in
  ///   array.remove(at: 0)
  ///   array.append(newFriend)
  ///   if let index = array.firstIndex(where: { $0.id == old.id }) { array[index] = updated }
  /// }
  /// ```
  ///
  /// It is a random-access collection of the elements as they stand now, so reading
  /// methods (`first`, `firstIndex(where:)`, `for … in`) work as on an array. Out-of-range
  /// indices stop the program with a message that names the operation, the index and
  /// the count; nothing of the batch has been committed at that point.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** A value type, used only inside the batch's closure, which
  ///   runs under the property's lock.
  /// - **Ordering:** Changes are recorded, and delivered, in the order they are made.
  /// - **Reentrancy:** The closure must not use the property being changed.
  /// - **Lifetime:** Ends with the closure; what it recorded is committed then, unless
  ///   the closure throws.
  public struct Batch {
    /// The elements as they stand now.
    @usableFromInline var current: [Element] = []
    /// What was done so far, in order.
    @usableFromInline var changes: [ArrayChange<Element>] = []
    /// Whether out-of-range input is reported as part of a user's batch.
    @usableFromInline let isUserBatch: Bool
    /// Whether `current` may be held outside the lock, so that it must be copied
    /// before it is changed (see ArrayStore.swift).
    @usableFromInline var mustCopy: Bool
    /// The shared buffer that a copy replaced, to release after unlocking.
    @usableFromInline var replaced: [Element]?
    /// Whether changes are recorded: for a user's batch (which may be undone), for
    /// subscribers, and to release removed elements after unlocking unless they are
    /// plain bits.
    @usableFromInline let records: Bool
    /// Whether anything changed.
    @usableFromInline var changed = false

    /// The elements as they stand now.
    ///
    /// - Complexity: O(1); the next mutation of the property copies the array once.
    @inlinable
    public var array: [Element] { current }

    /// The number of elements.
    @inlinable
    public var count: Int { current.count }

    /// Whether there are no elements.
    @inlinable
    public var isEmpty: Bool { current.isEmpty }

    /// The element at `index`; setting it records a replacement.
    ///
    /// - Precondition: `0 <= index < count`.
    @inlinable
    public subscript(index: Int) -> Element {
      get {
        check(index >= 0 && index < current.count, "[\(index)]")
        return current[index]
      }
      set {
        check(index >= 0 && index < current.count, "[\(index)] = …")
        makeWritable()
        record(.replace(index: index, old: current[index], new: newValue))
        current[index] = newValue
      }
    }

    /// The elements in `bounds`, as an array slice whose indices are the batch's.
    ///
    /// - Precondition: `0 <= bounds.lowerBound` and `bounds.upperBound <= count`;
    ///   otherwise the program stops with a message naming the range and the count.
    @inlinable
    public subscript(bounds: Range<Int>) -> ArraySlice<Element> {
      check(
        bounds.lowerBound >= 0 && bounds.upperBound <= current.count,
        "[\(bounds.lowerBound)..<\(bounds.upperBound)]", isRange: true)
      return current[bounds]
    }

    /// Appends `element`.
    ///
    /// - Complexity: Amortized O(1).
    @inlinable
    public mutating func append(_ element: Element) {
      makeWritable(extra: 1)
      record(.insert(index: current.count, element: element))
      current.append(element)
    }

    /// Appends `elements`, in order.
    ///
    /// - Complexity: O(*k*) for *k* new elements.
    @inlinable
    public mutating func append(contentsOf newElements: some Sequence<Element>) {
      let start = current.count
      makeWritable(extra: newElements.underestimatedCount)
      current.append(contentsOf: newElements)
      recordInsertions(start..<current.count)
    }

    /// Inserts `element` at `index`.
    ///
    /// - Precondition: `0 <= index <= count`.
    /// - Complexity: O(*n*), as Array's.
    @inlinable
    public mutating func insert(_ element: Element, at index: Int) {
      check(index >= 0 && index <= current.count, "insert(_:at: \(index))")
      makeWritable(extra: 1)
      current.insert(element, at: index)
      record(.insert(index: index, element: element))
    }

    /// Inserts `elements` at `index`, in order.
    ///
    /// - Precondition: `0 <= index <= count`.
    /// - Complexity: O(*n* + *k*) for *k* new elements, as Array's.
    @inlinable
    public mutating func insert(contentsOf newElements: some Collection<Element>, at index: Int) {
      check(index >= 0 && index <= current.count, "insert(contentsOf:at: \(index))")
      let before = current.count
      makeWritable(extra: newElements.count)
      current.insert(contentsOf: newElements, at: index)
      recordInsertions(index..<(index + current.count - before))
    }

    /// Records insertions of the elements now at `range`, from the lowest index up.
    @inlinable
    mutating func recordInsertions(_ range: Range<Int>) {
      guard !range.isEmpty else { return }
      changed = true
      guard records else { return }
      changes.reserveCapacity(changes.count + range.count)
      for index in range { changes.append(.insert(index: index, element: current[index])) }
    }

    /// Removes and returns the element at `index`.
    ///
    /// - Precondition: `0 <= index < count`.
    /// - Complexity: O(*n*), as Array's; O(1) for the last element.
    @inlinable @discardableResult
    public mutating func remove(at index: Int) -> Element {
      check(index >= 0 && index < current.count, "remove(at: \(index))")
      makeWritable()
      let element = current.remove(at: index)
      record(.remove(index: index, element: element))
      return element
    }

    /// Removes and returns the first element.
    ///
    /// - Precondition: The array is not empty.
    @inlinable @discardableResult
    public mutating func removeFirst() -> Element {
      checkNotEmpty("removeFirst()")
      return remove(at: 0)
    }

    /// Removes and returns the last element.
    ///
    /// - Precondition: The array is not empty.
    @inlinable @discardableResult
    public mutating func removeLast() -> Element {
      checkNotEmpty("removeLast()")
      return remove(at: current.count - 1)
    }

    /// Removes and returns the last element, or returns nil if the array is empty.
    @inlinable
    public mutating func popLast() -> Element? {
      current.isEmpty ? nil : remove(at: current.count - 1)
    }

    /// Removes every element, from the last down.
    ///
    /// - Complexity: O(*n*).
    @inlinable
    public mutating func removeAll() {
      guard !current.isEmpty else { return }
      changed = true
      if records {
        changes.reserveCapacity(changes.count + current.count)
        for index in current.indices.reversed() { changes.append(.remove(index: index, element: current[index])) }
      }
      if mustCopy {
        replaced = current
        mustCopy = false
      }
      current = []
    }

    /// Replaces the elements in `subrange` with `newElements`; the two may differ in
    /// length.
    ///
    /// Records a replacement for each position both have, then removals of the excess
    /// old elements (from the last down) or insertions of the excess new ones.
    ///
    /// - Precondition: `0 <= subrange.lowerBound` and `subrange.upperBound <= count`.
    /// - Complexity: O(*n* + *k*) for *k* new elements, as Array's.
    @inlinable
    public mutating func replaceSubrange(_ subrange: Range<Int>, with newElements: some Collection<Element>) {
      check(
        subrange.lowerBound >= 0 && subrange.upperBound <= current.count,
        "replaceSubrange(\(subrange.lowerBound)..<\(subrange.upperBound), with:)", isRange: true)
      let new = Array(newElements)
      let lower = subrange.lowerBound
      let common = Swift.min(subrange.count, new.count)
      makeWritable(extra: Swift.max(0, new.count - subrange.count))
      if !subrange.isEmpty || !new.isEmpty { changed = true }
      if records {
        changes.reserveCapacity(changes.count + Swift.max(subrange.count, new.count))
        for offset in 0..<common {
          changes.append(.replace(index: lower + offset, old: current[lower + offset], new: new[offset]))
        }
        for index in (lower + common..<subrange.upperBound).reversed() {
          changes.append(.remove(index: index, element: current[index]))
        }
        for offset in common..<new.count { changes.append(.insert(index: lower + offset, element: new[offset])) }
      }
      current.replaceSubrange(subrange, with: new)
    }

    /// Moves the element at `from` so that it ends at `to` (removed, then inserted at
    /// its final index, as UIKit's `moveRow(at:to:)`). A move to the same index changes
    /// nothing and records nothing.
    ///
    /// - Precondition: `0 <= from < count` and `0 <= to < count`.
    /// - Complexity: O(*n*), as Array's remove and insert.
    @inlinable
    public mutating func move(from: Int, to: Int) {
      check(
        from >= 0 && from < current.count && to >= 0 && to < current.count, "move(from: \(from), to: \(to))")
      guard from != to else { return }
      makeWritable()
      let element = current.remove(at: from)
      current.insert(element, at: to)
      record(.move(from: from, to: to, element: element))
    }

    /// Stops the program with a message naming the operation and the count, unless
    /// `isValid`.
    @inlinable @inline(__always)
    func check(_ isValid: Bool, _ operation: @autoclosure () -> String, isRange: Bool = false) {
      if !isValid { badInput(operation(), count: current.count, isRange: isRange, inBatch: isUserBatch) }
    }

    @inlinable @inline(__always)
    func checkNotEmpty(_ operation: @autoclosure () -> String) {
      if current.isEmpty { badInput(operation(), count: 0, isEmpty: true, inBatch: isUserBatch) }
    }
  }
}

extension ArrayProperty.Batch: RandomAccessCollection {
  /// A slice of the elements, with the batch's indices; made by a checked range
  /// subscript.
  public typealias SubSequence = ArraySlice<Element>
  /// `0..<count`.
  public typealias Indices = Range<Int>

  /// Zero.
  @inlinable
  public var startIndex: Int { 0 }
  /// ``count``.
  @inlinable
  public var endIndex: Int { current.count }
  /// `i + 1`, unchecked as Array's: a range or subscript made from it is checked.
  @inlinable
  public func index(after i: Int) -> Int { i + 1 }
  /// `i - 1`, unchecked as Array's: a range or subscript made from it is checked.
  @inlinable
  public func index(before i: Int) -> Int { i - 1 }
}

extension ArrayProperty.Batch: Sendable {}

/// Stops the program for an out-of-range index or removal from an empty array.
@usableFromInline @inline(never)
func badInput(
  _ operation: String, count: Int, isRange: Bool = false, isEmpty: Bool = false, inBatch: Bool = false
) -> Never {
  let problem =
    isEmpty
    ? "can't remove from an empty array" : isRange ? "range out of bounds" : "index out of range"
  let place = inBatch ? "ArrayProperty.batch: " : "ArrayProperty"
  let separator = inBatch || operation.hasPrefix("[") ? "" : "."
  let note = inBatch ? "; nothing of the batch was committed" : ""
  fatalError("Evented: \(place)\(separator)\(operation): \(problem) (count \(count))\(note)")
}
