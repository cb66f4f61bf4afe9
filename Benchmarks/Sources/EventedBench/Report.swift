// The table, the target check and the JSON file.

import Foundation

struct Row {
  let workload: Workload
  let cells: [Peer: Cell]

  var floor: Measured? { measured(.floor) }

  func measured(_ peer: Peer) -> Measured? {
    if case .measured(let value)? = cells[peer] { return value }
    return nil
  }

  /// Wall-clock ratio of `peer` to the floor.
  func ratio(_ peer: Peer) -> Double? {
    guard let value = measured(peer), let floor else { return nil }
    return value.wall / floor.wall
  }

  func cpuRatio(_ peer: Peer) -> Double? {
    guard let value = measured(peer), let floor, !value.cpu.isNaN else { return nil }
    return value.cpu / floor.cpu
  }
}

/// The rows that measure bytes in a child process: no time, so no CPU column.
let memoryRows: Set<String> = ["W6", "W6p", "W8", "W8e"]

struct TargetCheck: Codable {
  let workload: String
  let text: String
  let met: Bool?
}

func format(_ value: Double) -> String {
  switch abs(value) {
  case 1000...: String(format: "%.0f", value)
  case 100..<1000: String(format: "%.0f", value)
  case 10..<100: String(format: "%.1f", value)
  default: String(format: "%.2f", value)
  }
}

struct Report {
  let options: Options
  var rows: [Row] = []

  func row(_ id: String) -> Row? { rows.first { $0.workload.id == id } }

  func markdown() -> String {
    var lines: [String] = []
    let peers = options.peers
    lines.append("Wall clock: ratio to the floor, then the median in each row's unit.")
    lines.append("")
    lines.append("| Workload | " + peers.map(\.title).joined(separator: " | ") + " |")
    lines.append("|---|" + peers.map { _ in "---:|" }.joined())
    for row in rows {
      let cells = peers.map { peer -> String in
        switch row.cells[peer] {
        case .unavailable(let reason)?: return reason
        case .measured(let value)?:
          var text = (row.ratio(peer).map { String(format: "%.2f×", $0) } ?? "–") + " (" + format(value.wall)
          if memoryRows.contains(row.workload.id) { text += " B" }
          text += ")"
          if let lost = value.lost { text += lost == 0 ? ", 0 lost" : ", \(lost) lost" }
          if let warning = value.warning { text += " ⚠ \(warning)" }
          return text
        case nil: return "–"
        }
      }
      lines.append(
        "| \(row.workload.id) \(row.workload.title) (\(row.workload.unit)) | " + cells.joined(separator: " | ") + " |")
    }
    let cpuRows = rows.filter { !memoryRows.contains($0.workload.id) }
    if !cpuRows.isEmpty {
      lines.append("")
      lines.append(
        "CPU time (the measuring thread's; W5, W7 and W11: the whole process's): ratio to the floor, then the median.")
      lines.append("")
      lines.append("| Workload | " + peers.map(\.title).joined(separator: " | ") + " |")
      lines.append("|---|" + peers.map { _ in "---:|" }.joined())
      for row in cpuRows {
        let cells = peers.map { peer -> String in
          guard let value = row.measured(peer) else { return "–" }
          return (row.cpuRatio(peer).map { String(format: "%.2f×", $0) } ?? "–") + " (" + format(value.cpu) + ")"
        }
        lines.append("| \(row.workload.id) | " + cells.joined(separator: " | ") + " |")
      }
    }
    lines.append("")
    lines.append("Targets for Evented (ratios to the floor in this run):")
    lines.append("")
    for check in targets() {
      let mark = check.met.map { $0 ? "met" : "MISSED" } ?? "not measured"
      lines.append("- \(check.workload): \(check.text): **\(mark)**")
    }
    return lines.joined(separator: "\n")
  }

  /// The targets, checked for each Evented variant that ran: ratios to the floor of
  /// the same run (W6, W8, W8e: bytes; W7: to AsyncStream; the scaling and derived
  /// rows: to the variant's own cost in another row). A variant without a target for a
  /// row is not checked.
  func targets() -> [TargetCheck] {
    var checks: [TargetCheck] = []
    let variants: [Peer] = [.evented, .eventedActor].filter(options.peers.contains)
    func ratio(_ id: String, _ bounds: [Peer: Double]) {
      guard let row = row(id) else { return }
      for peer in variants {
        guard let bound = bounds[peer] else { continue }
        guard let ratio = row.ratio(peer) else {
          checks.append(TargetCheck(workload: id, text: "\(peer.title) ≤ \(bound) × floor", met: nil))
          continue
        }
        checks.append(
          TargetCheck(
            workload: id, text: "\(peer.title) \(String(format: "%.2f", ratio)) × floor, target ≤ \(bound)",
            met: ratio <= bound))
      }
    }
    func bytes(_ id: String, _ bounds: [Peer: Double]) {
      guard let row = row(id) else { return }
      for peer in variants {
        guard let bound = bounds[peer] else { continue }
        guard let value = row.measured(peer) else {
          checks.append(TargetCheck(workload: id, text: "\(peer.title) ≤ \(Int(bound)) B", met: nil))
          continue
        }
        checks.append(
          TargetCheck(
            workload: id, text: "\(peer.title) \(String(format: "%.1f", value.wall)) B, target ≤ \(Int(bound)) B",
            met: value.wall <= bound))
      }
    }
    ratio("W1", [.evented: 2, .eventedActor: 10])
    ratio("W1b", [.evented: 2.5])
    ratio("W2", [.evented: 2, .eventedActor: 10])
    ratio("W3", [.evented: 4, .eventedActor: 20])
    ratio("W3-100k", [.evented: 4])
    ratio("W4", [.evented: 1.3])
    if let row = row("W5") {
      for peer in variants {
        guard let ratio = row.ratio(peer) else { continue }
        let rate = 1 / ratio
        checks.append(
          TargetCheck(
            workload: "W5",
            text: "\(peer.title) aggregate rate \(String(format: "%.2f", rate)) × floor's, target ≥ 0.8",
            met: rate >= 0.8))
      }
    }
    bytes("W6", [.evented: 160, .eventedActor: 400])
    bytes("W8", [.evented: 128])
    bytes("W8e", [.evented: 96])
    bytes("W6p", [.eventedActor: 400])
    if let row = row("W7"), let stream = row.measured(.asyncStream) {
      for peer in variants {
        guard let value = row.measured(peer) else {
          if peer == .evented {
            checks.append(TargetCheck(workload: "W7", text: "\(peer.title) ≤ 1.1 × AsyncStream, 0 lost", met: nil))
          }
          continue
        }
        let ratio = value.wall / stream.wall
        let lost = value.lost ?? 0
        checks.append(
          TargetCheck(
            workload: "W7",
            text: "\(peer.title) \(String(format: "%.2f", ratio)) × AsyncStream, \(lost) lost; target ≤ 1.1, 0 lost",
            met: ratio <= 1.1 && lost == 0))
      }
    }
    /// `id` against the same variant's cost in `base`; not measured when `base` did not run.
    func relative(_ id: String, to base: String, _ bounds: [Peer: Double]) {
      guard let row = row(id) else { return }
      for peer in variants {
        guard let bound = bounds[peer], let value = row.measured(peer) else { continue }
        guard let cost = self.row(base)?.measured(peer) else {
          checks.append(TargetCheck(workload: id, text: "\(peer.title) ≤ \(bound) × its \(base) cost", met: nil))
          continue
        }
        let ratio = value.wall / cost.wall
        checks.append(
          TargetCheck(
            workload: id,
            text: "\(peer.title) \(String(format: "%.2f", ratio)) × its \(base) cost, target ≤ \(bound)",
            met: ratio <= bound))
      }
    }
    relative("W11-4", to: "W11-2", [.evented: 2])
    relative("W11-8", to: "W11-2", [.evented: 2])
    if let row = row("W11-8"), let openCombine = row.measured(.openCombine), let value = row.measured(.evented) {
      let ratio = value.wall / openCombine.wall
      checks.append(
        TargetCheck(
          workload: "W11-8",
          text: "Evented \(String(format: "%.2f", ratio)) × OpenCombine's, target ≤ 1", met: ratio <= 1))
    }
    relative("W2-10k", to: "W2", [.evented: 1.2, .eventedActor: 1.2])
    relative("W3-100k", to: "W3", [.evented: 1.2, .eventedActor: 1.2])
    relative("W1d", to: "W1b", [.evented: 3])
    relative("W1t", to: "W1t-plain", [.evented: 1])
    relative("W1t-10", to: "W1c", [.evented: 3])
    relative("W1r", to: "W1r-plain", [.evented: 2])
    return checks
  }

  func json() throws -> Data {
    struct CellJSON: Codable {
      var wallNanoseconds: Double?
      var cpuNanoseconds: Double?
      var ratio: Double?
      var cpuRatio: Double?
      var operationsPerSample: Int?
      var samples: Int?
      var lost: Int?
      var warning: String?
      var unavailable: String?
    }
    struct RowJSON: Codable {
      let id: String
      let title: String
      let unit: String
      let peers: [String: CellJSON]
    }
    struct ReportJSON: Codable {
      let date: String
      let repetitions: Int
      let sampleMilliseconds: UInt64
      let rows: [RowJSON]
      let targets: [TargetCheck]
    }
    let rowsJSON = rows.map { row in
      var peers: [String: CellJSON] = [:]
      for (peer, cell) in row.cells {
        switch cell {
        case .unavailable(let reason): peers[peer.rawValue] = CellJSON(unavailable: reason)
        case .measured(let value):
          peers[peer.rawValue] = CellJSON(
            wallNanoseconds: value.wall, cpuNanoseconds: value.cpu.isNaN ? nil : value.cpu, ratio: row.ratio(peer),
            cpuRatio: row.cpuRatio(peer), operationsPerSample: value.operationsPerSample, samples: value.samples,
            lost: value.lost, warning: value.warning)
        }
      }
      return RowJSON(id: row.workload.id, title: row.workload.title, unit: row.workload.unit, peers: peers)
    }
    let report = ReportJSON(
      date: ISO8601DateFormatter().string(from: Date()), repetitions: options.harness.repetitions,
      sampleMilliseconds: options.harness.sampleTarget / 1_000_000, rows: rowsJSON, targets: targets())
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return try encoder.encode(report)
  }
}
