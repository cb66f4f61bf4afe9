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
//
// Committing (`ArrayProperty.assign`): the changes are computed against the array stored
// when the assignment began, read with its version; the commit takes the lock again and
// stores the new array only if the version is unchanged. Otherwise the changes are
// computed again against the newer array; after three tries the assignment commits as
// a replacement, computed under the lock without user code.

import Synchronization

/// Ordered changes that turn `old` into `new`: a minimal difference.
///
/// The difference is that of the two arrays' offsets, each pair of elements compared
/// in place: the standard library's difference of the elements themselves keeps
/// copies of them on its stack as it goes (more than 1 MB for 64 KB elements).
///
/// - Complexity: The difference's cost (O(*n* × *d*) comparisons).
@inlinable
func assignmentChanges<Element: Equatable>(from old: [Element], to new: [Element]) -> [ArrayChange<Element>] {
  let difference = old.withUnsafeBufferPointer { before in
    new.withUnsafeBufferPointer { after in
      after.indices.difference(from: before.indices) { was, now in before[was] == after[now] }
    }
  }
  return changes(from: old, to: new, applying: difference)
}

/// Ordered changes that turn `old` into `new`: a difference with moves inferred,
/// minimal in the cases the Arrays guide names.
///
/// - Complexity: O(*n* + *m*); see `hashedChanges`.
@inlinable
func assignmentChanges<Element: Hashable>(from old: [Element], to new: [Element]) -> [ArrayChange<Element>] {
  hashedChanges(from: old, to: new)
}

/// `difference`, the difference of the offsets of `old` and `new`, as ordered
/// index-relative changes of their elements.
@inlinable
func changes<Element>(
  from old: [Element], to new: [Element], applying difference: CollectionDifference<Int>
) -> [ArrayChange<Element>] {
  if difference.isEmpty { return [] }
  var removals: [Int] = []
  var insertions: [Int] = []
  for change in difference {
    switch change {
    case .remove(let offset, _, _): removals.append(offset)
    case .insert(let offset, _, _): insertions.append(offset)
    }
  }
  removals.sort(by: >)
  insertions.sort()
  var changes: [ArrayChange<Element>] = []
  changes.reserveCapacity(removals.count + insertions.count)
  for offset in removals { changes.append(.remove(index: offset, element: old[offset])) }
  for offset in insertions { changes.append(.insert(index: offset, element: new[offset])) }
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

extension ArrayProperty {
  /// Assigns `new`, recording the changes of ``assignment``.
  ///
  /// The changes are computed outside the lock, against the array stored when the
  /// assignment began. If another commit came first meanwhile, they are computed again
  /// against the newer array; after ``assignmentAttempts`` such tries, the assignment
  /// commits as a replacement, computed under the lock without comparing elements.
  @usableFromInline
  func assign(_ new: [Element]) {
    for _ in 0..<Self.assignmentAttempts {
      // Another thread's open transaction: diffed against what this thread reads, which
      // is no longer stored once it commits (the commit then waits for its end).
      let (base, version) = hub.storage.withLock { state in
        state.hiddenElements().map { ($0, state.visibleVersion(to: .max, current: 0)) }
          ?? (state.stored.share(), state.stored.version)
      }
      let changes = assignment(base, new)
      if commitAssignment(of: new, changes: changes, ifStillAt: version) { return }
    }
    commitAssignment(of: new, changes: nil, ifStillAt: nil)
  }

  /// How many times an assignment computes its changes before it commits as a
  /// replacement.
  static var assignmentAttempts: Int { 3 }

  /// Stores `new` and commits `changes` (or, if nil, a replacement of every element),
  /// unless `version` is given and the stored array is no longer the one it names.
  ///
  /// - Returns: false if the stored array changed since `version`.
  @discardableResult
  func commitAssignment(of new: [Element], changes: [ArrayChange<Element>]?, ifStillAt version: UInt64?) -> Bool {
    let token = hub.lockForCommit()
    let store = token.state
    if let version, store.pointee.stored.version != version {
      token.unlock()
      return false
    }
    let changes = changes ?? replacingChanges(from: store.pointee.stored.elements, to: new)
    guard !changes.isEmpty else {
      token.unlock()
      return true
    }
    let write = HubState.arrayWrite(store, hub)
    // `new` is its caller's too: the store is shared. The old array is released after
    // unlocking.
    var old = new
    swap(&old, &store.pointee.stored.elements)
    store.pointee.stored.version &+= 1
    store.pointee.stored.exposure.state = .shared
    if let write {
      write.changes.append(contentsOf: changes)
      token.unlock()
    } else if let recipients = store.pointee.recipientsOfCommit() {
      let changeset = ArrayChangeset(changes: changes, array: new)
      hub.commit(token, to: consume recipients) { _ in changeset }
    } else {
      token.unlock()
    }
    withExtendedLifetime(old) {}
    return true
  }
}
