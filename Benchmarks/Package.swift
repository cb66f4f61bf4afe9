// swift-tools-version:6.2
import PackageDescription

let package = Package(
  name: "EventedBenchmarks",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "evented-bench", targets: ["EventedBench"]),
    .executable(name: "evented-figures", targets: ["DerivedFigures"]),
  ],
  dependencies: [
    .package(name: "Evented", path: ".."),
    .package(url: "https://github.com/OpenCombine/OpenCombine", exact: "0.14.0"),
    .package(url: "https://github.com/apple/swift-collections", exact: "1.6.0"),
  ],
  targets: [
    .executableTarget(
      name: "EventedBench",
      dependencies: [
        .product(name: "Evented", package: "Evented"),
        .product(name: "OpenCombine", package: "OpenCombine"),
        .product(name: "OrderedCollections", package: "swift-collections"),
      ]
    ),
    .executableTarget(
      name: "DerivedFigures",
      dependencies: [.product(name: "Evented", package: "Evented")]
    ),
  ],
  swiftLanguageModes: [.v6]
)
