import Benchmark
import BenchmarkSupport
import Dispatch
import Foundation
import Larder

// MemoryStore: hits, misses, inserts that evict, overwrites, removals, a Zipf mix, and
// two threads; 1,000 operations per iteration (results are per 1,000 operations, "K").
// Run: cd Benchmarks && swift package benchmark --target MemoryStoreBenchmarks
//
// Stores are built once per benchmark in `setup` (10,000 entries) and reused by every iteration:
// the measured operations keep them full, so each iteration sees the same steady state.

final class Payload: Sendable {
    let bytes: Int
    init(_ bytes: Int) { self.bytes = bytes }
}

/// The store of one benchmark, built in setup.
final class MemoryFixture: @unchecked Sendable {  // Written in setup, only read while measuring.
    var store: MemoryStore<String, Payload>?
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

    @Sendable func makeStore(countLimit: Int = capacity, overflowTrimRatio: Double = 0, prefill: Int = capacity)
        -> MemoryStore<String, Payload>
    {
        let store = try! MemoryStore<String, Payload>(
            configuration: .init(countLimit: countLimit, overflowTrimRatio: overflowTrimRatio))
        for i in 0..<prefill { store.setValue(payload, forKey: keys[i]) }
        return store
    }

    /// Registers a benchmark on a store built once in setup by `make`.
    func memory(
        _ name: String, configuration: Benchmark.Configuration = Benchmark.defaultConfiguration,
        make: @escaping @Sendable () -> MemoryStore<String, Payload> = { makeStore() },
        _ body: @escaping @Sendable (Benchmark, MemoryStore<String, Payload>) -> Void
    ) {
        let fixture = MemoryFixture()
        Benchmark(name, configuration: configuration) { benchmark in
            body(benchmark, fixture.store!)
        } setup: {
            fixture.store = make()
        } teardown: {
            fixture.store = nil
        }
    }

    memory("MemoryStore.value(hit)") { benchmark, store in
        for i in benchmark.scaledIterations {
            blackHole(store.value(forKey: keys[(i &* 7919) % capacity]))
        }
    }

    // W-TinyLFU (#18): the store overflows once after the fill, so the entries leave the window
    // for main, where a hit moves a list node and counts in the frequency sketch. mallocCountTotal
    // must stay 0.
    memory("MemoryStore.value(hit, wTinyLFU)", make: {
        let limit = capacity + capacity / 100 + 2  // main's share (99%) holds every entry
        let store = try! MemoryStore<String, Payload>(configuration: .init(countLimit: limit, policy: .wTinyLFU))
        for i in 0..<capacity { store.setValue(payload, forKey: keys[i]) }
        for i in 0...(limit - capacity) { store.setValue(payload, forKey: "memory-filler-\(i)") }
        return store
    }) { benchmark, store in
        for i in benchmark.scaledIterations {
            blackHole(store.value(forKey: keys[(i &* 7919) % capacity]))
        }
    }

    memory("MemoryStore.value(miss)") { benchmark, store in
        for i in benchmark.scaledIterations {
            blackHole(store.value(forKey: keys[capacity + i % capacity]))
        }
    }

    // Full store, keys cycling through twice the capacity: every write is a new key that evicts
    // the least recently used entry.
    memory("MemoryStore.setValue(evicting)") { benchmark, store in
        for i in benchmark.scaledIterations {
            store.setValue(payload, forKey: keys[(capacity + i) % keys.count])
        }
    }

    memory("MemoryStore.setValue(evicting, overflowTrimRatio 0.2)",
           make: { makeStore(overflowTrimRatio: 0.2) }) { benchmark, store in
        for i in benchmark.scaledIterations {
            store.setValue(payload, forKey: keys[(capacity + i) % keys.count])
        }
    }

    memory("MemoryStore.setValue(overwrite)") { benchmark, store in
        for i in benchmark.scaledIterations {
            store.setValue(payload, forKey: keys[(i &* 7919) % capacity])
        }
    }

    memory("MemoryStore.removeValue + setValue") { benchmark, store in
        for i in benchmark.scaledIterations {
            let key = keys[(i &* 7919) % capacity]
            blackHole(store.removeValue(forKey: key))
            store.setValue(payload, forKey: key)
        }
    }

    memory("MemoryStore.value(Zipf 1.0 get-or-set, 2× keys)") { benchmark, store in
        for i in benchmark.scaledIterations {
            let key = zipfKeys[i & 65_535]
            if store.value(forKey: key) == nil { store.setValue(payload, forKey: key) }
        }
    }

    memory("MemoryStore.value(hit, 2 threads)") { benchmark, store in
        let count = benchmark.scaledIterations.count
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<(count / 2) {
                blackHole(store.value(forKey: keys[((i * 2 + thread) &* 7919) % capacity]))
            }
        }
    }

    memory("MemoryStore.setValue(evicting, 2 threads)") { benchmark, store in
        let count = benchmark.scaledIterations.count
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<(count / 2) {
                store.setValue(payload, forKey: keys[(capacity + i * 2 + thread) % keys.count])
            }
        }
    }

    // Filling an empty store with no limit reached: the cost of growing its tables. One
    // iteration = one fresh store filled with 10,000 entries.
    Benchmark("MemoryStore.setValue(fill an empty store to 10k)", configuration: .init(scalingFactor: .one)) { benchmark in
        for _ in benchmark.scaledIterations {
            let store = makeStore(countLimit: .max, prefill: 0)
            for key in keys[0..<capacity] { store.setValue(payload, forKey: key) }
            blackHole(store)
        }
    }
}
