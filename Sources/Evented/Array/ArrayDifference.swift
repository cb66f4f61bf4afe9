// The difference that whole-array assignment records for Hashable elements, in time
// linear in the two arrays' lengths. It runs outside the property's lock.
//
// 1. The common prefix and suffix are set aside: most assignments change a few
//    elements of a long array.
// 2. Matching. Between them, a greedy shortest edit script (Myers) is tried first,
//    bounded both in edit distance (`maximumExactDistance`) and in comparisons (a
//    small multiple of the lengths). It finds the fewest inserts and removes.
//    Removed and inserted elements that are equal are then paired into moves.
// 3. If the bound is exceeded (many changes, a shuffle), elements are matched through
//    a hash table instead (Heckel's idea, as DifferenceKit and IGListKit use): the
//    k-th occurrence of an element in the old array is paired with its k-th
//    occurrence in the new one, unmatched old elements are removed and unmatched new
//    ones inserted. Of the pairs, the longest run in the same order in both arrays
//    (a longest increasing subsequence) stays in place and the others move. When no
//    element occurs twice this is again minimal; with repeated elements it may keep
//    fewer in place than possible (see the Arrays guide for the example).
// 4. Changes are emitted as the rest of ArrayProperty records them: removals from the
//    highest index down, then insertions and moves in the order of their final index.
//    Without moves every index is known at once. With moves, each element waits in its
//    old place until its turn, so the current index of a position is found with a
//    Fenwick tree over the positions in the order they hold during the changes.

/// Ordered changes that turn `old` into `new`: the fewest inserts and removes, with
/// equal removed and inserted elements paired into moves, when a bounded exact search
/// finds them; otherwise a hash-matched difference.
///
/// - Complexity: O(*n* + *m*) expected hashing and comparisons; O((*n* + *m*) log
///   (*n* + *m*)) more when elements change order.
@inlinable
func hashedChanges<Element: Hashable>(
  from old: [Element], to new: [Element], maximumExactDistance: Int = 128
) -> [ArrayChange<Element>] {
  var start = 0
  while start < old.count && start < new.count && old[start] == new[start] { start += 1 }
  var oldEnd = old.count
  var newEnd = new.count
  while oldEnd > start && newEnd > start && old[oldEnd - 1] == new[newEnd - 1] {
    oldEnd -= 1
    newEnd -= 1
  }
  if start == oldEnd && start == newEnd { return [] }
  var matching = Matching(old: old[start..<oldEnd], new: new[start..<newEnd])
  if !matching.matchExactly(maximumDistance: maximumExactDistance) {
    matching = Matching(old: old[start..<oldEnd], new: new[start..<newEnd])
    matching.matchByHashing()
  }
  return matching.changes(offset: start)
}

/// Which elements of the middle parts of two arrays are kept, moved, removed and
/// inserted.
@usableFromInline
struct Matching<Element: Hashable> {
  @usableFromInline let old: ArraySlice<Element>
  @usableFromInline let new: ArraySlice<Element>
  /// For each old element (by offset from `old.startIndex`), the offset of its partner
  /// in `new`, or -1 if it is removed.
  @usableFromInline var oldPartner: [Int]
  /// For each new element, the offset of its partner in `old`, or -1 if inserted.
  @usableFromInline var newPartner: [Int]
  /// For each new element, whether it stays in place (its partner is not moved).
  @usableFromInline var stays: [Bool]
  /// Whether some pair is a move.
  @usableFromInline var hasMoves = false

  @inlinable
  init(old: ArraySlice<Element>, new: ArraySlice<Element>) {
    self.old = old
    self.new = new
    oldPartner = Array(repeating: -1, count: old.count)
    newPartner = Array(repeating: -1, count: new.count)
    stays = Array(repeating: false, count: new.count)
  }

  // MARK: Exact, bounded

  /// Finds a shortest edit script if it has at most `maximumDistance` inserts and
  /// removes and is found within a budget of comparisons linear in the lengths; pairs
  /// equal removed and inserted elements into moves.
  ///
  /// - Returns: false if the bounds were exceeded (nothing is matched then).
  @inlinable
  mutating func matchExactly(maximumDistance: Int) -> Bool {
    let n = old.count
    let m = new.count
    let limit = Swift.min(maximumDistance, n + m)
    var budget = 2 * (n + m) + limit * limit
    let center = limit + 1
    // `furthest[center + k]`: the furthest old offset reached on diagonal k.
    var furthest = [Int](repeating: 0, count: 2 * limit + 3)
    var trace: [[Int]] = []
    var distance = -1
    search: for d in 0...limit {
      trace.append(furthest)
      for k in stride(from: -d, through: d, by: 2) {
        var x =
          k == -d || (k != d && furthest[center + k - 1] < furthest[center + k + 1])
          ? furthest[center + k + 1] : furthest[center + k - 1] + 1
        var y = x - k
        while x < n && y < m && old[old.startIndex + x] == new[new.startIndex + y] {
          x += 1
          y += 1
          budget -= 1
        }
        furthest[center + k] = x
        if x >= n && y >= m {
          // Only (n, m) itself ends a path; anything else is left to hashing.
          guard x == n && y == m else { return false }
          distance = d
          break search
        }
      }
      budget -= 2 * d + 1
      if budget < 0 { return false }
    }
    guard distance >= 0 else { return false }
    // Walk back along the path, pairing the elements of every diagonal step.
    var x = n
    var y = m
    for d in stride(from: distance, through: 1, by: -1) {
      let previous = trace[d]
      let k = x - y
      let down = k == -d || (k != d && previous[center + k - 1] < previous[center + k + 1])
      let previousK = down ? k + 1 : k - 1
      let previousX = previous[center + previousK]
      let previousY = previousX - previousK
      // The edit of round d: an insertion (down) or a removal (right).
      let editX = down ? previousX : previousX + 1
      let editY = down ? previousY + 1 : previousY
      while x > editX && y > editY {
        x -= 1
        y -= 1
        pair(x, y)
      }
      x = previousX
      y = previousY
    }
    while x > 0 && y > 0 {
      x -= 1
      y -= 1
      pair(x, y)
    }
    pairRemovalsWithInsertions()
    return true
  }

  /// Pairs `old` offset `x` with `new` offset `y`, in place.
  @inlinable
  mutating func pair(_ x: Int, _ y: Int) {
    oldPartner[x] = y
    newPartner[y] = x
    stays[y] = true
  }

  /// Pairs each inserted element with the first removed one equal to it, as a move.
  @inlinable
  mutating func pairRemovalsWithInsertions() {
    var removed: [Element: [Int]] = [:]
    for offset in oldPartner.indices.reversed() where oldPartner[offset] < 0 {
      removed[old[old.startIndex + offset], default: []].append(offset)
    }
    guard !removed.isEmpty else { return }
    for offset in newPartner.indices where newPartner[offset] < 0 {
      guard let from = removed[new[new.startIndex + offset]]?.popLast() else { continue }
      oldPartner[from] = offset
      newPartner[offset] = from
      hasMoves = true
    }
  }

  // MARK: Hashed

  /// Pairs the k-th occurrence of each element in `old` with its k-th occurrence in
  /// `new`; keeps in place a longest run of pairs in the same order in both.
  @inlinable
  mutating func matchByHashing() {
    // For each element, the first unpaired old offset; `nextOccurrence` chains the rest.
    var firstOccurrence: [Element: Int] = [:]
    firstOccurrence.reserveCapacity(old.count)
    var nextOccurrence = [Int](repeating: -1, count: old.count)
    for offset in old.indices.reversed() {
      let relative = offset - old.startIndex
      nextOccurrence[relative] = firstOccurrence.updateValue(relative, forKey: old[offset]) ?? -1
    }
    var inOrder = true
    var last = -1
    for offset in new.indices {
      let relative = offset - new.startIndex
      guard let index = firstOccurrence.index(forKey: new[offset]) else { continue }
      let partner = firstOccurrence.values[index]
      guard partner >= 0 else { continue }
      firstOccurrence.values[index] = nextOccurrence[partner]
      oldPartner[partner] = relative
      newPartner[relative] = partner
      if partner < last { inOrder = false }
      last = partner
    }
    if inOrder {
      for offset in newPartner.indices where newPartner[offset] >= 0 { stays[offset] = true }
    } else {
      keepLongestIncreasingRun()
    }
  }

  /// Marks as staying a longest sequence of pairs whose old offsets increase with their
  /// new offsets; every other pair becomes a move.
  @inlinable
  mutating func keepLongestIncreasingRun() {
    // Patience sorting: `tails[l]` is the new offset ending the best run of length l + 1.
    var tails: [Int] = []
    var predecessor = [Int](repeating: -1, count: new.count)
    for offset in newPartner.indices where newPartner[offset] >= 0 {
      let key = newPartner[offset]
      var low = 0
      var high = tails.count
      while low < high {
        let middle = (low + high) / 2
        if newPartner[tails[middle]] < key { low = middle + 1 } else { high = middle }
      }
      predecessor[offset] = low > 0 ? tails[low - 1] : -1
      if low == tails.count { tails.append(offset) } else { tails[low] = offset }
    }
    var offset = tails.last ?? -1
    while offset >= 0 {
      stays[offset] = true
      offset = predecessor[offset]
    }
    hasMoves = true
  }

  // MARK: Changes

  /// The changes, with every index moved up by `offset` (the common prefix).
  @inlinable
  func changes(offset: Int) -> [ArrayChange<Element>] {
    var changes: [ArrayChange<Element>] = []
    for index in oldPartner.indices.reversed() where oldPartner[index] < 0 {
      changes.append(.remove(index: offset + index, element: old[old.startIndex + index]))
    }
    guard hasMoves else {
      for index in newPartner.indices where newPartner[index] < 0 {
        changes.append(.insert(index: offset + index, element: new[new.startIndex + index]))
      }
      return changes
    }
    // Positions in the order they hold while the changes apply: between two staying
    // elements, first the old places of the elements that move away from there, then
    // the new places of the elements inserted or moved there, then the next staying
    // element.
    var sourcePosition = [Int](repeating: -1, count: old.count)
    var targetPosition = [Int](repeating: -1, count: new.count)
    var occupied: [Bool] = []
    occupied.reserveCapacity(old.count + new.count)
    var oldOffset = 0
    var gapStart = 0
    for newOffset in 0...new.count {
      let isEnd = newOffset == new.count
      guard isEnd || stays[newOffset] else { continue }
      let oldLimit = isEnd ? old.count : newPartner[newOffset]
      while oldOffset < oldLimit {
        if oldPartner[oldOffset] >= 0 {
          sourcePosition[oldOffset] = occupied.count
          occupied.append(true)
        }
        oldOffset += 1
      }
      for target in gapStart..<newOffset {
        targetPosition[target] = occupied.count
        occupied.append(false)
      }
      if !isEnd {
        targetPosition[newOffset] = occupied.count
        occupied.append(true)
        oldOffset += 1
        gapStart = newOffset + 1
      }
    }
    var counts = FenwickTree(occupied)
    for index in newPartner.indices where !stays[index] {
      let element = new[new.startIndex + index]
      let target = targetPosition[index]
      let from = newPartner[index]
      if from < 0 {
        changes.append(.insert(index: offset + counts.count(before: target), element: element))
      } else {
        let source = sourcePosition[from]
        let fromIndex = counts.count(before: source)
        counts.add(-1, at: source)
        let toIndex = counts.count(before: target)
        changes.append(.move(from: offset + fromIndex, to: offset + toIndex, element: old[old.startIndex + from]))
      }
      counts.add(1, at: target)
    }
    return changes
  }
}
