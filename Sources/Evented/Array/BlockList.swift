// A sequence stored in blocks of at most `2 × blockSize` elements, where `blockSize` is
// about √n (at least 256) for the n elements it starts with, so that inserting or
// removing at an index costs O(√n) (a walk over the block counts and a shift inside one
// block) instead of O(n). `ArrayChangeset` uses it to apply or summarize a changeset
// with many moves or scattered insertions and removals, as a shuffle's difference has.

/// A list with insertion and removal at an index in time proportional to the number of
/// blocks plus the block size.
struct BlockList<Element> {
  /// The elements, in order, in blocks that are never empty (unless the list is).
  private var blocks: [[Element]]
  /// Half the most elements a block holds.
  private let blockSize: Int

  init(_ elements: [Element]) {
    let blockSize = Swift.max(256, Int(Double(elements.count).squareRoot()))
    self.blockSize = blockSize
    blocks = stride(from: 0, to: elements.count, by: blockSize).map {
      Array(elements[$0..<Swift.min($0 + blockSize, elements.count)])
    }
    if blocks.isEmpty { blocks = [[]] }
  }

  /// The block holding `index`, and the index within it; an index equal to the count
  /// is the end of the last block.
  private func locate(_ index: Int) -> (block: Int, offset: Int) {
    var offset = index
    for block in blocks.indices {
      if offset < blocks[block].count || block == blocks.count - 1 { return (block, offset) }
      offset -= blocks[block].count
    }
    preconditionFailure("a block list always has a block")
  }

  subscript(index: Int) -> Element {
    get {
      let (block, offset) = locate(index)
      return blocks[block][offset]
    }
    set {
      let (block, offset) = locate(index)
      blocks[block][offset] = newValue
    }
  }

  mutating func insert(_ element: Element, at index: Int) {
    let (block, offset) = locate(index)
    blocks[block].insert(element, at: offset)
    if blocks[block].count > 2 * blockSize {
      let tail = Array(blocks[block][blockSize...])
      blocks[block].removeSubrange(blockSize...)
      blocks.insert(tail, at: block + 1)
    }
  }

  @discardableResult
  mutating func remove(at index: Int) -> Element {
    let (block, offset) = locate(index)
    let element = blocks[block].remove(at: offset)
    if blocks[block].isEmpty && blocks.count > 1 { blocks.remove(at: block) }
    return element
  }

  /// The elements, in order.
  var elements: [Element] { Array(blocks.joined()) }
}
