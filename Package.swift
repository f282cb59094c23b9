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
        // Trait `Redis`: the remote tier on Redis/Valkey with pushed invalidations (swift-nio).
        .library(name: "LarderRedis", targets: ["LarderRedis"]),
        // Server adapters: build only with their trait on (`--traits Vapor`, `--traits Hummingbird`).
        .library(name: "LarderVapor", targets: ["LarderVapor"]),
        .library(name: "LarderHummingbird", targets: ["LarderHummingbird"]),
        // Operations: build only with their trait on (`--traits Metrics`, `--traits ServiceLifecycle`).
        .library(name: "LarderMetrics", targets: ["LarderMetrics"]),
        .library(name: "LarderServiceLifecycle", targets: ["LarderServiceLifecycle"]),
        // Trait `Tracing`: spans of loads and remote commands (`--traits Tracing`).
        .library(name: "LarderTracing", targets: ["LarderTracing"]),
    ],
    traits: [
        .trait(name: "Memcached", description: "LarderMemcached: a remote tier on memcached (needs swift-nio)."),
        .trait(name: "Redis", description: "LarderRedis: a remote tier on Redis or Valkey, RESP3 with CLIENT TRACKING and TLS (needs swift-nio, swift-nio-ssl)."),
        .trait(name: "Vapor", description: "LarderVapor: Larder as Vapor's Cache (fetches Vapor)."),
        .trait(name: "Hummingbird", description: "LarderHummingbird: Larder as Hummingbird's PersistDriver (fetches Hummingbird)."),
        .trait(name: "Metrics", description: "LarderMetrics: a storage's statistics reported through apple/swift-metrics."),
        .trait(
            name: "ServiceLifecycle",
            description: "LarderServiceLifecycle: a storage as a swift-service-lifecycle Service that closes it on graceful shutdown."),
        .trait(
            name: "Tracing",
            description: "LarderTracing: spans of loads and remote commands through apple/swift-distributed-tracing."),
        .default(enabledTraits: []),
    ],
    dependencies: [
        // Used by the `larder` tool only; the library targets have no package dependencies.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Each used only under a trait: swift-nio (Memcached, and the server adapters), the
        // server frameworks (Vapor, Hummingbird).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Trait `Redis` only: TLS to the server.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.36.0"),
        // Trait `Metrics` only.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Trait `Tracing` only.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // The example apps' `/metrics` page, with traits `Metrics` and the app's framework.
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
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
        // Larder's SQLite VFS: the default one, with each commit's log frames written at once and
        // a database page read with the page after it.
        .target(name: "CLarderSQLiteVFS", dependencies: ["CSQLite"]),
        .target(
            name: "Larder",
            dependencies: ["CSQLite", "CZlib", "CCrypto", "CLarderChecksum", "CLarderSQLiteVFS"],
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
        // Server adapters and their example apps: sources are `#if Vapor` / `#if Hummingbird`, so
        // without the trait they compile to nothing and the framework is never resolved.
        .target(
            name: "LarderVapor",
            dependencies: [
                "Larder",
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Vapor"])),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "LarderHummingbird",
            dependencies: [
                "Larder",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["Hummingbird"])
                ),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "LarderVaporExample",
            dependencies: [
                "LarderVapor",
                "Larder",
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                // With `Redis` or `Memcached` too: SHARED_CACHE picks a shared tier.
                .target(name: "LarderRedis", condition: .when(traits: ["Redis"])),
                .target(name: "LarderMemcached", condition: .when(traits: ["Memcached"])),
                // With `Metrics` too: Prometheus metrics at `/metrics`.
                "LarderMetrics",
                .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Metrics"])),
            ],
            path: "Examples/VaporJSONCache",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "LarderHummingbirdExample",
            dependencies: [
                "LarderHummingbird",
                "LarderImage",
                "Larder",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                // With `Redis` or `Memcached` too: REDIS_URL or MEMCACHED_URL picks a shared tier.
                .target(name: "LarderRedis", condition: .when(traits: ["Redis"])),
                .target(name: "LarderMemcached", condition: .when(traits: ["Memcached"])),
                // With `Metrics` too: Prometheus metrics at `/metrics`.
                "LarderMetrics",
                .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Metrics"])),
            ],
            path: "Examples/HummingbirdImages",
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
        // What the remote tiers share (the envelope every remote value travels in, the remote
        // key and TTL mapping): sources are `#if Memcached || Redis`; internal to the package.
        .target(
            name: "LarderRemoteCore",
            dependencies: [
                "Larder",
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Memcached", "Redis"])),
            ],
            swiftSettings: strictSettings
        ),
        // Trait `Memcached`: the remote tier and its tests (sources are `#if Memcached`).
        .target(
            name: "LarderMemcached",
            dependencies: [
                "Larder",
                "LarderRemoteCore",
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
                "LarderMemcached", "Larder", "LarderRemoteCore", "LarderTestSupport", "LarderMemcachedHelper",
                // One test runs Larder as Vapor's cache over a memcached tier (both traits on).
                .target(name: "LarderVapor", condition: .when(traits: ["Vapor"])),
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Memcached"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Memcached"])),
                .product(name: "NIOEmbedded", package: "swift-nio", condition: .when(traits: ["Memcached"])),
                // Spans of the tier's commands (both traits on).
                .target(name: "LarderTracing", condition: .when(traits: ["Tracing"])),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
            ],
            swiftSettings: strictSettings
        ),
        // Trait `Redis`: the Redis tier and its tests (sources are `#if Redis`).
        .target(
            name: "LarderRedis",
            dependencies: [
                "Larder",
                "LarderRemoteCore",
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["Redis"])),
            ],
            swiftSettings: strictSettings
        ),
        // The child process of the multi-process Redis tests (not a product).
        .executableTarget(
            name: "LarderRedisHelper",
            dependencies: ["LarderRedis", "Larder"],
            path: "Tests/LarderRedisHelper",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderRedisTests",
            dependencies: [
                "LarderRedis", "Larder", "LarderRemoteCore", "LarderTestSupport", "LarderRedisHelper",
                // Larder as Hummingbird's persist driver and as Vapor's cache over Redis (with
                // the framework's trait on too).
                .target(name: "LarderHummingbird", condition: .when(traits: ["Hummingbird"])),
                .target(name: "LarderVapor", condition: .when(traits: ["Vapor"])),
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Redis"])),
                // Spans of the tier's commands (both traits on).
                .target(name: "LarderTracing", condition: .when(traits: ["Tracing"])),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
            ],
            swiftSettings: strictSettings
        ),
        // The child process of the two-app-processes test: a Vapor app over one directory (not a product).
        .executableTarget(
            name: "LarderVaporHelper",
            dependencies: [
                "LarderVapor",
                "Larder",
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
            ],
            path: "Tests/LarderVaporHelper",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderVaporTests",
            dependencies: [
                "LarderVapor",
                "Larder",
                "LarderTestSupport",
                "LarderVaporHelper",
                .product(name: "VaporTesting", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderHummingbirdTests",
            dependencies: [
                "LarderHummingbird",
                "Larder",
                "LarderTestSupport",
                "LarderHummingbirdHelper",
                .product(name: "HummingbirdTesting", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Hummingbird"])),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["Hummingbird"])
                ),
            ],
            swiftSettings: strictSettings
        ),
        // The child process of the cross-process tests: the `create` race, and an app over one
        // directory (not a product).
        .executableTarget(
            name: "LarderHummingbirdHelper",
            dependencies: [
                "LarderHummingbird",
                "Larder",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
            ],
            path: "Tests/LarderHummingbirdHelper",
            swiftSettings: strictSettings
        ),
        // Trait `Metrics`: statistics sampled into swift-metrics (sources are `#if Metrics`).
        .target(
            name: "LarderMetrics",
            dependencies: [
                "Larder",
                .product(name: "CoreMetrics", package: "swift-metrics", condition: .when(traits: ["Metrics"])),
                // With `ServiceLifecycle` too, the reporter is a `Service`; with `Memcached`
                // too, `MemcachedMetrics` reports the memcached tier's own counters.
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["ServiceLifecycle"])
                ),
                .target(name: "LarderMemcached", condition: .when(traits: ["Memcached"])),
                .target(name: "LarderRedis", condition: .when(traits: ["Redis"])),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderMetricsTests",
            dependencies: [
                "LarderMetrics",
                "Larder",
                "LarderTestSupport",
                .product(name: "CoreMetrics", package: "swift-metrics", condition: .when(traits: ["Metrics"])),
                .product(name: "MetricsTestKit", package: "swift-metrics", condition: .when(traits: ["Metrics"])),
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["ServiceLifecycle"])
                ),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["ServiceLifecycle"])),
                .target(name: "LarderMemcached", condition: .when(traits: ["Memcached"])),
                .target(name: "LarderRedis", condition: .when(traits: ["Redis"])),
            ],
            swiftSettings: strictSettings
        ),
        // Trait `ServiceLifecycle`: a storage as a `Service` (sources are `#if ServiceLifecycle`).
        .target(
            name: "LarderServiceLifecycle",
            dependencies: [
                "Larder",
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["ServiceLifecycle"])
                ),
            ],
            swiftSettings: strictSettings
        ),
        // The child process that the lifecycle test stops with SIGTERM (not a product).
        .executableTarget(
            name: "LarderLifecycleHelper",
            dependencies: [
                "LarderServiceLifecycle",
                "Larder",
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["ServiceLifecycle"])
                ),
                .product(
                    name: "UnixSignals", package: "swift-service-lifecycle",
                    condition: .when(traits: ["ServiceLifecycle"])
                ),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["ServiceLifecycle"])),
            ],
            path: "Tests/LarderLifecycleHelper",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderServiceLifecycleTests",
            dependencies: [
                "LarderServiceLifecycle",
                "Larder",
                "LarderTestSupport",
                "LarderLifecycleHelper",
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle",
                    condition: .when(traits: ["ServiceLifecycle"])
                ),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["ServiceLifecycle"])),
            ],
            swiftSettings: strictSettings
        ),
        // Trait `Tracing`: spans of loads and remote commands (sources are `#if Tracing`).
        .target(
            name: "LarderTracing",
            dependencies: [
                "Larder",
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LarderTracingTests",
            dependencies: [
                "LarderTracing",
                "Larder",
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
            ],
            swiftSettings: strictSettings
        ),
        // Runs the example apps as processes and scrapes their `/metrics` (traits `Metrics` and
        // the app's framework; sources are `#if`).
        .testTarget(
            name: "LarderExampleTests",
            dependencies: [
                "LarderTestSupport",
                .target(name: "LarderVaporExample", condition: .when(traits: ["Vapor"])),
                .target(name: "LarderHummingbirdExample", condition: .when(traits: ["Hummingbird"])),
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
