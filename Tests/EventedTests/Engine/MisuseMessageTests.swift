// Misuse stops the program with a message naming the mistake. Each misuse runs in a
// child process (`evented-stress --misuse NAME`), since it ends the process; the test
// checks the message the child leaves on standard error. CI runs the same check
// against the release build, where a `precondition` would lose its text.

import Foundation
import Testing

@Suite(.serialized) struct MisuseMessageTests {
  /// The misuses `evented-stress` knows, with the text each message must contain.
  static let misuses: [(name: String, expected: String)] = {
    guard let executable = StressExecutable.url,
      let (_, output, _) = try? runChild(executable, ["--misuse-list"])
    else { return [] }
    return output.split(separator: "\n").compactMap { line in
      let fields = line.split(separator: "\t", maxSplits: 1)
      return fields.count == 2 ? (String(fields[0]), String(fields[1])) : nil
    }
  }()

  @Test func everyMisuseIsListed() {
    #expect(
      Set(Self.misuses.map(\.name)) == [
        "modify-reads-itself", "modify-cycle-across-sources", "transaction-and-modify-wait-for-each-other",
        "transaction-read-and-modify-wait-for-each-other", "transactions-wait-for-each-other",
        "cancel-inside-modify-while-handler-waits", "transaction-cancels-a-handler-waiting-for-it",
        "backlog-limit-zero", "buffering-limit-negative",
        "two-tasks-iterate-one-sequence", "array-index-out-of-range",
        "array-range-out-of-range-in-batch", "changeset-applied-to-wrong-array",
      ])
  }

  @Test(arguments: MisuseMessageTests.misuses.map(\.name))
  func misuseStopsWithAMessageNamingIt(_ name: String) throws {
    let executable = try #require(
      StressExecutable.url, "evented-stress is not built beside the test bundle; run `swift build` first")
    let expected = try #require(Self.misuses.first { $0.name == name }?.expected)
    // The message is printed before the runtime's crash backtrace; the backtracer can
    // deadlock against Thread Sanitizer's fork handling in a multithreaded crash.
    let (status, _, standardError) = try runChild(
      executable, ["--misuse", name], environment: ["SWIFT_BACKTRACE": "enable=no"])
    // A nil status was collected by another wait of this process; the message decides.
    #expect(
      status != 0 && status != 3, "exit status \(String(describing: status)): the misuse did not stop the program")
    #expect(standardError.contains(expected), "standard error:\n\(standardError)")
  }
}
