// swift-tools-version:6.2
import PackageDescription

let package = Package(
  name: "Evented",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "Evented", targets: ["Evented"]),
    .executable(name: "evented-stress", targets: ["Stress"]),
  ],
  traits: [
    .trait(
      name: "FaultInjection",
      description: "Compiles in the switches that plant known bugs, to prove that the tests and the stress suite "
        + "catch them (`swift build --traits FaultInjection`). Never enabled by default."),
    .default(enabledTraits: []),
  ],
  targets: [
    .target(name: "Evented"),
    .target(name: "StressKit", dependencies: ["Evented"], path: "Stress/StressKit"),
    .executableTarget(name: "Stress", dependencies: ["Evented", "StressKit"], path: "Stress", exclude: ["StressKit"]),
    .testTarget(name: "EventedTests", dependencies: ["Evented"]),
  ],
  swiftLanguageModes: [.v6]
)
