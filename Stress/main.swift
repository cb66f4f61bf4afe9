// evented-stress: runs the stress scenarios of Evented and exits non-zero if any
// invariant broke or a scenario stopped making progress.
//
//   swift run -c release evented-stress [--seconds S] [--threads N] [--scenario NAME]
//                                        [--seed X] [--plant BUG]

import Dispatch

#if FaultInjection
  @_spi(FaultInjection) import Evented
  @_spi(FaultInjection) import StressKit
#else
  import Evented
  import StressKit
#endif

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

let usage = """
  usage: evented-stress [--seconds S] [--threads N] [--scenario NAME]... [--seed X] [--plant BUG]

    --seconds S      time for all selected scenarios together (default 60)
    --threads N      worker threads per scenario (default 4 × cores = \(4 * processorCount()))
    --scenario NAME  run only this scenario; repeat or separate with commas
    --seed X         seed of the random choices (default: a fresh one, printed)
    --plant BUG      plant a known bug to prove the suite catches it (a build with
                     --traits FaultInjection only): \(plantableBugs)
    --list           list the scenarios
    --misuse NAME    commit a misuse that must stop the program with a message
                     containing the text `--misuse-list` prints beside NAME
    --misuse-list    list the misuses, a name and its expected text per line

  Exit status: 0 when every invariant held, 1 on any violation, 2 when a scenario
  made no progress for 10 s (deadlock), 64 on a usage error.

  """

/// The bugs `--plant` takes in this build.
var plantableBugs: String {
  #if FaultInjection
    FaultInjection.Bug.allCases.map { "\($0)" }.joined(separator: ", ")
  #else
    "none in this build"
  #endif
}

/// Standard error, unbuffered.
struct StandardError: TextOutputStream {
  mutating func write(_ string: String) {
    var string = string
    string.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
  }
}

func fail(_ message: String) -> Never {
  var standardError = StandardError()
  print("evented-stress: \(message)\n\n\(usage)", terminator: "", to: &standardError)
  exit(64)
}

var options = StressOptions()
var arguments = CommandLine.arguments.dropFirst()
@MainActor func value(for flag: String) -> String {
  guard let value = arguments.popFirst() else { fail("\(flag) needs a value") }
  return value
}
let names = StressSuite.catalog.map(\.name)
while let argument = arguments.popFirst() {
  switch argument {
  case "--seconds":
    guard let seconds = Double(value(for: argument)), seconds > 0 else { fail("--seconds takes a positive number") }
    options.seconds = seconds
  case "--threads":
    guard let threads = Int(value(for: argument)), threads > 0 else { fail("--threads takes a positive integer") }
    options.threads = threads
  case "--scenario":
    for name in value(for: argument).split(separator: ",").map(String.init) {
      guard names.contains(name) else { fail("unknown scenario \(name); one of: \(names.joined(separator: ", "))") }
      options.scenarios.append(name)
    }
  case "--seed":
    guard let seed = UInt64(value(for: argument)) else { fail("--seed takes an unsigned integer") }
    options.seed = seed
  case "--plant":
    let name = value(for: argument)
    #if FaultInjection
      guard let bug = FaultInjection.Bug.allCases.first(where: { "\($0)" == name }) else { fail("unknown bug \(name)") }
      options.plant = bug
    #else
      fail(
        "--plant \(name) needs a build with the FaultInjection trait: "
          + "swift run -c release --traits FaultInjection evented-stress --plant \(name)")
    #endif
  case "--misuse":
    commitMisuse(named: value(for: argument))
  case "--misuse-list":
    for misuse in misuses { print("\(misuse.name)\t\(misuse.expected)") }
    exit(0)
  case "--list":
    for (name, summary) in StressSuite.catalog { print(name.padding(18) + summary) }
    exit(0)
  case "--help", "-h":
    print(usage, terminator: "")
    exit(0)
  default:
    fail("unknown option \(argument)")
  }
}

// The scenarios run on a thread of their own, while the main thread serves the main
// queue, where the handlers that run on the main actor go.
let suiteOptions = options
DispatchQueue.global().async {
  let reports = StressSuite.run(suiteOptions)
  exit(reports.contains { $0.violations > 0 } ? 1 : 0)
}
dispatchMain()

extension String {
  fileprivate func padding(_ width: Int) -> String {
    self + String(repeating: " ", count: max(1, width - count))
  }
}
