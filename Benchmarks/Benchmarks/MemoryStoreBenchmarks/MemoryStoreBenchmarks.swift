import Benchmark
import BenchmarkSupport
import Dispatch
import Foundation
import Larder

// MemoryStore: hits, misses, inserts that evict, overwrites, removals, a Zipf mix, and
// two threads; 1,000 operations per iteration (results are per 1,000 operations, "K").
// Run: cd Benchmarks && swift package benchmark --target MemoryStoreBenchmarks

final class Payload: Sendable {
    let bytes: Int
    init(_ bytes: Int) { self.bytes = bytes }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 3,
        scalingFactor: .kilo,
        maxDuration: .seconds(1),
        maxIterations: 10_000
    )

    let capacity = 10_000
    let keys = (0..<(2 * capacity)).map { "memory-key-\($0)" }
    let payload = Payload(100)
    var zipf = ZipfGenerator(count: 2 * capacity, alpha: 1.0, seed: 11)
    let zipfKeys = (0..<65_536).map { _ in keys[zipf.next()] }

    func makeStore(countLimit: Int = capacity, prefill: Int = capacity) -> MemoryStore<String, Payload> {
        let store = try! MemoryStore<String, Payload>(configuration: .init(countLimit: countLimit))
        for i in 0..<prefill { store.setValue(payload, forKey: keys[i]) }
        return store
    }

    Benchmark("MemoryStore.value(hit)") { benchmark in
        let store = makeStore()
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            blackHole(store.value(forKey: keys[(i &* 7919) % capacity]))
        }
    }

    Benchmark("MemoryStore.value(miss)") { benchmark in
        let store = makeStore()
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            blackHole(store.value(forKey: keys[capacity + i % capacity]))
        }
    }

    Benchmark("MemoryStore.setValue(evicting)") { benchmark in
        // Full store, keys cycling through twice the capacity: every write is a new key that
        // evicts the least recently used entry.
        let store = makeStore()
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            store.setValue(payload, forKey: keys[(capacity + i) % keys.count])
        }
    }

    Benchmark("MemoryStore.setValue(evicting, overflowTrimRatio 0.2)") { benchmark in
        let store = try! MemoryStore<String, Payload>(configuration: .init(countLimit: capacity, overflowTrimRatio: 0.2))
        for i in 0..<capacity { store.setValue(payload, forKey: keys[i]) }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            store.setValue(payload, forKey: keys[(capacity + i) % keys.count])
        }
    }

    Benchmark("MemoryStore.setValue(overwrite)") { benchmark in
        let store = makeStore()
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            store.setValue(payload, forKey: keys[(i &* 7919) % capacity])
        }
    }

    Benchmark("MemoryStore.setValue(growing to 10k)") { benchmark in
        // Inserts into an empty store with no limit reached: the cost of growing the tables.
        let store = makeStore(countLimit: .max, prefill: 0)
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            store.setValue(payload, forKey: keys[i % capacity])
        }
    }

    Benchmark("MemoryStore.removeValue + setValue") { benchmark in
        let store = makeStore()
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            let key = keys[(i &* 7919) % capacity]
            blackHole(store.removeValue(forKey: key))
            store.setValue(payload, forKey: key)
        }
    }

    Benchmark("MemoryStore.value(Zipf 1.0 get-or-set, 2× keys)") { benchmark in
        let store = makeStore()
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            let key = zipfKeys[i & 65_535]
            if store.value(forKey: key) == nil { store.setValue(payload, forKey: key) }
        }
    }

    Benchmark("MemoryStore.value(hit, 2 threads)") { benchmark in
        let store = makeStore()
        let count = benchmark.scaledIterations.count
        benchmark.startMeasurement()
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<(count / 2) {
                blackHole(store.value(forKey: keys[((i * 2 + thread) &* 7919) % capacity]))
            }
        }
    }

    Benchmark("MemoryStore.setValue(evicting, 2 threads)") { benchmark in
        let store = makeStore()
        let count = benchmark.scaledIterations.count
        benchmark.startMeasurement()
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<(count / 2) {
                store.setValue(payload, forKey: keys[(capacity + i * 2 + thread) % keys.count])
            }
        }
    }
}
