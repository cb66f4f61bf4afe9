// Checks shared by the ArrayProperty tests: what every changeset must satisfy.

import Evented
import Testing

/// Records the changesets an `ArrayProperty` delivers, one subscription's worth.
final class ChangesetLog<Element: Sendable>: Sendable {
  private let recorder = Recorder<ArrayChangeset<Element>>()
  private let subscription: Subscription

  init(_ property: ArrayProperty<Element>) {
    let recorder = recorder
    subscription = property.observeChanges { recorder.append($0) }
  }

  var changesets: [ArrayChangeset<Element>] { recorder.values }

  func cancel() { subscription.cancel() }
}

extension Array {
  /// The elements not at `offsets`.
  func removing(offsets: [Int]) -> [Element] {
    let skipped = Set(offsets)
    return indices.filter { !skipped.contains($0) }.map { self[$0] }
  }
}

/// Whether `changeset`, committed against `old`, is consistent: its changes applied to
/// `old` give its array, and its summaries name every touched element and only those.
///
/// - Returns: a description of the first problem, or nil.
func problem<Element: Equatable>(with changeset: ArrayChangeset<Element>, from old: [Element]) -> String? {
  let new = changeset.array
  if changeset.applied(to: old) != new { return "the changes applied to \(old) do not give \(new)" }
  let removals = changeset.removals
  let insertions = changeset.insertions
  if removals != removals.sorted() || Set(removals).count != removals.count { return "removals \(removals) unsorted" }
  if insertions != insertions.sorted() || Set(insertions).count != insertions.count {
    return "insertions \(insertions) unsorted"
  }
  if !removals.allSatisfy(old.indices.contains) { return "removals \(removals) outside the old array" }
  if !insertions.allSatisfy(new.indices.contains) { return "insertions \(insertions) outside the new array" }
  if old.removing(offsets: removals) != new.removing(offsets: insertions) {
    return "the untouched elements differ: removals \(removals), insertions \(insertions), \(old) -> \(new)"
  }
  return nil
}

/// Expects `changeset`, committed against `old`, to be consistent.
func expectConsistent<Element: Equatable>(
  _ changeset: ArrayChangeset<Element>, from old: [Element], sourceLocation: SourceLocation = #_sourceLocation
) {
  if let problem = problem(with: changeset, from: old) {
    Issue.record(Comment(rawValue: problem), sourceLocation: sourceLocation)
  }
}
