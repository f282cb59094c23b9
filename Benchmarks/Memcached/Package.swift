// swift-tools-version: 6.1
import PackageDescription

// Larder's remote tier against libmemcached and pymemcache (./run.sh). Its own package, so the
// Memcached trait (and swift-nio) reaches neither Larder's users nor the other benchmarks.
let package = Package(
    name: "LarderMemcachedBenchmarks",
    dependencies: [
        // `name:` is required: a path package is otherwise named after its folder.
        .package(name: "Larder", path: "../..", traits: ["Memcached"]),
    ],
    targets: [
        .executableTarget(
            name: "LarderMemcachedBench",
            dependencies: [
                .product(name: "Larder", package: "Larder"),
                .product(name: "LarderMemcached", package: "Larder"),
            ],
            path: "Sources/LarderMemcachedBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
