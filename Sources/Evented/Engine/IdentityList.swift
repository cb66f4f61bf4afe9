// The sources a transaction wrote, found by identity (Transaction.swift).

/// Source identities each kept once with an index, in the order they were first
/// inserted: a list searched from the end while it is short (a transaction usually
/// writes a few sources), with a hash index once it is longer.
@usableFromInline
struct IdentityList {
  @usableFromInline var keys: [ObjectIdentifier] = []
  @usableFromInline var indices: [Int] = []
  /// Every key's index, once there are more than `linearLimit`.
  @usableFromInline var table: [ObjectIdentifier: Int]?

  @inlinable static var linearLimit: Int { 16 }

  @inlinable init() {}

  /// Whether `key` is in the list.
  @inlinable func contains(_ key: ObjectIdentifier) -> Bool {
    index(of: key) != nil
  }

  /// The index kept for `key`, if it is in the list.
  @inlinable func index(of key: ObjectIdentifier) -> Int? {
    if let table { return table[key] }
    var position = keys.count
    while position > 0 {
      position -= 1
      if keys[position] == key { return indices[position] }
    }
    return nil
  }

  /// Adds `key`, which is not in the list, with `index`.
  @inlinable mutating func insert(_ key: ObjectIdentifier, at index: Int) {
    keys.append(key)
    indices.append(index)
    if table != nil {
      table?[key] = index
    } else if keys.count > Self.linearLimit {
      table = Dictionary(uniqueKeysWithValues: zip(keys, indices))
    }
  }

  /// Removes every key, keeping the capacity. One at a time: the list is short, and
  /// `removeAll(keepingCapacity:)` goes through the general `replaceSubrange`.
  @inlinable mutating func removeAll() {
    while keys.popLast() != nil {}
    while indices.popLast() != nil {}
    if table != nil { table = nil }
  }

  /// Keeps the keys of `keys` (nil for no source), each at its position.
  @usableFromInline mutating func reindex(_ keys: [ObjectIdentifier?]) {
    self = IdentityList()
    for (index, key) in keys.enumerated() {
      if let key { insert(key, at: index) }
    }
  }
}
