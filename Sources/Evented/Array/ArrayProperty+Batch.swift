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
    @usableFromInline var current: [Element]
    /// What was done so far, in order.
    @usableFromInline var changes: [ArrayChange<Element>] = []
    /// Whether out-of-range input is reported as part of a user's batch.
    @usableFromInline let isUserBatch: Bool

    @inlinable
    init(_ array: [Element], isUserBatch: Bool) {
      self.current = array
      self.isUserBatch = isUserBatch
    }

    /// The elements as they stand now.
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
        let old = current[index]
        current[index] = newValue
        changes.append(.replace(index: index, old: old, new: newValue))
      }
    }

    /// Appends `element`.
    @inlinable
    public mutating func append(_ element: Element) {
      changes.append(.insert(index: current.count, element: element))
      current.append(element)
    }

    /// Appends `elements`, in order.
    @inlinable
    public mutating func append(contentsOf newElements: some Sequence<Element>) {
      for element in newElements { append(element) }
    }

    /// Inserts `element` at `index`.
    ///
    /// - Precondition: `0 <= index <= count`.
    @inlinable
    public mutating func insert(_ element: Element, at index: Int) {
      check(index >= 0 && index <= current.count, "insert(_:at: \(index))")
      current.insert(element, at: index)
      changes.append(.insert(index: index, element: element))
    }

    /// Inserts `elements` at `index`, in order.
    ///
    /// - Precondition: `0 <= index <= count`.
    @inlinable
    public mutating func insert(contentsOf newElements: some Collection<Element>, at index: Int) {
      check(index >= 0 && index <= current.count, "insert(contentsOf:at: \(index))")
      for (offset, element) in newElements.enumerated() {
        insert(element, at: index + offset)
      }
    }

    /// Removes and returns the element at `index`.
    ///
    /// - Precondition: `0 <= index < count`.
    @inlinable @discardableResult
    public mutating func remove(at index: Int) -> Element {
      check(index >= 0 && index < current.count, "remove(at: \(index))")
      let element = current.remove(at: index)
      changes.append(.remove(index: index, element: element))
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
    @inlinable
    public mutating func removeAll() {
      while !current.isEmpty { remove(at: current.count - 1) }
    }

    /// Replaces the elements in `subrange` with `newElements`; the two may differ in
    /// length.
    ///
    /// Records a replacement for each position both have, then removals of the excess
    /// old elements (from the last down) or insertions of the excess new ones.
    ///
    /// - Precondition: `0 <= subrange.lowerBound` and `subrange.upperBound <= count`.
    @inlinable
    public mutating func replaceSubrange(_ subrange: Range<Int>, with newElements: some Collection<Element>) {
      check(
        subrange.lowerBound >= 0 && subrange.upperBound <= current.count,
        "replaceSubrange(\(subrange.lowerBound)..<\(subrange.upperBound), with:)", isRange: true)
      var index = subrange.lowerBound
      var newIterator = newElements.makeIterator()
      while index < subrange.upperBound, let element = newIterator.next() {
        self[index] = element
        index += 1
      }
      for removed in (index..<subrange.upperBound).reversed() { remove(at: removed) }
      while let element = newIterator.next() {
        insert(element, at: index)
        index += 1
      }
    }

    /// Moves the element at `from` so that it ends at `to` (removed, then inserted at
    /// its final index, as UIKit's `moveRow(at:to:)`). A move to the same index changes
    /// nothing and records nothing.
    ///
    /// - Precondition: `0 <= from < count` and `0 <= to < count`.
    @inlinable
    public mutating func move(from: Int, to: Int) {
      check(
        from >= 0 && from < current.count && to >= 0 && to < current.count, "move(from: \(from), to: \(to))")
      guard from != to else { return }
      let element = current.remove(at: from)
      current.insert(element, at: to)
      changes.append(.move(from: from, to: to, element: element))
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
  /// Zero.
  @inlinable
  public var startIndex: Int { 0 }
  /// ``count``.
  @inlinable
  public var endIndex: Int { current.count }
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
