// swift-tools-version: 6.1
import PackageDescription

// Upcoming features as swift-log enables them: with InternalImportsByDefault every
// `import CSQLite` is internal, so no C type can reach a public signature.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Larder",
    products: [
        .library(name: "Larder", targets: ["Larder"]),
        .library(name: "LarderImage", targets: ["LarderImage"]),
        .executable(name: "larder", targets: ["larder"]),
        // Trait `Memcached`: the remote tier (swift-nio is fetched only when the trait is on).
        .library(name: "LarderMemcached", targets: ["LarderMemcached"]),
    ],
    traits: [
        .trait(name: "Memcached", description: "LarderMemcached: a remote tier on memcached (needs swift-nio)."),
        .default(enabledTraits: []),
    ],
    dependencies: [
        // Used by the `larder` tool only; the library targets have no package dependencies.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Trait `Memcached` only.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // C code of the project's own: the hardware CRC-32C (SSE4.2 with a runtime CPU check
        // and a portable fallback; per-function target attributes, no unsafeFlags).
        .target(name: "CLarderChecksum"),
        .target(
            name: "Larder",
            dependencies: ["CSQLite", "CZlib", "CCrypto", "CLarderChecksum"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "LarderImage",
            dependencies: ["Larder"],
            swiftSettings: strictSettings
        ),
        // The command-line tool over a disk cache directory, and the README's demo.
        .executableTarget(
            name: "larder",
            dependencies: [
                "Larder",
                "LarderImage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        // Test-only code shared by the test target and the crash helper (not a product).
        .target(
            name: "LarderTestSupport",
            dependencies: ["Larder"],
            path: "Tests/LarderTestSupport",
            swiftSettings: strictSettings
        ),
        // The child process the fault tests start and kill (not a product).
        .executableTarget(
            name: "LarderCrashHelper",
            dependencies: ["Larder", "LarderTestSupport"],
            path: "Tests/LarderCrashHelper",
            swiftSettings: strictSettings
        ),
        // The long reliability run (`swift run -c release larder-torture`): the fault suites'
        // checks at full size, with progress lines and one Markdown report (not a product).
        .executableTarget(
            name: "larder-torture",
            dependencies: ["Larder", "LarderTestSupport", "LarderCrashHelper"],
            path: "Tests/LarderTorture",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderTests",
            dependencies: ["Larder", "LarderTestSupport", "LarderCrashHelper"],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderImageTests",
            dependencies: ["LarderImage", "Larder", "LarderTestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSettings
        ),
        // Trait `Memcached`: the remote tier and its tests (sources are `#if Memcached`).
        .target(
            name: "LarderMemcached",
            dependencies: [
                "Larder",
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Memcached"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Memcached"])),
            ],
            swiftSettings: strictSettings
        ),
        // The child process of the multi-process memcached tests (not a product).
        .executableTarget(
            name: "LarderMemcachedHelper",
            dependencies: ["LarderMemcached", "Larder"],
            path: "Tests/LarderMemcachedHelper",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderMemcachedTests",
            dependencies: [
                "LarderMemcached", "Larder", "LarderTestSupport", "LarderMemcachedHelper",
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Memcached"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Memcached"])),
                .product(name: "NIOEmbedded", package: "swift-nio", condition: .when(traits: ["Memcached"])),
            ],
            swiftSettings: strictSettings
        ),
        // Runs the built `larder` executable as a user would.
        .testTarget(
            name: "LarderToolTests",
            dependencies: ["larder", "LarderTestSupport"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
