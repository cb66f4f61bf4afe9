// The changes that a whole-array assignment records.
//
// Equatable elements: the standard library's `CollectionDifference` (with moves
// inferred when the elements are also Hashable, as `inferringMoves()` needs),
// translated into ordered, index-relative changes. A difference's removals are
// offsets in the old array and its insertions offsets in the new one; applied as
// the standard library does (removals from the highest offset down, then insertions
// from the lowest up), every offset is also the index at the moment it applies. A
// removal and an insertion associated with each other become one `move`, made when the
// insertion's turn comes; until then the moved element stays where it was. Such waiting
// elements shift the positions after them, so with moves present the index of an
// insertion at final offset `n` is taken from the array being built: just after the
// element whose final offset is `n - 1` (every such element is already placed, since
// insertions go from the lowest offset up and the untouched elements never move).
//
// Other elements: every old element is removed, from the last one down, then every
// new element is inserted, from the first one up.

/// Ordered changes that turn `old` into `new`: a minimal difference.
///
/// - Complexity: The difference's cost (O(*n* × *d*) comparisons).
func assignmentChanges<Element: Equatable>(from old: [Element], to new: [Element]) -> [ArrayChange<Element>] {
  changes(from: old, applying: new.difference(from: old))
}

/// Ordered changes that turn `old` into `new`: a minimal difference, moves inferred.
///
/// - Complexity: The difference's cost (O(*n* × *d*) comparisons), plus O(*n*) per
///   move when there are moves.
func assignmentChanges<Element: Hashable>(from old: [Element], to new: [Element]) -> [ArrayChange<Element>] {
  changes(from: old, applying: new.difference(from: old).inferringMoves())
}

/// `difference`, computed from `old`, as ordered index-relative changes.
func changes<Element>(
  from old: [Element], applying difference: CollectionDifference<Element>
) -> [ArrayChange<Element>] {
  if difference.isEmpty { return [] }
  var removals: [(offset: Int, element: Element, isMove: Bool)] = []
  var insertions: [(offset: Int, element: Element, movedFrom: Int?)] = []
  for change in difference {
    switch change {
    case .remove(let offset, let element, let associated):
      removals.append((offset, element, associated != nil))
    case .insert(let offset, let element, let associated):
      insertions.append((offset, element, associated))
    }
  }
  removals.sort { $0.offset > $1.offset }
  insertions.sort { $0.offset < $1.offset }

  var changes: [ArrayChange<Element>] = []
  changes.reserveCapacity(removals.count + insertions.count)
  for removal in removals where !removal.isMove {
    changes.append(.remove(index: removal.offset, element: removal.element))
  }
  let hasMoves = insertions.contains { $0.movedFrom != nil }
  guard hasMoves else {
    for insertion in insertions {
      changes.append(.insert(index: insertion.offset, element: insertion.element))
    }
    return changes
  }

  // Each position of the array being built: the old offset of its element (-1 for an
  // inserted one) and its final offset (-1 for a moved element not yet moved).
  var slots = old.indices.map { Slot(origin: $0, final: -1) }
  let removedOffsets = Set(removals.map(\.offset))
  let insertedOffsets = Set(insertions.map(\.offset))
  var nextFinal = 0
  for origin in old.indices where !removedOffsets.contains(origin) {
    while insertedOffsets.contains(nextFinal) { nextFinal += 1 }
    slots[origin].final = nextFinal
    nextFinal += 1
  }
  for removal in removals where !removal.isMove {
    slots.remove(at: removal.offset)
  }
  func index(after final: Int) -> Int {
    guard final >= 0 else { return 0 }
    // Every final offset below the current insertion is placed already.
    return slots.firstIndex { $0.final == final }! + 1
  }
  for insertion in insertions {
    if let origin = insertion.movedFrom {
      let from = slots.firstIndex { $0.origin == origin && $0.final < 0 }!
      let slot = slots.remove(at: from)
      let to = index(after: insertion.offset - 1)
      slots.insert(Slot(origin: slot.origin, final: insertion.offset), at: to)
      changes.append(.move(from: from, to: to, element: old[origin]))
    } else {
      let at = index(after: insertion.offset - 1)
      slots.insert(Slot(origin: -1, final: insertion.offset), at: at)
      changes.append(.insert(index: at, element: insertion.element))
    }
  }
  return changes
}

/// Changes that remove every element of `old` (from the last down), then insert every
/// element of `new`.
func replacingChanges<Element>(from old: [Element], to new: [Element]) -> [ArrayChange<Element>] {
  var changes: [ArrayChange<Element>] = []
  changes.reserveCapacity(old.count + new.count)
  for index in old.indices.reversed() {
    changes.append(.remove(index: index, element: old[index]))
  }
  for (index, element) in new.enumerated() {
    changes.append(.insert(index: index, element: element))
  }
  return changes
}

/// One position of the array being built by `assignmentChanges`.
private struct Slot {
  var origin: Int
  var final: Int
}
