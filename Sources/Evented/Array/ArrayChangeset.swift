/// One change to an array. Its indices refer to the array as it stands when the change
/// is applied, after every change before it in the same changeset.
///
/// ```swift
/// switch change {
/// case .insert(let index, let element): print("inserted \(element) at \(index)")
/// case .remove(let index, let element): print("removed \(element) from \(index)")
/// case .replace(let index, let old, let new): print("\(old) became \(new) at \(index)")
/// case .move(let from, let to, let element): print("moved \(element) from \(from) to \(to)")
/// }
/// ```
///
/// ## Concurrency
///
/// - **Thread safety:** A value type; `Sendable` when `Element` is.
/// - **Ordering:** Meaningful only in its changeset, after the changes before it.
/// - **Reentrancy:** Not applicable.
/// - **Lifetime:** Holds the elements it names.
public enum ArrayChange<Element> {
  /// `element` was inserted at `index`; the elements from `index` on moved up by one.
  case insert(index: Int, element: Element)
  /// `element` was removed from `index`; the elements after it moved down by one.
  case remove(index: Int, element: Element)
  /// The element at `index` was replaced: `old` became `new`.
  case replace(index: Int, old: Element, new: Element)
  /// `element` was removed from `from`, then inserted at `to`, its final index (as
  /// UIKit's `moveRow(at:to:)`).
  case move(from: Int, to: Int, element: Element)
}

extension ArrayChange: Sendable where Element: Sendable {}
extension ArrayChange: Equatable where Element: Equatable {}
extension ArrayChange: Hashable where Element: Hashable {}

/// What one mutation or batch of an ``ArrayProperty`` did: the ordered changes, the
/// resulting array, and the index summaries a table or collection view needs.
///
/// ```swift
/// friends.observeChanges(with: self) { owner, changeset in
///   owner.rows = changeset.array
///   owner.table.deleteRows(changeset.removals)      // indices in the old array
///   owner.table.insertRows(changeset.insertions)    // indices in the new array
/// }
/// ```
///
/// ``changes`` is exact and ordered: each index refers to the array as it stands when
/// that change is applied, so ``applied(to:)`` on the previous array yields ``array``.
/// ``removals`` and ``insertions`` summarize the same changeset for
/// `performBatchUpdates`: an element that was removed, replaced or moved counts as a
/// removal at its index in the old array, and an element that was inserted, replaced
/// or moved counts as an insertion at its index in the new array. The elements in
/// neither list are the ones left untouched, in the same order in both arrays.
///
/// ## Concurrency
///
/// - **Thread safety:** A value type; `Sendable` when `Element` is.
/// - **Ordering:** Consecutive changesets delivered to one subscription chain: each
///   applies to the ``array`` of the one before.
/// - **Reentrancy:** Not applicable.
/// - **Lifetime:** Holds the resulting array and every element its changes name,
///   including removed ones.
public struct ArrayChangeset<Element> {
  /// The element changes, in the order they were made.
  public let changes: [ArrayChange<Element>]
  /// The array after the changes.
  public let array: [Element]
  /// Creates a changeset.
  ///
  /// - Parameters:
  ///   - changes: The changes, each index relative to the array as it stands when
  ///     that change is applied.
  ///   - array: The array that applying `changes` to the previous array yields. The
  ///     summaries ``removals`` and ``insertions`` assume it is.
  @inlinable public init(changes: [ArrayChange<Element>], array: [Element]) {
    self.changes = changes
    self.array = array
  }

  /// Applies ``changes`` in order to `array`.
  ///
  /// Applied to the array this changeset was committed against, the result equals
  /// ``array``; a subscriber can keep a replica this way (see
  /// ``ArrayProperty/observeChanges(with:on:fromEmpty:_:)-(_,Delivery,_,_)``).
  ///
  /// - Parameter array: The array before the changes.
  /// - Returns: The array after them.
  /// - Precondition: `array` has as many elements as the array the changeset was made
  ///   from; otherwise the program stops with a message naming both counts, such as
  ///   `Evented: ArrayChangeset.applied(to:): the changeset fits an array of 3 elements,
  ///   not 5`.
  /// - Complexity: O(*n* + *k*) for *n* elements and *k* changes when the changes are
  ///   runs (inserts at consecutive indices, removals of consecutive elements), as bulk
  ///   mutations and replays record them. Other inserts, removes and moves cost O(*n*)
  ///   each while they are few; with many of them (a shuffle's moves) on a large
  ///   array, about O(√*n*) each.
  public func applied(to array: [Element]) -> [Element] {
    let expected = previousCount
    if array.count != expected {
      fatalError(
        "Evented: ArrayChangeset.applied(to:): the changeset fits an array of \(expected) elements, not \(array.count)"
      )
    }
    return applying(to: array)
  }

  /// ``applied(to:)`` without checking the count: `array` is the one the changes fit.
  func applying(to array: [Element]) -> [Element] {
    if usesBlocks(count: array.count) {
      var list = BlockList(array)
      for change in changes {
        switch change {
        case .insert(let index, let element): list.insert(element, at: index)
        case .remove(let index, _): list.remove(at: index)
        case .replace(let index, _, let new): list[index] = new
        case .move(let from, let to, let element):
          list.remove(at: from)
          list.insert(element, at: to)
        }
      }
      return list.elements
    }
    var result = array
    forEachRun { run in
      switch run {
      case .insertions(let index, let positions):
        if positions.count == 1, case .insert(_, let element) = changes[positions.lowerBound] {
          result.insert(element, at: index)
        } else {
          result.insert(
            contentsOf: changes[positions].lazy.map { change -> Element in
              guard case .insert(_, let element) = change else { preconditionFailure() }
              return element
            }, at: index)
        }
      case .removals(let range):
        result.removeSubrange(range)
      case .replace(let index, let new):
        result[index] = new
      case .move(let from, let to):
        let element = result.remove(at: from)
        result.insert(element, at: to)
      }
    }
    return result
  }

  /// Whether applying the changes one by one to a `BlockList` beats taking runs on an
  /// array of `count` elements: when there are many steps that are not runs (a
  /// shuffle's moves) and the array is large. Replacements do not count: an array
  /// takes each in O(1), where a block list must find its block.
  func usesBlocks(count: Int) -> Bool {
    guard count > 4_096 && changes.count > 64 else { return false }
    var steps = 0
    forEachRun { run in
      if case .replace = run { return }
      steps += 1
    }
    return steps > 64
  }

  /// A step of ``changes`` that an array can take at once.
  enum Run {
    /// Insertions at `index`, `index + 1`, …: the changes at `positions`.
    case insertions(index: Int, positions: Range<Int>)
    /// Removals of the elements at `range`, at one index or from the highest down.
    case removals(Range<Int>)
    case replace(index: Int, new: Element)
    case move(from: Int, to: Int)
  }

  /// Calls `body` with the changes in order, runs of insertions at consecutive indices
  /// and of removals of consecutive elements taken together.
  func forEachRun(_ body: (Run) -> Void) {
    var position = changes.startIndex
    while position < changes.endIndex {
      switch changes[position] {
      case .insert(let index, _):
        var end = position + 1
        while end < changes.endIndex, case .insert(index + (end - position), _) = changes[end] { end += 1 }
        body(.insertions(index: index, positions: position..<end))
        position = end
      case .remove(let index, _):
        // At one index (ascending elements), or from one index down.
        var end = position + 1
        var count = 1
        var lower = index
        if end < changes.endIndex, case .remove(let second, _) = changes[end], second == index || second == index - 1 {
          let step = second - index
          while end < changes.endIndex, case .remove(let next, _) = changes[end], next == index + step * count {
            count += 1
            end += 1
          }
          if step < 0 { lower = index - count + 1 }
        }
        body(.removals(lower..<(lower + count)))
        position = end
      case .replace(let index, _, let new):
        body(.replace(index: index, new: new))
        position += 1
      case .move(let from, let to, _):
        body(.move(from: from, to: to))
        position += 1
      }
    }
  }

  /// The number of elements of the array the changes apply to.
  var previousCount: Int {
    var count = array.count
    for change in changes {
      switch change {
      case .insert: count -= 1
      case .remove: count += 1
      case .replace, .move: break
      }
    }
    return count
  }

  /// The indices, in the old array, of the elements that were removed, replaced or
  /// moved; sorted ascending. Pass them to `deleteRows` / `deleteItems`.
  ///
  /// - Complexity: O(1) for a single change; otherwise O(*n* × *k*) for *n* elements
  ///   and *k* changes.
  public var removals: [Int] { summary.removals }

  /// The indices, in the new array, of the elements that were inserted, replaced or
  /// moved; sorted ascending. Pass them to `insertRows` / `insertItems`.
  ///
  /// - Complexity: O(1) for a single change; otherwise O(*n* × *k*) for *n* elements
  ///   and *k* changes.
  public var insertions: [Int] { summary.insertions }

  /// Whether the changeset has no changes.
  public var isEmpty: Bool { changes.isEmpty }

  /// Both summaries, computed by following every position of the old array through the
  /// changes: a position survives only if no change touched its element.
  var summary: (removals: [Int], insertions: [Int]) {
    if changes.count <= 1 {
      switch changes.first {
      case nil: return ([], [])
      case .insert(let index, _): return ([], [index])
      case .remove(let index, _): return ([index], [])
      case .replace(let index, _, _): return ([index], [index])
      case .move(let from, let to, _): return ([from], [to])
      }
    }
    var inserted = 0
    var removed = 0
    for change in changes {
      switch change {
      case .insert: inserted += 1
      case .remove: removed += 1
      case .replace, .move: break
      }
    }
    // The index in the old array of the element at each position, or -1 for an element
    // that is not an untouched one of the old array.
    var origins = Array(0..<(array.count - inserted + removed))
    var removals: [Int] = []
    if usesBlocks(count: origins.count) {
      var list = BlockList(origins)
      for change in changes {
        switch change {
        case .insert(let index, _): list.insert(-1, at: index)
        case .remove(let index, _):
          let origin = list.remove(at: index)
          if origin >= 0 { removals.append(origin) }
        case .replace(let index, _, _):
          if list[index] >= 0 { removals.append(list[index]) }
          list[index] = -1
        case .move(let from, let to, _):
          let origin = list.remove(at: from)
          if origin >= 0 { removals.append(origin) }
          list.insert(-1, at: to)
        }
      }
      origins = list.elements
    } else {
      forEachRun { run in
        switch run {
        case .insertions(let index, let positions):
          origins.insert(contentsOf: repeatElement(-1, count: positions.count), at: index)
        case .removals(let range):
          for origin in origins[range] where origin >= 0 { removals.append(origin) }
          origins.removeSubrange(range)
        case .replace(let index, _):
          if origins[index] >= 0 { removals.append(origins[index]) }
          origins[index] = -1
        case .move(let from, let to):
          let origin = origins.remove(at: from)
          if origin >= 0 { removals.append(origin) }
          origins.insert(-1, at: to)
        }
      }
    }
    removals.sort()
    let insertions = origins.indices.filter { origins[$0] < 0 }
    return (removals, insertions)
  }
}

extension ArrayChangeset: Sendable where Element: Sendable {}
extension ArrayChangeset: Equatable where Element: Equatable {
  /// Whether the two changesets have the same changes and the same resulting array.
  ///
  /// Whether a changeset was committed inside a transaction is not part of its value.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** A pure function of two values.
  /// - **Ordering, Reentrancy, Lifetime:** Not applicable.
  public static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.changes == rhs.changes && lhs.array == rhs.array
  }
}

extension ArrayChangeset: Hashable where Element: Hashable {
  /// Hashes the changes and the resulting array, as ``==(_:_:)`` compares them.
  ///
  /// ## Concurrency
  ///
  /// - **Thread safety:** A pure function of the value.
  /// - **Ordering, Reentrancy, Lifetime:** Not applicable.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(changes)
    hasher.combine(array)
  }
}
