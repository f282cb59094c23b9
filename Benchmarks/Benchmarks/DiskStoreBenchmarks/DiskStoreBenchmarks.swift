import Benchmark
import BenchmarkSupport
import Dispatch
import Foundation
import Larder

// DiskStore: set, get hit, get miss, delete, overwrite and writes that trigger eviction, for
// values of 100 B, 4 KiB, 100 KiB and 1 MiB; gzip off and on; 1 and 2 threads; 100 values in one
// batch write against 100 single writes.
// Run: cd Benchmarks && swift package benchmark --target DiskStoreBenchmarks
//      (--filter 'DiskStore.get.*' for a subset)
//
// Each benchmark opens a store in a fresh temporary directory in setup and deletes it in
// teardown. Single-thread benchmarks measure one operation per iteration; the 2-thread ones
// run 2 × 32 operations per iteration (DispatchQueue.concurrentPerform).

/// The store of one benchmark, its directory and the keys written in setup.
final class DiskFixture: @unchecked Sendable {  // Set up before, and read only during, the run.
    var directory: URL?
    var store: DiskStore?
    var keys: [String] = []
    var value = Data()

    func open(compression: DiskStore.Compression, countLimit: Int = .max, prefill: Int, bytes: Int) throws {
        let directory = makeTemporaryDirectory("diskstore")
        var configuration = DiskStore.Configuration(sizeLimit: 1 << 40, countLimit: countLimit)
        configuration.compression = compression
        let store = try DiskStore(directory: directory, configuration: configuration)
        // Gzip gets text (it compresses); without gzip, incompressible bytes.
        value = compression == .none ? Workload.randomBytes(bytes) : Workload.text(bytes)
        keys = (0..<prefill).map { "key-\($0)" }
        for key in keys { try store.setValue(value, forKey: key) }
        self.directory = directory
        self.store = store
    }

    func close() {
        store?.close()
        store = nil
        if let directory { try? FileManager.default.removeItem(at: directory) }
        directory = nil
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .syscalls],
        warmupIterations: 5,
        maxDuration: .seconds(1),
        maxIterations: 2_000
    )

    let sizes: [(bytes: Int, label: String, prefill: Int)] = [
        (100, "100B", 2_000), (4096, "4KiB", 2_000), (102_400, "100KiB", 500), (1_048_576, "1MiB", 100),
    ]

    /// Registers one benchmark whose iteration calls `body(store, fixture, iteration)`.
    func disk(
        _ name: String, compression: DiskStore.Compression = .none, countLimit: Int = .max,
        bytes: Int, prefill: Int, maxIterations: Int? = nil,
        _ body: @escaping @Sendable (DiskStore, DiskFixture, Int) throws -> Void
    ) {
        let fixture = DiskFixture()
        var configuration = Benchmark.defaultConfiguration
        if let maxIterations { configuration.maxIterations = maxIterations }
        Benchmark(name, configuration: configuration) { benchmark in
            let store = fixture.store!
            for i in benchmark.scaledIterations {
                try body(store, fixture, i)
            }
        } setup: {
            try fixture.open(compression: compression, countLimit: countLimit, prefill: prefill, bytes: bytes)
        } teardown: {
            fixture.close()
        }
    }

    for (bytes, label, prefill) in sizes {
        for (compression, suffix) in [(DiskStore.Compression.none, ""), (.gzip(level: 6), ", gzip")] {
            let variant = "\(label)\(suffix)"
            disk("DiskStore.setValue(\(variant))", compression: compression, bytes: bytes, prefill: 0) { store, f, i in
                try store.setValue(f.value, forKey: "new-\(i)")
            }
            disk("DiskStore.data(hit, \(variant))", compression: compression, bytes: bytes, prefill: prefill) { store, f, i in
                blackHole(try store.value(forKey: f.keys[i % f.keys.count]))
            }
            guard compression == .none else { continue }  // the rest does not depend on gzip

            disk("DiskStore.setValue(overwrite, \(variant))", bytes: bytes, prefill: prefill) { store, f, i in
                try store.setValue(f.value, forKey: f.keys[i % f.keys.count])
            }
            disk("DiskStore.data(miss, \(variant))", bytes: bytes, prefill: prefill) { store, _, i in
                blackHole(try store.value(forKey: "missing-\(i)"))
            }
            // One removal per prefilled key; iterations past the prefill would be misses.
            disk("DiskStore.removeValue(\(variant))", bytes: bytes, prefill: prefill, maxIterations: prefill) { store, f, i in
                blackHole(try store.removeValue(forKey: f.keys[i % f.keys.count]))
            }
            // Full at `prefill` entries: every write goes over the count limit; with the default
            // overflowTrimRatio of 0.2, one write in ~20% of the limit trims a batch.
            disk("DiskStore.setValue(evicting, \(variant))", countLimit: prefill, bytes: bytes, prefill: prefill) { store, f, i in
                try store.setValue(f.value, forKey: "new-\(i)")
            }

            // Two threads on one store: 2 × 32 operations per iteration.
            disk("DiskStore.setValue(2 threads × 32, \(variant))", bytes: bytes, prefill: 0) { store, f, i in
                DispatchQueue.concurrentPerform(iterations: 2) { thread in
                    for j in 0..<32 { try? store.setValue(f.value, forKey: "new-\(i)-\(thread)-\(j)") }
                }
            }
            disk("DiskStore.data(hit, 2 threads × 32, \(variant))", bytes: bytes, prefill: prefill) { store, f, i in
                DispatchQueue.concurrentPerform(iterations: 2) { thread in
                    for j in 0..<32 { blackHole(try? store.value(forKey: f.keys[(i * 64 + thread * 32 + j) % f.keys.count])) }
                }
            }
        }
    }

    // 100 new values of 4 KiB per iteration: one `setValues` (one transaction) against 100
    // `setValue` calls (one transaction each).
    let batch = 100
    disk("DiskStore.setValues(\(batch) × 4KiB)", bytes: 4096, prefill: 0, maxIterations: 200) { store, f, i in
        try store.setValues((0..<batch).map { TierWrite(key: "new-\(i)-\($0)", data: f.value) })
    }
    disk("DiskStore.setValue(\(batch) × 4KiB, one by one)", bytes: 4096, prefill: 0, maxIterations: 200) { store, f, i in
        for j in 0..<batch { try store.setValue(f.value, forKey: "new-\(i)-\(j)") }
    }
}
