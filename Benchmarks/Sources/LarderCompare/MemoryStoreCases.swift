import BenchmarkSupport
import Foundation
import Larder

/// `MemoryStore` (and `Storage`, memory tier only) on the memory workload of `runMemoryPeerCases`.
func runMemoryStoreCases(_ workload: MemoryWorkload) throws {
    let n = workload.operations
    let capacity = workload.capacity

    // Hits: `capacity` resident entries, `n` lookups in a scattered order.
    do {
        let store = try MemoryStore<String, Box>(configuration: .init(countLimit: capacity))
        for i in 0..<capacity { store.setValue(workload.box, forKey: workload.keys[i]) }
        var found = 0
        let seconds = measure {
            for i in 0..<n where store.value(forKey: workload.keys[workload.readOrder[i % capacity]]) != nil {
                found += 1
            }
        }
        guard found == n else { fail("MemoryStore: \(found) hits of \(n)") }
        report("memory.get-hit", "larder", ops: n, seconds: seconds)
    }

    // Hits under W-TinyLFU against `.lru` on the same entries (issue #18: ≤ 1.3× the time).
    // W-TinyLFU's store overflows once after the fill, so the entries leave the window for main
    // (probation and protected), where hits promote, demote and count in the sketch, as in a
    // running cache; the LRU store is filled the same way short of the overflow. Both stores are
    // filled first and then take turns over `memchunks` chunks of the reads (default 16; which
    // goes first alternates), each contender's time the sum of its chunks, so that both meet the
    // same moods of a shared host; `memchunks=0` reads one store's `n` and then the other's.
    let policies = [("lru", EvictionPolicy.lru), ("larder", .wTinyLFU)]
    var stores: [MemoryStore<String, Box>] = []
    for (_, policy) in policies {
        let limit = capacity + capacity / 100 + 2  // main's share (99%) holds every entry
        let store = try MemoryStore<String, Box>(configuration: .init(countLimit: limit, policy: policy))
        for i in 0..<capacity { store.setValue(workload.box, forKey: workload.keys[i]) }
        for i in 0..<(limit - capacity + (policy == .lru ? 0 : 1)) { store.setValue(workload.box, forKey: "filler \(i)") }
        stores.append(store)
    }
    var found = [0, 0]
    let seconds = measureInTurns(count: n, chunks: workload.policyChunks) { contender, items in
        let store = stores[contender]
        var hits = 0
        for i in items where store.value(forKey: workload.keys[workload.readOrder[i % capacity]]) != nil { hits += 1 }
        found[contender] += hits
    }
    for (index, (name, policy)) in policies.enumerated() {
        // A sketch collision can make one filler win a contest over an entry: at most one miss.
        guard found[index] >= n - n / capacity - 1 else { fail("MemoryStore(\(policy)): \(found[index]) hits of \(n)") }
        report("memory.get-hit(wTinyLFU)", name, ops: n, seconds: seconds[index])
    }

    // Inserts that evict: count limit `capacity`, keys cycling through `2 × capacity`, so every
    // insert is a new key and evicts the least recently used entry (overflowTrimRatio 0).
    do {
        let store = try MemoryStore<String, Box>(configuration: .init(countLimit: capacity, overflowTrimRatio: 0))
        let keys = workload.keys
        let seconds = measure {
            for i in 0..<n { store.setValue(workload.box, forKey: keys[i % keys.count]) }
        }
        guard store.totalCount == capacity else { fail("MemoryStore: \(store.totalCount) entries, expected \(capacity)") }
        report("memory.insert-evict", "larder", ops: n, seconds: seconds)
    }

    // Plain inserts: new keys into a store without a count limit, emptied (outside the
    // measurement's hot loop, as the dictionary peer is) every `capacity` inserts.
    do {
        let store = try MemoryStore<String, Box>(configuration: .init())
        let seconds = measure {
            insertInRounds(workload, insert: { store.setValue(workload.box, forKey: $0) }, empty: store.removeAll)
        }
        report("memory.insert", "larder", ops: n, seconds: seconds)
    }

    // The same through `Storage<String, Box>` without a disk tier.
    do {
        let storage = try Storage<String, Box>(
            configuration: .init(memory: .init(countLimit: capacity)), transformer: boxTransformer)
        for i in 0..<capacity { try storage.setValue(workload.box, forKey: workload.keys[i]) }
        var found = 0
        let seconds = try measure {
            for i in 0..<n where try storage.value(forKey: workload.keys[workload.readOrder[i % capacity]]) != nil {
                found += 1
            }
        }
        guard found == n else { fail("Storage: \(found) hits of \(n)") }
        report("memory.get-hit", "storage", ops: n, seconds: seconds)
    }
    do {
        let storage = try Storage<String, Box>(
            configuration: .init(memory: .init(countLimit: capacity, overflowTrimRatio: 0)), transformer: boxTransformer)
        let keys = workload.keys
        let seconds = try measure {
            for i in 0..<n { try storage.setValue(workload.box, forKey: keys[i % keys.count]) }
        }
        report("memory.insert-evict", "storage", ops: n, seconds: seconds)
    }
}

/// A codec for `Box`; a memory-only `Storage` never calls it.
let boxTransformer = Transformer<Box>(
    encode: { withUnsafeBytes(of: $0.payload) { Data($0) } },
    decode: { data in Box(data.withUnsafeBytes { $0.loadUnaligned(as: Int.self) }) },
    isCompressible: false)
