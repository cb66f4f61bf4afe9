// A Fenwick (binary indexed) tree over positions that are occupied or free: the
// difference of Hashable elements (ArrayDifference.swift) uses it to find the current
// index of a position while moves and insertions fill the array.

/// Counts of occupied positions, with prefix sums in O(log n).
@usableFromInline
struct FenwickTree {
  @usableFromInline var tree: [Int]

  /// A tree over `occupied.count` positions, each counting 1 if occupied; O(n).
  @inlinable
  init(_ occupied: [Bool]) {
    tree = [Int](repeating: 0, count: occupied.count + 1)
    for index in occupied.indices {
      let node = index + 1
      tree[node] += occupied[index] ? 1 : 0
      let parent = node + (node & -node)
      if parent < tree.count { tree[parent] += tree[node] }
    }
  }

  /// Adds `delta` to the count of `position`.
  @inlinable
  mutating func add(_ delta: Int, at position: Int) {
    var node = position + 1
    while node < tree.count {
      tree[node] += delta
      node += node & -node
    }
  }

  /// The number of occupied positions before `position`.
  @inlinable
  func count(before position: Int) -> Int {
    var node = position
    var sum = 0
    while node > 0 {
      sum += tree[node]
      node -= node & -node
    }
    return sum
  }
}
