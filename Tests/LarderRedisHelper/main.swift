// The child process of LarderRedis's multi-process tests (not a product).
//
//   LarderRedisHelper stampede PORT KEYS COUNT_FILE TASKS START_UNIX_MS
//     Waits until START_UNIX_MS, then runs TASKS concurrent get-or-load calls for each of the
//     comma-separated KEYS through a Storage with a RedisStore tier; the loader appends the key
//     as a line to COUNT_FILE (O_APPEND) and takes 200 ms. Prints "values <n> <distinct>".
//
//   LarderRedisHelper bench PORT OPS
//     Reads 100-byte values (1,000 keys) through RedisStore.entry(forKey:) OPS times from 1 task,
//     then from 32 tasks at once (their calls pipeline on the store's connections), then in
//     batches of 32 through entries(forKeys:) (one MGET each); prints one TSV line per
//     measurement, "larder-redis<TAB>get|get-batch<TAB>IN_FLIGHT<TAB>gets/s", for
//     Benchmarks/Redis/run.sh.
//
//   LarderRedisHelper follow PORT COUNT
//     Reads keys k0…k(COUNT-1) (written before it started) into its memory tier, prints
//     "ready", then prints "dropped <key> <unix µs>" as each local copy is dropped by a pushed
//     invalidation, until all are; then "memory <copies left>" and "fresh <keys that now read
//     new-<i>>".
#if Redis
import Foundation
import Larder
import LarderRedis
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One whole line to stdout at once, unbuffered (the parent waits for lines as they come).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// The async read (a plain `value(forKey:)` here could pick the synchronous overload).
func read(_ storage: Storage<String, String>, _ key: String) async throws -> String? {
    try await storage.value(forKey: key)
}
let arguments = CommandLine.arguments
func usage() -> Never {
    FileHandle.standardError.write(Data("usage: LarderRedisHelper stampede PORT KEYS COUNT_FILE TASKS START_UNIX_MS | bench PORT OPS | follow PORT COUNT\n".utf8))
    exit(2)
}
guard arguments.count >= 4, let port = Int(arguments[2]) else { usage() }

switch arguments[1] {
case "stampede":
    guard arguments.count == 7, let tasks = Int(arguments[5]), let startMillis = Double(arguments[6]) else { usage() }
    let keys = arguments[3].split(separator: ",").map(String.init)
    let countFile = arguments[4]
    let store = try RedisStore(configuration: .init(
        port: port, namespace: "mp:", deadline: .seconds(300), isTrackingEnabled: false, leaseWaitLimit: .seconds(120)))
    let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
    _ = try? await store.entry(forKey: "warm-up")
    let wait = startMillis / 1000 - Date().timeIntervalSince1970
    if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
    let values = try await withThrowingTaskGroup(of: String.self) { group in
        for key in keys {
            for _ in 0..<tasks {
                group.addTask {
                    try await storage.value(forKey: key, expiry: .seconds(3_600)) { _ in
                        let fd = open(countFile, O_WRONLY | O_APPEND | O_CREAT, 0o644)
                        precondition(fd >= 0, "cannot open \(countFile)")
                        let line = "\(key)\n"
                        _ = line.withCString { write(fd, $0, strlen($0)) }
                        close(fd)
                        try await Task.sleep(for: .milliseconds(200))
                        return "computed"
                    }
                }
            }
        }
        var values: [String] = []
        for try await value in group { values.append(value) }
        return values
    }
    say("values \(values.count) \(Set(values).sorted().joined(separator: ","))")
    await store.close()

case "bench":
    guard arguments.count == 4, let ops = Int(arguments[3]), ops >= 32 else { usage() }
    let store = try await RedisStore.connect(configuration: .init(
        port: port, namespace: "bench:", deadline: .seconds(10), isTrackingEnabled: false))
    let keys = (0..<1_000).map { "key-\($0)" }
    let value = Data(repeating: 0x61, count: 100)
    for key in keys { try await store.setValue(value, forKey: key, expiry: .never, metadata: nil, isCompressible: false) }
    /// Runs `tasks` tasks that share `ops` gets; gets per second.
    func measure(tasks: Int, _ get: @escaping @Sendable (Int) async throws -> Int) async throws -> Int {
        let start = ContinuousClock.now
        let fetched = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var fetched = 0
                    for index in stride(from: task, to: ops, by: tasks) { fetched += try await get(index) }
                    return fetched
                }
            }
            var fetched = 0
            for try await count in group { fetched += count }
            return fetched
        }
        guard fetched == ops else { throw CancellationError() }
        return Int(Double(ops) / (ContinuousClock.now - start).seconds)
    }
    @Sendable func get(_ index: Int) async throws -> Int {
        try await store.entry(forKey: keys[index % keys.count])?.data == value ? 1 : 0
    }
    say("larder-redis\tget\t1\t\(try await measure(tasks: 1, get))")
    say("larder-redis\tget\t32\t\(try await measure(tasks: 32, get))")
    let batches = try await measure(tasks: 1) { index in
        guard index % 32 == 0 else { return 0 }
        let batch = (index..<min(index + 32, ops)).map { keys[$0 % keys.count] }
        return try await store.entries(forKeys: batch).values.count { $0.data == value }
    }
    say("larder-redis\tget-batch\t32\t\(batches)")
    await store.close()

case "follow":
    guard let count = Int(arguments[3]) else { usage() }
    let store = try await RedisStore.connect(configuration: .init(
        port: port, namespace: "lat:", deadline: .seconds(300), localCopyMaxAge: .seconds(3_600)))
    let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
    while !store.isTrackingLive { try await Task.sleep(for: .milliseconds(2)) }
    for index in 0..<count {
        guard try await read(storage, "k\(index)") == "old-\(index)" else {
            say("error k\(index) did not read old-\(index)")
            exit(1)
        }
    }
    let dropped = Mutex<Set<String>>([])
    // Added after the storage's own listener (installed by the first read): runs after the drop.
    store.addInvalidationListener { invalidation in
        guard case .keys(let keys) = invalidation else {
            say("reset")
            return
        }
        let micros = Int64(Date().timeIntervalSince1970 * 1_000_000)
        for key in keys where dropped.withLock({ $0.insert(key).inserted }) {
            say("dropped \(key) \(micros)")
        }
    }
    let held = (0..<count).filter { storage.memory.value(forKey: "k\($0)") != nil }.count
    say("ready \(held)")
    let end = ContinuousClock.now + .seconds(300)
    while dropped.withLock({ $0.count }) < count, ContinuousClock.now < end {
        try await Task.sleep(for: .milliseconds(5))
    }
    let left = (0..<count).filter { storage.memory.value(forKey: "k\($0)") != nil }.count
    say("memory \(left)")
    var fresh = 0
    for index in 0..<count where try await read(storage, "k\(index)") == "new-\(index)" { fresh += 1 }
    say("fresh \(fresh)")
    await store.close()

default:
    usage()
}
#else
print("LarderRedisHelper needs the Redis trait")
#endif
