import Evented
import Synchronization
import Testing

/// Keeps the README's example compiling and doing what it says.
@Suite struct ReadmeExampleTests {
  final class Profile: Sendable {
    let name = Property("")
    let didFail = EventSource<String>()
  }

  final class Printed: Sendable {
    let lines = Mutex<[String]>([])
  }

  @Test func readmeExampleDeliversTheCurrentValueThenChanges() {
    let printed = Printed()
    @Sendable func print(_ items: String...) { printed.lines.withLock { $0.append(items.joined(separator: " ")) } }

    // The README example, line for line.
    let profile = Profile()
    let token = profile.name.observe { name in print("name:", name) }
    profile.didFail.observe(with: token) { _, message in print("failed:", message) }
    profile.name.modify { $0 += "guest" }
    profile.didFail.send("offline")

    #expect(printed.lines.withLock { $0 } == ["name: ", "name: guest", "failed: offline"])
  }
}
