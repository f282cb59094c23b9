// Replays a request trace through MemoryStore under each eviction policy, or times the
// policies' hit, miss and evicting-insert paths.
//
//   LarderPolicyReplay replay <trace.u32> <cacheSize>...   → CSV: policy,cache_size,requests,misses
//   LarderPolicyReplay replay-sized <trace.u32> <sizes.u32> <bytes>... → CSV: policy,cache_size,requests,misses
//   LarderPolicyReplay time [entries] [operations] [rounds] [policy] → CSV: policy,operation,ns_per_op
//   LarderPolicyReplay hits <policy> [entries] [operations] [scattered|zipf] → one read loop, for profilers
//   LarderPolicyReplay replay-disk <trace.u32> <sizes.u32> <sizeLimit>... → CSV: policy,size_limit,requests,misses
//
// A trace is a flat file of little-endian UInt32 object ids, one per request. Every object has
// unit size: the store's countLimit is the cache size, costs are 1, and overflowTrimRatio is 0,
// which is what libCacheSim simulates for the same trace.
import Foundation
import Larder

let policies: [(String, EvictionPolicy)] = [("lru", .lru), ("s3fifo", .s3fifo), ("wtinylfu", .wTinyLFU)]

func makeStore(_ policy: EvictionPolicy, countLimit: Int) throws -> MemoryStore<UInt32, UInt32> {
    try MemoryStore<UInt32, UInt32> {
        $0.countLimit = countLimit
        $0.costLimit = .max
        $0.overflowTrimRatio = 0
        $0.policy = policy
    }
}

func loadTrace(_ path: String) throws -> [UInt32] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    precondition(data.count % 4 == 0, "\(path): not a whole number of UInt32 ids")
    return data.withUnsafeBytes { raw in
        (0..<data.count / 4).map { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self)) }
    }
}

/// A cache "get" as libCacheSim simulates it: a read, and on a miss a write of the object.
func replay(_ trace: [UInt32], policy: EvictionPolicy, cacheSize: Int) throws -> Int {
    let store = try makeStore(policy, countLimit: cacheSize)
    var misses = 0
    for id in trace where store.value(forKey: id) == nil {
        misses += 1
        store.setValue(id, forKey: id, cost: 1)
    }
    precondition(store.totalCount <= cacheSize)
    return misses
}

func nanoseconds(_ operations: Int, _ body: () -> Void) -> Double {
    let clock = ContinuousClock()
    let elapsed = clock.measure(body)
    let (seconds, attoseconds) = elapsed.components
    return (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(operations)
}

/// As ``replay(_:policy:cacheSize:)`` with a size per request: the store's `costLimit` is the
/// byte capacity and each object's cost its size. `entryCostLimit` refuses what libCacheSim
/// refuses: under W-TinyLFU an object larger than the window (1% of the capacity).
func replaySized(_ trace: [UInt32], sizes: [UInt32], policy: EvictionPolicy, capacity: Int) throws -> Int {
    let store = try MemoryStore<UInt32, UInt32> {
        $0.countLimit = .max
        $0.costLimit = capacity
        $0.entryCostLimit = policy == .wTinyLFU ? capacity / 100 : capacity
        $0.overflowTrimRatio = 0
        $0.policy = policy
    }
    var misses = 0
    for (id, size) in zip(trace, sizes) where store.value(forKey: id) == nil {
        misses += 1
        store.setValue(id, forKey: id, cost: Int(size))
    }
    precondition(store.totalCost <= capacity)
    return misses
}

/// As ``replaySized(_:sizes:policy:capacity:)`` through a real `DiskStore` in a temporary
/// directory, under `.lru` and `.s3fifo`: `sizeLimit` is the store's limit, every value lives
/// inline in its index row (`inlineThreshold` above every size) under an 8-byte key
/// (`%08d` of the id), `overflowTrimRatio` is 0 and there is no count limit. What binds is then
/// the charge of the rows, `2 × (size + 8) + 128` bytes each, against the charge limit of
/// `sizeLimit`; compare_disk_policies.py gives libCacheSim those charges and that capacity.
func replayDisk(_ trace: [UInt32], sizes: [UInt32], policy: EvictionPolicy, sizeLimit: Int) throws -> Int {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("larder-replay-disk-\(policy)-\(sizeLimit)-\(ProcessInfo.processInfo.processIdentifier)")
    try? FileManager.default.removeItem(at: directory)
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try DiskStore(directory: directory) {
        $0.sizeLimit = sizeLimit
        $0.countLimit = .max
        $0.overflowTrimRatio = 0
        $0.inlineThreshold = 1 << 20
        $0.policy = policy
        $0.logHandler = nil
    }
    defer { store.close() }
    let keys = (0...(trace.max() ?? 0)).map { id -> String in
        let digits = String(id)
        return String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }
    let payload = Data(repeating: 0x5A, count: Int(sizes.max() ?? 0))
    var misses = 0
    for (id, size) in zip(trace, sizes) where try store.value(forKey: keys[Int(id)]) == nil {
        misses += 1
        try store.setValue(payload.prefix(Int(size)), forKey: keys[Int(id)])
    }
    precondition(store.totalSize <= sizeLimit)
    return misses
}

/// A fixed pseudo-random permutation walk, so both policies see the same key order.
func scrambled(_ i: Int, _ n: Int) -> UInt32 {
    UInt32((i &* 2_654_435_761) % n)
}

/// 65,536 keys drawn from Zipf(1.0) over 0..<entries (inverse CDF on a fixed LCG stream).
func zipfKeys(entries: Int) -> [UInt32] {
    var weights = (1...entries).map { 1 / Double($0) }
    let total = weights.reduce(0, +)
    var running = 0.0
    for index in weights.indices {
        running += weights[index] / total
        weights[index] = running
    }
    var state: UInt64 = 20231023
    return (0..<65_536).map { _ in
        state = state &* 6364136223846793005 &+ 1442695040888963407
        let u = Double(state >> 11) / Double(1 << 53)
        var low = 0, high = entries - 1
        while low < high {
            let middle = (low + high) / 2
            if weights[middle] < u { low = middle + 1 } else { high = middle }
        }
        return scrambled(low, entries)
    }
}

/// A full store of `entries` keys (0..<entries) plus fillers. W-TinyLFU's store overflows once
/// after the fill, so the entries leave the window for main (probation, protected), where hits
/// promote, demote and count in the sketch, as in a running cache.
func makeWarmStore(_ policy: EvictionPolicy, entries: Int) throws -> MemoryStore<UInt32, UInt32> {
    let warm = warmCount(entries)
    let store = try makeStore(policy, countLimit: entries + warm)
    for i in 0..<entries { store.setValue(UInt32(i), forKey: UInt32(i), cost: 1) }
    for i in 0..<(policy == .wTinyLFU ? warm + 1 : warm) {
        store.setValue(0, forKey: UInt32.max - UInt32(i), cost: 1)
    }
    return store
}

/// The fillers of ``makeWarmStore(_:entries:)``: main's share (99% of the limit) holds every entry.
func warmCount(_ entries: Int) -> Int { entries / 100 + 2 }

/// `operations` reads of resident keys: the scattered walk, or `keys` in turn (a power-of-two
/// count). Not inlined, so that a profiler can count this loop alone
/// (`valgrind --tool=callgrind --toggle-collect='*readLoop*'`).
@inline(never)
func readLoop(_ store: MemoryStore<UInt32, UInt32>, entries: Int, operations: Int, keys: [UInt32]?) -> UInt32 {
    var sink: UInt32 = 0
    if let keys {
        for i in 0..<operations { sink &+= store.value(forKey: keys[i & (keys.count - 1)]) ?? 0 }
    } else {
        for i in 0..<operations { sink &+= store.value(forKey: scrambled(i, entries)) ?? 0 }
    }
    return sink
}

func time(entries: Int, operations: Int, rounds: Int, only: String?) throws {
    print("policy,operation,ns_per_op")
    var best: [String: Double] = [:]
    let zipfKeys = zipfKeys(entries: entries)
    for _ in 0..<rounds {
        for (name, policy) in policies where only == nil || only == name {
            // Hits: a full store (see makeWarmStore), every read finds its key.
            let store = try makeWarmStore(policy, entries: entries)
            let warm = warmCount(entries)
            var sink: UInt32 = 0
            let hit = nanoseconds(operations) {
                sink &+= readLoop(store, entries: entries, operations: operations, keys: nil)
            }
            // Zipf hits: the same store, keys drawn from Zipf(1.0) over the resident entries (hot
            // keys hit often: fewer SLRU promotions than the uniform walk above).
            let zipfHit = nanoseconds(operations) {
                sink &+= readLoop(store, entries: entries, operations: operations, keys: zipfKeys)
            }
            // Misses: reads of keys that were never stored.
            let miss = nanoseconds(operations) {
                for i in 0..<operations { sink &+= store.value(forKey: UInt32(entries) &+ scrambled(i, entries)) ?? 1 }
            }
            // Evicting inserts: every write is a new key into a full store.
            let insert = nanoseconds(operations) {
                for i in 0..<operations { store.setValue(UInt32(entries + i), forKey: UInt32(entries + i), cost: 1) }
            }
            precondition(store.totalCount == entries + warm && sink != 42)
            for (operation, value) in [("hit", hit), ("zipf_hit", zipfHit), ("miss", miss), ("evicting_insert", insert)] {
                let key = "\(name),\(operation)"
                best[key] = min(best[key] ?? .infinity, value)
            }
        }
    }
    for (name, _) in policies where only == nil || only == name {
        for operation in ["hit", "zipf_hit", "miss", "evicting_insert"] {
            print("\(name),\(operation),\(String(format: "%.1f", best["\(name),\(operation)"]!))")
        }
    }
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "replay" where arguments.count >= 3:
    let trace = try loadTrace(arguments[arguments.startIndex + 1])
    print("policy,cache_size,requests,misses")
    for size in arguments.dropFirst(2).map({ Int($0)! }) {
        for (name, policy) in policies {
            let misses = try replay(trace, policy: policy, cacheSize: size)
            print("\(name),\(size),\(trace.count),\(misses)")
        }
    }
case "replay-sized" where arguments.count >= 4:
    let trace = try loadTrace(arguments[arguments.startIndex + 1])
    let sizes = try loadTrace(arguments[arguments.startIndex + 2])
    precondition(trace.count == sizes.count, "one size per request")
    print("policy,cache_size,requests,misses")
    for capacity in arguments.dropFirst(3).map({ Int($0)! }) {
        for (name, policy) in policies {
            let misses = try replaySized(trace, sizes: sizes, policy: policy, capacity: capacity)
            print("\(name),\(capacity),\(trace.count),\(misses)")
        }
    }
case "replay-disk" where arguments.count >= 4:
    let trace = try loadTrace(arguments[arguments.startIndex + 1])
    let sizes = try loadTrace(arguments[arguments.startIndex + 2])
    precondition(trace.count == sizes.count, "one size per request")
    print("policy,size_limit,requests,misses")
    for sizeLimit in arguments.dropFirst(3).map({ Int($0)! }) {
        for (name, policy) in [("lru", EvictionPolicy.lru), ("s3fifo", .s3fifo)] {
            let misses = try replayDisk(trace, sizes: sizes, policy: policy, sizeLimit: sizeLimit)
            print("\(name),\(sizeLimit),\(trace.count),\(misses)")
        }
    }
case "time":
    let entries = arguments.count > 1 ? Int(arguments[arguments.startIndex + 1])! : 10_000
    let operations = arguments.count > 2 ? Int(arguments[arguments.startIndex + 2])! : 2_000_000
    let rounds = arguments.count > 3 ? Int(arguments[arguments.startIndex + 3])! : 5
    let only = arguments.count > 4 ? arguments[arguments.startIndex + 4] : nil
    try time(entries: entries, operations: operations, rounds: rounds, only: only)
case "hits" where arguments.count >= 2:
    // One policy's read loop alone, for profilers: hits <policy> [entries] [operations] [scattered|zipf].
    let name = arguments[arguments.startIndex + 1]
    guard let policy = policies.first(where: { $0.0 == name })?.1 else {
        FileHandle.standardError.write(Data("unknown policy \(name)\n".utf8))
        exit(2)
    }
    let entries = arguments.count > 2 ? Int(arguments[arguments.startIndex + 2])! : 10_000
    let operations = arguments.count > 3 ? Int(arguments[arguments.startIndex + 3])! : 2_000_000
    let zipf = arguments.count > 4 && arguments[arguments.startIndex + 4] == "zipf"
    let store = try makeWarmStore(policy, entries: entries)
    let clock = ContinuousClock()
    let start = clock.now
    let sink = readLoop(store, entries: entries, operations: operations, keys: zipf ? zipfKeys(entries: entries) : nil)
    let (seconds, attoseconds) = (clock.now - start).components
    print("\(name),\(zipf ? "zipf_hit" : "hit"),\(String(format: "%.1f", (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(operations))),\(sink)")
default:
    FileHandle.standardError.write(Data("usage: LarderPolicyReplay replay <trace.u32> <cacheSize>... | replay-sized <trace.u32> <sizes.u32> <bytes>... | time [entries] [operations]\n".utf8))
    exit(2)
}
