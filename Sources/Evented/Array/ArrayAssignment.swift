// The changes that a whole-array assignment records. Each runs outside the property's
// lock, so the `==` and `hash(into:)` of elements never run under it.
//
// Hashable elements: `hashedChanges` (ArrayDifference.swift), linear in the lengths.
//
// Equatable elements: the standard library's `CollectionDifference`, the exact
// minimal difference (O((n + m) × d) comparisons for d inserts and removes),
// translated into ordered, index-relative changes. A difference's removals are offsets
// in the old array and its insertions offsets in the new one; applied as the standard
// library does (removals from the highest offset down, then insertions from the lowest
// up), every offset is also the index at the moment it applies.
//
// Other elements: every old element is removed, from the last one down, then every
// new element is inserted, from the first one up.

/// Ordered changes that turn `old` into `new`: a minimal difference.
///
/// - Complexity: The difference's cost (O(*n* × *d*) comparisons).
@inlinable
func assignmentChanges<Element: Equatable>(from old: [Element], to new: [Element]) -> [ArrayChange<Element>] {
  changes(from: old, applying: new.difference(from: old))
}

/// Ordered changes that turn `old` into `new`: a difference with moves inferred,
/// minimal in the cases the Arrays guide names.
///
/// - Complexity: O(*n* + *m*); see `hashedChanges`.
@inlinable
func assignmentChanges<Element: Hashable>(from old: [Element], to new: [Element]) -> [ArrayChange<Element>] {
  hashedChanges(from: old, to: new)
}

/// `difference`, computed from `old`, as ordered index-relative changes.
@inlinable
func changes<Element>(
  from old: [Element], applying difference: CollectionDifference<Element>
) -> [ArrayChange<Element>] {
  if difference.isEmpty { return [] }
  var removals: [(offset: Int, element: Element)] = []
  var insertions: [(offset: Int, element: Element)] = []
  for change in difference {
    switch change {
    case .remove(let offset, let element, _): removals.append((offset, element))
    case .insert(let offset, let element, _): insertions.append((offset, element))
    }
  }
  removals.sort { $0.offset > $1.offset }
  insertions.sort { $0.offset < $1.offset }
  var changes: [ArrayChange<Element>] = []
  changes.reserveCapacity(removals.count + insertions.count)
  for removal in removals { changes.append(.remove(index: removal.offset, element: removal.element)) }
  for insertion in insertions { changes.append(.insert(index: insertion.offset, element: insertion.element)) }
  return changes
}

/// Changes that remove every element of `old` (from the last down), then insert every
/// element of `new`.
@inlinable
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
