// swift-tools-version: 6.1
import PackageDescription

// Replays request traces through MemoryStore's eviction policies, for compare_policies.sh.
// A package of its own so that nothing here reaches Larder's users or `swift test`.
let package = Package(
    name: "LarderPolicyReplay",
    dependencies: [
        // `name:` is required: a path package is otherwise named after its folder.
        .package(name: "Larder", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "LarderPolicyReplay",
            dependencies: [.product(name: "Larder", package: "Larder")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
