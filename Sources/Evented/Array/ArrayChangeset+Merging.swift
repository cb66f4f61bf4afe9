// State coalesces (Mailbox.swift): the changesets waiting for an observer on a slow
// queue merge into one, which applies to the array that observer received last and
// never holds more changes than a replacement of the whole array.

extension ArrayChangeset {
  /// This changeset and then `newer`, as one: from the array before this one to
  /// `newer.array`. Its changes are this one's followed by `newer`'s, unless they would
  /// outnumber a replacement of the whole array (every element of the array before
  /// removed, every element of `newer.array` inserted); then it is that replacement.
  ///
  /// - Complexity: O(*k*) for *k* changes in all; a replacement also costs what
  ///   ``applied(to:)`` costs for this changeset's changes, undone.
  func merged(with newer: Self) -> Self {
    let concatenated = ArrayChangeset(changes: changes + newer.changes, array: newer.array)
    // Changesets that do not chain (delivered out of order, which only a planted bug
    // does) are concatenated as they are: the observer finds the misfit, nothing traps.
    guard changes.count + newer.changes.count > previousCount + newer.array.count,
      array.count == newer.previousCount, let previous = previousArray()
    else { return concatenated }
    return ArrayChangeset(changes: replacingChanges(from: previous, to: newer.array), array: newer.array)
  }

  /// The array this changeset applies to: its changes undone, last first, on ``array``;
  /// nil if they do not fit it (a changeset merged from ones that did not chain).
  func previousArray() -> [Element]? {
    var count = array.count
    var undone: [ArrayChange<Element>] = []
    undone.reserveCapacity(changes.count)
    for change in changes.reversed() {
      switch change {
      case .insert(let index, let element):
        guard index >= 0 && index < count else { return nil }
        count -= 1
        undone.append(.remove(index: index, element: element))
      case .remove(let index, let element):
        guard index >= 0 && index <= count else { return nil }
        count += 1
        undone.append(.insert(index: index, element: element))
      case .replace(let index, let old, let new):
        guard index >= 0 && index < count else { return nil }
        undone.append(.replace(index: index, old: new, new: old))
      case .move(let from, let to, let element):
        guard from >= 0 && from < count && to >= 0 && to < count else { return nil }
        undone.append(.move(from: to, to: from, element: element))
      }
    }
    return ArrayChangeset(changes: undone, array: []).applying(to: array)
  }
}
