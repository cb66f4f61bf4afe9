// swift-tools-version:6.2
import PackageDescription

let package = Package(
  name: "EventedExamples",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "pipeline", targets: ["Pipeline"]),
    .executable(name: "view-model", targets: ["ViewModel"]),
    .executable(name: "table", targets: ["Table"]),
    .executable(name: "observation", targets: ["ObservationSideBySide"]),
  ],
  dependencies: [
    .package(name: "Evented", path: "..")
  ],
  targets: [
    .executableTarget(name: "Pipeline", dependencies: [.product(name: "Evented", package: "Evented")]),
    .executableTarget(name: "ViewModel", dependencies: [.product(name: "Evented", package: "Evented")]),
    .executableTarget(name: "Table", dependencies: [.product(name: "Evented", package: "Evented")]),
    .executableTarget(
      name: "ObservationSideBySide", dependencies: [.product(name: "Evented", package: "Evented")]),
  ],
  swiftLanguageModes: [.v6]
)
