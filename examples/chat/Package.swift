// swift-tools-version:6.0
// A runnable example app on the RelayClient SDK: `swift run --package-path examples/chat chat alice bob`
// (see README.md beside this file). It depends on this repository by path, as an app would.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder; this file sits two levels below the repository.
let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

let package = Package(
    name: "chat",
    platforms: [.macOS(.v12), .iOS(.v15)],
    dependencies: [.package(path: repository.path)],
    targets: [
        .executableTarget(
            name: "chat",
            dependencies: [.product(name: "RelayClient", package: repository.lastPathComponent.lowercased())])
    ]
)
