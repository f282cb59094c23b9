import BenchmarkSupport
import Foundation

/// The cached object of the memory cases: a class, so that `NSCache` can hold it too.
final class Box: @unchecked Sendable {
    let payload: Int
    init(_ payload: Int) { self.payload = payload }
}

/// The plain reference for the memory tier: a `Dictionary` behind one `NSLock`.
final class LockedDictionary: @unchecked Sendable {  // `storage` is only touched under `lock`.
    private let lock = NSLock()
    private var storage: [String: Box] = [:]

    init(capacity: Int) { storage.reserveCapacity(capacity) }

    @inline(__always)
    func value(forKey key: String) -> Box? {
        lock.lock()
        defer { lock.unlock() }
        return storage[key]
    }

    @inline(__always)
    func setValue(_ value: Box, forKey key: String) {
        lock.lock()
        defer { lock.unlock() }
        storage[key] = value
    }

    /// Empties the dictionary, keeping its capacity.
    func removeAll() {
        lock.lock()
        defer { lock.unlock() }
        storage.removeAll(keepingCapacity: true)
    }
}

/// Keys and parameters shared by every memory contender.
struct MemoryWorkload {
    /// Entries resident during the hit case, and the count limit of the evicting-insert case.
    let capacity: Int
    /// Operations per case.
    let operations: Int
    /// `2 × capacity` distinct keys: `memory-key-000017`. Cycling through them in order makes
    /// every insert into a `capacity`-entry LRU a new key that evicts the least recently used one.
    let keys: [String]
    let nsKeys: [NSString]
    /// Scattered read order over the first `capacity` keys.
    let readOrder: [Int]
    let box = Box(1)
    /// Turns the W-TinyLFU and LRU stores take over the hit case's reads (0: one after the other).
    let policyChunks: Int

    init(capacity: Int, operations: Int, policyChunks: Int = 16) {
        self.capacity = capacity
        self.operations = operations
        self.policyChunks = max(0, policyChunks)
        keys = (0..<(2 * capacity)).map { "memory-key-" + String(repeating: "0", count: max(0, 6 - String($0).count)) + String($0) }
        nsKeys = keys.map { NSString(string: $0) }
        readOrder = (0..<capacity).map { Workload.readIndex($0, capacity) }
    }
}

/// Memory-tier peers: `Dictionary` + `NSLock` and Foundation's `NSCache`. `MemoryStore`'s own
/// cases are in `MemoryStoreCases.swift`.
func runMemoryPeerCases(_ workload: MemoryWorkload) {
    let n = workload.operations
    let capacity = workload.capacity

    // Hits: `capacity` resident entries, `n` lookups in a scattered order.
    do {
        let dictionary = LockedDictionary(capacity: capacity)
        for i in 0..<capacity { dictionary.setValue(workload.box, forKey: workload.keys[i]) }
        var found = 0
        let seconds = measure {
            for i in 0..<n where dictionary.value(forKey: workload.keys[workload.readOrder[i % capacity]]) != nil {
                found += 1
            }
        }
        guard found == n else { fail("dictionary: \(found) hits of \(n)") }
        report("memory.get-hit", "dict+nslock", ops: n, seconds: seconds)
    }
    do {
        let cache = NSCache<NSString, Box>()
        cache.countLimit = capacity
        for i in 0..<capacity { cache.setObject(workload.box, forKey: workload.nsKeys[i]) }
        var found = 0
        let seconds = measure {
            for i in 0..<n where cache.object(forKey: workload.nsKeys[workload.readOrder[i % capacity]]) != nil {
                found += 1
            }
        }
        guard found == n else { fail("NSCache: \(found) hits of \(n)") }
        report("memory.get-hit", "nscache", ops: n, seconds: seconds)
    }

    // Inserts: `n` inserts of keys not present. The dictionary has no limit, so it is emptied
    // (capacity kept) every `capacity` inserts; NSCache evicts by its own count limit.
    do {
        let dictionary = LockedDictionary(capacity: capacity)
        let seconds = measure {
            insertInRounds(workload, insert: { dictionary.setValue(workload.box, forKey: $0) }, empty: dictionary.removeAll)
        }
        report("memory.insert-evict", "dict+nslock", ops: n, seconds: seconds)
    }
    do {
        let cache = NSCache<NSString, Box>()
        cache.countLimit = capacity
        let keys = workload.nsKeys
        let seconds = measure {
            for i in 0..<n { cache.setObject(workload.box, forKey: keys[i % keys.count]) }
        }
        report("memory.insert-evict", "nscache", ops: n, seconds: seconds)
    }
}

/// `workload.operations` inserts of new keys, emptying the container every `capacity` inserts:
/// the plain-insert workload for containers without a count limit.
@inline(__always)
func insertInRounds(_ workload: MemoryWorkload, insert: (String) -> Void, empty: () -> Void) {
    let n = workload.operations, keys = workload.keys
    var i = 0
    while i < n {
        let end = min(n, i + workload.capacity)
        while i < end {
            insert(keys[i % keys.count])
            i += 1
        }
        empty()
    }
}
