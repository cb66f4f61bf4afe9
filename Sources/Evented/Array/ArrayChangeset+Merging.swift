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
    let previousCount = previousCount
    if changes.count + newer.changes.count <= previousCount + newer.array.count {
      return ArrayChangeset(changes: changes + newer.changes, array: newer.array)
    }
    return ArrayChangeset(changes: replacingChanges(from: previousArray(), to: newer.array), array: newer.array)
  }

  /// The array this changeset applies to: its changes undone, last first, on ``array``.
  func previousArray() -> [Element] {
    let undone = changes.reversed().map { change -> ArrayChange<Element> in
      switch change {
      case .insert(let index, let element): .remove(index: index, element: element)
      case .remove(let index, let element): .insert(index: index, element: element)
      case .replace(let index, let old, let new): .replace(index: index, old: new, new: old)
      case .move(let from, let to, let element): .move(from: to, to: from, element: element)
      }
    }
    return ArrayChangeset(changes: undone, array: []).applying(to: array)
  }
}
