// The suite: the list of scenarios, the loop that runs them one after another with a
// share of the time budget each, the watchdog, and the report lines.

import Synchronization

#if FaultInjection
  @_spi(FaultInjection) import Evented
#else
  import Evented
#endif

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// How to run the suite.
public struct StressOptions: Sendable {
  /// The time budget for all selected scenarios together, in seconds.
  public var seconds: Double = 60
  /// Worker threads per scenario; contention needs more threads than cores.
  public var threads: Int = 4 * processorCount()
  /// Names of the scenarios to run; empty runs all.
  public var scenarios: [String] = []
  /// The seed of the random choices; a fresh one when nil.
  public var seed: UInt64?
  #if FaultInjection
    /// A bug to plant in Evented, to prove that the suite catches it.
    @_spi(FaultInjection) public var plant: FaultInjection.Bug?
  #endif
  /// Seconds without progress after which a scenario counts as deadlocked.
  public var watchdogSeconds: Double = 10
  /// Whether to print anything; tests run quietly.
  public var printsReport = true

  public init() {}

  /// ", planted bug NAME" when a bug is planted, else nothing.
  var plantedDescription: String {
    #if FaultInjection
      plant.map { ", planted bug \($0)" } ?? ""
    #else
      ""
    #endif
  }
}

/// The outcome of one scenario.
public struct ScenarioReport: Sendable {
  /// The scenario's name.
  public let name: String
  /// Calls into Evented plus handler invocations.
  public let operations: Int
  /// Broken invariants.
  public let violations: Int
  /// Seconds the scenario ran.
  public let elapsed: Double
  /// The first few violation messages.
  public let messages: [String]
  /// Why the scenario did not run, if it did not.
  public let skipped: String?
}

/// A scenario: a name, what it checks, and the code that runs it.
struct Scenario: Sendable {
  let name: String
  let summary: String
  /// Why it cannot run in this build, or nil.
  let unavailable: String?
  let body: @Sendable (ScenarioRun) -> Void
}

/// The stress suite of `evented-stress`.
public enum StressSuite {
  /// Every scenario, in the order they run.
  static let scenarios: [Scenario] = [
    ownerChurn,
    cancelRace,
    reentrancyStorm,
    writers,
    derived,
    transactions,
    overload,
    asyncConsumers,
    actors,
    actorOverload,
    arrays,
    observation,
  ]

  /// The names and one-line summaries of the scenarios.
  public static var catalog: [(name: String, summary: String)] {
    scenarios.map { ($0.name, $0.summary) }
  }

  /// Runs the selected scenarios, printing one line each and a summary unless told not
  /// to. A scenario that makes no progress for `watchdogSeconds` ends the process with
  /// status 2 after printing where its threads were.
  ///
  /// - Returns: one report per selected scenario.
  public static func run(_ options: StressOptions) -> [ScenarioReport] {
    let selected = options.scenarios.isEmpty ? scenarios : scenarios.filter { options.scenarios.contains($0.name) }
    let runnable = selected.filter { $0.unavailable == nil }.count
    let share = options.seconds / Double(max(runnable, 1))
    let seed = options.seed ?? (now() &* 0x9E37_79B9_7F4A_7C15)
    baseSeed.store(seed, ordering: .relaxed)
    let out = Output(enabled: options.printsReport)
    out.line(
      "evented-stress: \(runnable) scenarios, \(options.threads) threads, \(format(options.seconds)) s, "
        + "seed \(seed)" + options.plantedDescription)
    #if FaultInjection
      FaultInjection.planted = options.plant
      defer { FaultInjection.planted = nil }
    #endif
    let watchdog = Watchdog.start(seconds: options.watchdogSeconds, output: out)

    var reports: [ScenarioReport] = []
    for (index, scenario) in selected.enumerated() {
      if let reason = scenario.unavailable {
        let report = ScenarioReport(
          name: scenario.name, operations: 0, violations: 0, elapsed: 0, messages: [], skipped: reason)
        out.line(pad(scenario.name) + "skipped: \(reason)")
        reports.append(report)
        continue
      }
      let run = ScenarioRun(
        id: watchdog.nextRunID(), name: scenario.name, threads: options.threads,
        budget: UInt64(share * 1e9), seed: seed &+ UInt64(index) &* 0xD1B5_4A32_D192_ED03)
      let before = publishedOperations()
      watchdog.watch(run, operationsBefore: before)
      scenario.body(run)
      run.coordinate(.done)
      watchdog.watch(nil, operationsBefore: 0)
      let report = ScenarioReport(
        name: scenario.name, operations: publishedOperations() - before, violations: run.violations,
        elapsed: Double(now() - run.started) / 1e9, messages: run.firstMessages, skipped: nil)
      out.line(describe(report))
      if scenario.name == overload.name { out.line("    " + overloadFigures.withLock { $0 }) }
      if scenario.name == actorOverload.name { out.line("    " + actorOverloadFigures.withLock { $0 }) }
      for message in report.messages { out.line("    violation: \(message)") }
      reports.append(report)
    }
    watchdog.finish()
    let ran = reports.filter { $0.skipped == nil }
    let failed = ran.filter { $0.violations > 0 }.count
    let operations = ran.reduce(0) { $0 + $1.operations }
    let violations = ran.reduce(0) { $0 + $1.violations }
    let elapsed = ran.reduce(0) { $0 + $1.elapsed }
    out.line(
      "summary: \(ran.count - failed) passed, \(failed) failed, \(reports.count - ran.count) skipped; "
        + "\(grouped(operations)) operations, \(violations) violations, \(format(elapsed)) s")
    return reports
  }

  /// The report line of one scenario.
  static func describe(_ report: ScenarioReport, live: Bool = false) -> String {
    pad(report.name) + "operations " + pad(grouped(report.operations), 13, right: true)
      + "  violations \(report.violations)  " + format(report.elapsed) + " s" + (live ? " …" : "")
  }
}

func pad(_ text: String, _ width: Int = 18, right: Bool = false) -> String {
  let fill = String(repeating: " ", count: max(0, width - text.count))
  return right ? fill + text : text + fill
}

func grouped(_ n: Int) -> String {
  var digits = Array(String(n))
  var i = digits.count - 3
  while i > 0 {
    digits.insert(",", at: i)
    i -= 3
  }
  return String(digits)
}

func format(_ seconds: Double) -> String {
  let tenths = Int((seconds * 10).rounded())
  return "\(tenths / 10).\(tenths % 10)"
}

/// Writes report lines to standard output; on a terminal, also a live line that the
/// next line replaces.
final class Output: Sendable {
  let enabled: Bool
  let isTerminal: Bool
  private let lock = Guarded(())

  init(enabled: Bool) {
    self.enabled = enabled
    isTerminal = isatty(1) == 1
  }

  /// Prints a whole line, replacing the live line if there is one.
  func line(_ text: String) {
    guard enabled else { return }
    write((isTerminal ? "\r\u{1B}[2K" : "") + text + "\n")
  }

  /// Replaces the live line; does nothing when output is not a terminal.
  func live(_ text: String) {
    guard enabled, isTerminal else { return }
    write("\r\u{1B}[2K" + text)
  }

  /// Prints even when the report is off (for the watchdog, to standard error).
  func alarm(_ text: String) {
    lock.withLock { _ in writeAll(2, text + "\n") }
  }

  private func write(_ text: String) {
    lock.withLock { _ in writeAll(1, text) }
  }
}
