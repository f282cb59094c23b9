// Larder's remote get and set against a running memcached: 100-byte values, local tiers
// bypassed, at 1 call in flight and at 32 (32 concurrent tasks whose calls pipeline on the
// store's connections). Prints one TSV line per measurement, as the baselines do.
//
//   LarderMemcachedBench PORT OPS [ONLY]
//   LarderMemcachedBench PORT,PORT,PORT OPS [ONLY]
//
// With several ports the store is a pool (`servers:` 127.0.0.1 on each port in that order,
// weights 1, failover `.none`: libmemcached's weighted ketama placement), its rows are named
// `larder-pool-…`, and it measures only the store's gets at 1 and 32 in flight from Swift's
// global executor, its quiet batch of 32 (`entries(forKeys:)`, split by server) and its quiet
// write batch of 100 (`setValues(_:)`, split by server).
// With LARDER_BENCH_NIO_EXECUTOR=1 it first installs swift-nio's event loops as Swift's global
// executor (NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor,
// a choice a server makes once at start), and names its rows `larder-nio-executor-…`.
import Foundation
import Larder
import LarderMemcached
import NIOCore
import NIOPosix

let onNIOExecutor = ProcessInfo.processInfo.environment["LARDER_BENCH_NIO_EXECUTOR"] == "1"
if onNIOExecutor, !NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() {
    print("could not install the NIO event loops as the global executor")
    exit(1)
}

let arguments = CommandLine.arguments
let ports = arguments.count > 1 ? arguments[1].split(separator: ",").compactMap { Int($0) } : []
guard (3...4).contains(arguments.count), !ports.isEmpty, ports.count == arguments[1].split(separator: ",").count,
      let ops = Int(arguments[2]) else {
    print("usage: LarderMemcachedBench PORT[,PORT…] OPS [ONLY]   (ONLY: run just the measurements whose name contains it)")
    exit(2)
}
let isPool = ports.count > 1
let rowPrefix = (onNIOExecutor ? "larder-nio-executor-" : "larder-") + (isPool ? "pool-" : "")
let only = arguments.count == 4 ? arguments[3] : nil
// LARDER_BENCH_CONNECTIONS sets the store's connectionCount (default 2, the store's default).
let connections = ProcessInfo.processInfo.environment["LARDER_BENCH_CONNECTIONS"].flatMap { Int($0) } ?? 2
let store = try MemcachedStore(configuration: .init(
    servers: ports.map { MemcachedStore.Server(host: "127.0.0.1", port: $0, weight: 1) }, failover: .none,
    namespace: "l:", connectionCount: connections, deadline: .seconds(5)))
let storage = try Storage<String, Data>(configuration: .init(), additionalTiers: [store], transformer: .data)
let keys = (0..<1_000).map { "key-\($0)" }
let value = Data(repeating: UInt8(ascii: "v"), count: 100)
for key in keys {
    try await store.setValue(value, forKey: key, expiry: .never, metadata: nil, isCompressible: false)
}

/// Runs `ops` calls of `body` from `inFlight` concurrent tasks; `executor` is the tasks'
/// executor preference (`nil`: Swift's global executor, as most callers are), or `executors`
/// the preferences the tasks take in turn.
func measure(
    _ name: String, inFlight: Int, executor: (any TaskExecutor)? = nil, executors: [any TaskExecutor] = [],
    _ body: @escaping @Sendable (Int) async throws -> Void
) async throws {
    if let only, !"\(name)\t\(inFlight)".contains(only) { return }
    let clock = ContinuousClock()
    let elapsed = try await clock.measure {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<inFlight {
                group.addTask(executorPreference: executors.isEmpty ? executor : executors[lane % executors.count]) {
                    for i in stride(from: lane, to: ops, by: inFlight) { try await body(i) }
                }
            }
            try await group.waitForAll()
        }
    }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    print("\(rowPrefix)\(name)\t\(inFlight)\t\(Int(Double(ops) / seconds))")
}

for inFlight in [1, 32] {
    try await measure("store\tget", inFlight: inFlight) { i in
        guard try await store.entry(forKey: keys[i % 1_000])?.data.count == 100 else { fatalError("miss") }
    }
    // A pool measures only its gets (above) and its batch (below).
    if isPool { continue }
    try await measure("storage\tget", inFlight: inFlight) { i in
        guard try await storage.value(forKey: keys[i % 1_000], tiers: .remote)?.count == 100 else { fatalError("miss") }
    }
    try await measure("store\tset", inFlight: inFlight) { i in
        try await store.setValue(value, forKey: keys[i % 1_000], expiry: .never, metadata: nil, isCompressible: false)
    }
    // The same calls from tasks that run on the connection's event loop (`store.taskExecutor`).
    try await measure("store-on-loop\tget", inFlight: inFlight, executor: store.taskExecutor) { i in
        guard try await store.entry(forKey: keys[i % 1_000])?.data.count == 100 else { fatalError("miss") }
    }
    try await measure("storage-on-loop\tget", inFlight: inFlight, executor: store.taskExecutor) { i in
        guard try await storage.value(forKey: keys[i % 1_000], tiers: .remote)?.count == 100 else { fatalError("miss") }
    }
    // The same gets from tasks spread over every connection's loop (`store.taskExecutors`).
    if inFlight > 1 {
        try await measure("store-on-loops\tget", inFlight: inFlight, executors: store.taskExecutors) { i in
            guard try await store.entry(forKey: keys[i % 1_000])?.data.count == 100 else { fatalError("miss") }
        }
    }
    try await measure("store-on-loop\tset", inFlight: inFlight, executor: store.taskExecutor) { i in
        try await store.setValue(value, forKey: keys[i % 1_000], expiry: .never, metadata: nil, isCompressible: false)
    }
}
// 32 keys per quiet batch (mg … q × 32, mn), like the baselines' multi-gets: one batch in flight
// at a time, from a task on Swift's global executor (not from top-level code, which runs on the
// main actor and would add two hops per batch), through the store (`entries(forKeys:)`), through
// Storage (`values(forKeys:)`, local tiers bypassed), and both again from a task on the store's
// event loop.
typealias BatchRead = @Sendable ([String]) async throws -> Int
let allBatches: [(String, (any TaskExecutor)?, BatchRead)] = [
    ("store\tget-batch", nil, { try await store.entries(forKeys: $0).count }),
    ("storage\tget-batch", nil, { try await storage.values(forKeys: $0, tiers: .remote).count }),
    ("store-on-loop\tget-batch", store.taskExecutor, { try await store.entries(forKeys: $0).count }),
    ("storage-on-loop\tget-batch", store.taskExecutor, { try await storage.values(forKeys: $0, tiers: .remote).count }),
]
// LARDER_BENCH_NO_BATCHES=1 skips them (run.sh runs each batch row in its own process, so that
// one that crashes costs only its own row).
let noBatches = ProcessInfo.processInfo.environment["LARDER_BENCH_NO_BATCHES"] == "1"
let batches = noBatches ? [] : isPool ? Array(allBatches.prefix(1)) : allBatches
for (name, executor, read) in batches {
    if let only, !"\(name)\t32".contains(only) { continue }
    let (fetched, seconds) = try await Task(executorPreference: executor) {
        let clock = ContinuousClock()
        var fetched = 0
        let elapsed = try await clock.measure {
            for start in stride(from: 0, to: ops, by: 32) {
                fetched += try await read((start..<(start + 32)).map { keys[$0 % 1_000] })
            }
        }
        return (fetched, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }.value
    guard fetched >= ops else { fatalError("batch misses") }
    print("\(rowPrefix)\(name)\t32\t\(Int(Double(fetched) / seconds))")
}

// 100 values per quiet write batch (`setValues(_:)`: ms … q × 100, then mn, one flush per
// server), one batch in flight at a time from a task on Swift's global executor, like
// pymemcache's set_many of 100; the rate counts values written.
if !noBatches, only.map({ "store\tset-batch\t100".contains($0) }) ?? true {
    let writes = keys.map { TierWrite(key: $0, data: value, expiry: .never, isCompressible: false) }
    let seconds = try await Task {
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            for start in stride(from: 0, to: ops, by: 100) {
                let first = start % 1_000
                try await store.setValues(Array(writes[first..<min(first + 100, 1_000)]))
            }
        }
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }.value
    guard store.statistics.errors == 0 else { fatalError("batch write errors") }
    print("\(rowPrefix)store\tset-batch\t100\t\(Int(Double(ops) / seconds))")
}

// A memory hit of a remote-derived value against a memory hit of a local write, both through
// Storage's synchronous read (a sync function picks the sync overloads; a synchronous call
// must name the local tiers only, or it throws rather than skip the shared one).
func syncRead(_ storage: Storage<String, Data>, _ key: String) throws -> Data? { try storage.value(forKey: key, tiers: .memory) }
func syncWrite(_ storage: Storage<String, Data>, _ value: Data, _ key: String, expiry: Expiry?) throws {
    try storage.setValue(value, forKey: key, expiry: expiry, tiers: .memory)
}
let memoryStorage = try Storage<String, Data>(configuration: .init(), additionalTiers: [store], transformer: .data)
// (A function, not top-level code: there `entry(forKey:)` resolved to the synchronous overload.)
func remoteRead(_ storage: Storage<String, Data>, _ key: String) async throws -> Storage<String, Data>.Entry? {
    try await storage.entry(forKey: key)
}
if only != nil || isPool {
    await store.close()
    exit(0)
}
guard try await remoteRead(memoryStorage, "key-1")?.tier == .remote else { fatalError("no remote hit") }
try syncWrite(memoryStorage, value, "local", expiry: .seconds(3_600))
try syncWrite(memoryStorage, value, "local-no-ttl", expiry: nil)
for (name, key) in [("remote-derived", "key-1"), ("local", "local"), ("local-no-ttl", "local-no-ttl")] {
    let clock = ContinuousClock()
    let n = ops * 10
    let elapsed = try clock.measure {
        for _ in 0..<n { guard try syncRead(memoryStorage, key) != nil else { fatalError("memory miss") } }
    }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    print("larder-memory-hit\t\(name)\t1\t\(Int(Double(n) / seconds))")
}
await store.close()
