// An `ArrayProperty` driving a text table: the table keeps its own rows and applies each
// changeset's changes to them, the way a table view applies inserts, deletes and moves,
// then prints itself.
//
// Run: swift run --package-path Examples table

import Evented

struct Todo: Equatable, Sendable {
  var title: String
  var done = false
}

/// A text table bound to a list: a main-actor owner whose handler runs on the main queue.
@MainActor final class TextTable {
  private(set) var rows: [Todo] = []

  func bind(to list: ArrayProperty<Todo>) {
    rows = list.value
    render()
    list.observeChanges(with: self, on: .main) { table, changeset in table.apply(changeset) }
  }

  private func apply(_ changeset: ArrayChangeset<Todo>) {
    for change in changeset.changes {
      switch change {
      case .insert(let index, let task):
        rows.insert(task, at: index)
        print("  insert row \(index): \(task.title)")
      case .remove(let index, let task):
        rows.remove(at: index)
        print("  delete row \(index): \(task.title)")
      case .replace(let index, _, let new):
        rows[index] = new
        print("  reload row \(index): \(new.title)")
      case .move(let from, let to, let task):
        rows.remove(at: from)
        rows.insert(task, at: to)
        print("  move row \(from) to \(to): \(task.title)")
      }
    }
    precondition(rows == changeset.array, "the rows drifted from the array")
    render()
  }

  private func render() {
    print("  +----+---------------------+------+")
    for (index, task) in rows.enumerated() {
      let title = task.title.padding(to: 19)
      print("  | \(String(index).padding(to: 2)) | \(title) | \(task.done ? "done" : "    ") |")
    }
    print("  +----+---------------------+------+")
  }
}

extension String {
  func padding(to width: Int) -> String {
    count >= width ? String(prefix(width)) : self + String(repeating: " ", count: width - count)
  }
}

/// Lets the main queue deliver the changeset (top-level code is on the main actor).
func settle() async {
  try? await Task.sleep(for: .milliseconds(50))
}

let list = ArrayProperty([Todo(title: "Buy milk"), Todo(title: "Write docs")])
let table = TextTable()
print("initial")
table.bind(to: list)

print("append")
list.append(Todo(title: "Call Ada"))
await settle()

print("mark row 1 done")
list[1] = Todo(title: "Write docs", done: true)
await settle()

print("one batch: remove the first, insert at the top, move the last up")
list.batch { rows in
  rows.remove(at: 0)
  rows.insert(Todo(title: "Review PR"), at: 0)
  rows.move(from: rows.count - 1, to: 1)
}
await settle()

print("assign a new array: the changeset is a minimal diff")
list.value = [Todo(title: "Call Ada"), Todo(title: "Review PR"), Todo(title: "Ship it")]
await settle()
