// The sources a transaction wrote, found by identity (Transaction.swift).

/// Source identities each kept once, in the order they were first inserted: a list
/// searched from the end while it is short (a transaction usually writes a few
/// sources), with a hash set once it is longer.
@usableFromInline
struct IdentityList {
  @usableFromInline var keys: [ObjectIdentifier] = []
  /// Every key, once there are more than `linearLimit`.
  @usableFromInline var table: Set<ObjectIdentifier>?

  @inlinable static var linearLimit: Int { 16 }

  @inlinable init() {}

  /// Whether `key` is in the list.
  @inlinable func contains(_ key: ObjectIdentifier) -> Bool {
    if let table { return table.contains(key) }
    var position = keys.count
    while position > 0 {
      position -= 1
      if keys[position] == key { return true }
    }
    return false
  }

  /// Adds `key`, which is not in the list.
  @inlinable mutating func insert(_ key: ObjectIdentifier) {
    keys.append(key)
    if table != nil {
      table?.insert(key)
    } else if keys.count > Self.linearLimit {
      table = Set(keys)
    }
  }

  /// Removes every key, keeping the capacity. One at a time: the list is short, and
  /// `removeAll(keepingCapacity:)` goes through the general `replaceSubrange`.
  @inlinable mutating func removeAll() {
    while keys.popLast() != nil {}
    if table != nil { table = nil }
  }
}
