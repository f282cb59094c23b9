// swift-tools-version: 6.1
import PackageDescription

// Larder's benchmarks live in their own package so that package-benchmark never reaches the
// dependency graph of Larder's users, nor `swift test` (STYLE.md B.8).
//
//   swift package benchmark --target CodecBenchmarks     package-benchmark suites (3 targets)
//   ./compare.sh                                          side by side with diskcache and raw C
//   swift run -c release LarderEviction                   hit ratios, eviction and scaling
let package = Package(
    name: "LarderBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // `name:` is required: a path package is otherwise named after its folder.
        .package(name: "Larder", path: ".."),
        .package(
            url: "https://github.com/ordo-one/package-benchmark",
            from: "1.38.0",
            traits: ["MallocInterposer"]
        ),
    ],
    targets: [
        // Workload data, seeded generators, timing and /proc readers shared by the executables.
        .target(
            name: "BenchmarkSupport",
            path: "Sources/BenchmarkSupport"
        ),
        // Plain release executables (no package-benchmark) for compare.sh and the eviction study.
        .executableTarget(
            name: "LarderCompare",
            dependencies: [.product(name: "Larder", package: "Larder"), "BenchmarkSupport"],
            path: "Sources/LarderCompare"
        ),
        .executableTarget(
            name: "LarderEviction",
            dependencies: [.product(name: "Larder", package: "Larder"), "BenchmarkSupport"],
            path: "Sources/LarderEviction"
        ),
    ]
)

// package-benchmark suites: `swift package benchmark --target <Target>`.
for target in ["MemoryStoreBenchmarks", "DiskStoreBenchmarks", "CodecBenchmarks"] {
    package.targets.append(
        .executableTarget(
            name: target,
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "Larder", package: "Larder"),
                "BenchmarkSupport",
            ],
            path: "Benchmarks/\(target)",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        )
    )
}
