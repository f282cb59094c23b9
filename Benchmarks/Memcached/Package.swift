// swift-tools-version: 6.1
import PackageDescription

// Larder's remote tier against libmemcached and pymemcache (./run.sh). Its own package, so the
// Memcached trait (and swift-nio) reaches neither Larder's users nor the other benchmarks.
let package = Package(
    name: "LarderMemcachedBenchmarks",
    dependencies: [
        // `name:` is required: a path package is otherwise named after its folder.
        .package(name: "Larder", path: "../..", traits: ["Memcached"]),
        // For NIOSingletons' executor take-over in one of the measured set-ups.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "LarderMemcachedBench",
            dependencies: [
                .product(name: "Larder", package: "Larder"),
                .product(name: "LarderMemcached", package: "Larder"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/LarderMemcachedBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
