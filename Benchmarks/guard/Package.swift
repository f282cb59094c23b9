// swift-tools-version: 6.1
import PackageDescription

// The deterministic regression guard: one small release executable that `Benchmarks/guard/run`
// runs under `valgrind --tool=callgrind`, counting instructions per operation inside one
// function (`larder_guard_measure`) and comparing them with `budgets.json`. A package of its
// own so the guard builds without package-benchmark or any network fetch.
let package = Package(
    name: "LarderGuard",
    dependencies: [
        // `name:` is required: a path package is otherwise named after its folder.
        // Trait `Metrics`: the rows with a storage's metrics on (LarderMetrics and swift-metrics).
        .package(name: "Larder", path: "../..", traits: ["Metrics"]),
    ],
    targets: [
        .executableTarget(
            name: "LarderGuard",
            dependencies: [
                .product(name: "Larder", package: "Larder"),
                .product(name: "LarderMetrics", package: "Larder"),
            ],
            path: "Sources/LarderGuard"
        ),
    ]
)
