#if Memcached
import LarderRemoteCore
import Foundation
import Larder
@testable import LarderMemcached
import LarderTestSupport
import NIOCore
import NIOPosix
import Testing

/// `MemcachedStore` against a real memcached started by each test.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct MemcachedStoreTests {
    static func store(port: Int, _ configure: (inout MemcachedStore.Configuration) -> Void = { _ in }) throws -> MemcachedStore {
        var configuration = MemcachedStore.Configuration(port: port, namespace: "t:", deadline: .seconds(300))
        configure(&configuration)
        return try MemcachedStore(configuration: configuration)
    }

    @Test func roundTripsValuesAndMissesAndRemoves() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port)
            #expect(try await store.entry(forKey: "a") == nil)
            try await store.setValue(Data("one".utf8), forKey: "a", expiry: .seconds(60), metadata: Data([7]), isCompressible: false)
            let entry = try #require(try await store.entry(forKey: "a"))
            #expect(entry.data == Data("one".utf8))
            #expect(entry.metadata == Data([7]))
            #expect(try await store.containsValue(forKey: "a"))
            #expect(try await store.removeValue(forKey: "a"))
            #expect(try await store.removeValue(forKey: "a") == false)
            #expect(try await store.entry(forKey: "a") == nil)
            let statistics = store.statistics
            #expect(statistics.hits == 2 && statistics.writes == 1 && statistics.errors == 0)
            await store.close()
        }
    }

    @Test func oddKeysRoundTripAndLargeValuesStayLocal() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port)
            let keys = [String(repeating: "k", count: 10_000), "with spaces", "new\nline\r\n", "nul\u{0}byte", "😀 emoji 🍕", ""]
            for (index, key) in keys.enumerated() {
                try await store.setValue(Data("v\(index)".utf8), forKey: key, expiry: nil, metadata: nil, isCompressible: false)
            }
            for (index, key) in keys.enumerated() {
                #expect(try await store.entry(forKey: key)?.data == Data("v\(index)".utf8), "key #\(index)")
            }
            // 1 MiB + 1 of incompressible bytes exceeds the item size: not stored, and an older
            // remote value for the key is removed so it cannot be read instead.
            var generator = SplitMix64(seed: 1)
            let big = Data((0..<(1 << 20) + 1).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            try await store.setValue(Data("old".utf8), forKey: "big", expiry: nil, metadata: nil, isCompressible: false)
            try await store.setValue(big, forKey: "big", expiry: nil, metadata: nil, isCompressible: false)
            #expect(try await store.entry(forKey: "big") == nil)
            #expect(store.statistics.oversizedValues == 1)
            await store.close()
        }
    }

    @Test func largeValuesRoundTripWhenTheServerTakesThem() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope, arguments: ["-I", "4m"])
            let store = try Self.store(port: server.port) { $0.maxItemSize = 4 << 20 }
            var generator = SplitMix64(seed: 2)
            let big = Data((0..<(1 << 20) + 1).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            try await store.setValue(big, forKey: "big", expiry: nil, metadata: nil, isCompressible: true)
            #expect(try await store.entry(forKey: "big")?.data == big)
            await store.close()
        }
    }

    @Test func foreignTruncatedAndBitFlippedValuesAreMissesAndDeleted() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port)
            let key = String(decoding: try RemoteKey(namespace: "t:").key(for: "victim"), as: UTF8.self)
            try await store.setValue(Data("genuine".utf8), forKey: "victim", expiry: nil, metadata: nil, isCompressible: false)
            let genuine = try #require(try rawValue(port: server.port, key: key))
            var flipped = genuine
            flipped[flipped.count - 2] ^= 0x10
            let damaged: [(String, Data)] = [
                ("foreign", Data("a value another client wrote".utf8)),
                ("truncated", genuine.prefix(genuine.count - 3)),
                ("bit-flipped", flipped),
                ("empty", Data()),
            ]
            for (index, (name, bytes)) in damaged.enumerated() {
                try rawSet(port: server.port, key: key, bytes)
                #expect(try await store.entry(forKey: "victim") == nil, "\(name)")
                #expect(try rawValue(port: server.port, key: key) == nil, "\(name) was deleted")
                #expect(store.statistics.rejectedValues == index + 1)
            }
            // Another Larder key's genuine envelope copied under this key is refused too.
            try await store.setValue(Data("other".utf8), forKey: "other", expiry: nil, metadata: nil, isCompressible: false)
            let otherKey = String(decoding: try RemoteKey(namespace: "t:").key(for: "other"), as: UTF8.self)
            try rawSet(port: server.port, key: key, try #require(try rawValue(port: server.port, key: otherKey)))
            #expect(try await store.entry(forKey: "victim") == nil)
            await store.close()
        }
    }

    /// The server's TTL is never shorter than asked nor more than 1 s longer; a finite TTL never
    /// becomes "never".
    @Test func theServersTTLMatchesTheExpiry() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port)
            let cases: [(String, Expiry, Double?)] = [
                ("0.4 s", .seconds(0.4), 0.4), ("1 s", .seconds(1), 1), ("59 s", .seconds(59), 59),
                ("30 days", .seconds(2_592_000), 2_592_000), ("30 days + 1 s", .seconds(2_592_001), 2_592_001),
                ("never", .never, nil), ("a date", .date(Date().addingTimeInterval(3_600.5)), 3_600.5),
            ]
            for (name, expiry, planned) in cases {
                let start = Date()
                // A date's lifetime counts from now, however long the earlier cases took.
                let asked: Double? = switch expiry {
                case .date(let date): date.timeIntervalSince(start)
                default: planned
                }
                try await store.setValue(Data("v".utf8), forKey: name, expiry: expiry, metadata: nil, isCompressible: false)
                let key = String(decoding: try RemoteKey(namespace: "t:").key(for: name), as: UTF8.self)
                let reply = try rawExchange(port: server.port, Array("mg \(key) t\r\n".utf8))
                // memcached's clock ticks once a second, so a TTL of n seconds can end up to one
                // second early in real time: a short entry may already be gone, nothing to compare.
                if reply.hasPrefix("EN"), let asked, Date().timeIntervalSince(start) >= asked.rounded(.down) - 1 {
                    continue
                }
                let token = try #require(reply.split(separator: " ").first { $0.hasPrefix("t") }?.dropFirst()
                    .trimmingCharacters(in: .whitespacesAndNewlines), "\(name): \(reply)")
                let serverTTL = try #require(Double(token))
                if let asked {
                    #expect(serverTTL != -1, "\(name): a finite TTL became never")
                    // The server reports whole seconds left, truncated: allow that truncation below.
                    // And the time the set and the read took on a loaded machine has passed.
                    let elapsed = Date().timeIntervalSince(start).rounded(.up)
                    #expect(serverTTL >= asked.rounded(.down) - 1 - elapsed, "\(name): \(serverTTL) < \(asked)")
                    // Beyond 30 days the TTL is a unix time, and memcached's clock ticks once a
                    // second, so the TTL it reports may lag one more second behind real time.
                    let slack: Double = asked > 2_592_000 ? 2 : 1
                    #expect(serverTTL <= asked + slack, "\(name): \(serverTTL) > \(asked) + \(slack)")
                } else {
                    #expect(serverTTL == -1, "\(name)")
                }
                // And the entry's expiration reported locally is never later than the server's
                // (a 0.4 s entry may already have expired on a slow machine: then it is a miss).
                guard let entry = try await store.entry(forKey: name) else {
                    // Only a short entry may be gone, and only once its lifetime has passed.
                    #expect(asked.map { Date().timeIntervalSince(start) >= $0.rounded(.down) } == true, "\(name) missing")
                    continue
                }
                if let asked {
                    let end = try #require(entry.expirationDate)
                    #expect(end.timeIntervalSinceNow <= asked + 0.01)
                } else {
                    #expect(entry.expirationDate == nil)
                }
            }
            // 0.4 s later that entry is gone from the server itself.
            try await Task.sleep(for: .milliseconds(2_100))
            #expect(try await store.entry(forKey: "0.4 s") == nil)
            await store.close()
        }
    }

    @Test func leasesGiveOneWinnerAndRefuseAFillAfterAnInvalidation() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port)
            // First reader of a missing key wins; the next finds the lease busy.
            guard case .won(let lease, stale: nil) = try await store.leasedEntry(forKey: "l", leaseDuration: .seconds(30)) else {
                Issue.record("the first reader did not win"); return
            }
            guard case .busy(stale: nil) = try await store.leasedEntry(forKey: "l", leaseDuration: .seconds(30)) else {
                Issue.record("the second reader was not told to wait"); return
            }
            #expect(try await store.fill(Data("v1".utf8), forKey: "l", lease: lease, expiry: .seconds(60), metadata: nil, isCompressible: false))
            guard case .hit(let entry) = try await store.leasedEntry(forKey: "l", leaseDuration: .seconds(30)) else {
                Issue.record("the filled value is not a hit"); return
            }
            #expect(entry.data == Data("v1".utf8))
            // A soft invalidation: one winner with the stale value, everyone else served stale.
            #expect(try await store.invalidate(forKey: "l"))
            guard case .won(let second, stale: let stale?) = try await store.leasedEntry(forKey: "l", leaseDuration: .seconds(30)) else {
                Issue.record("no winner after the invalidation"); return
            }
            #expect(stale.data == Data("v1".utf8))
            guard case .busy(stale: let staleAgain?) = try await store.leasedEntry(forKey: "l", leaseDuration: .seconds(30)) else {
                Issue.record("others were not served the stale value"); return
            }
            #expect(staleAgain.data == Data("v1".utf8))
            // Invalidated again before the fill: the fill is refused (EX), not cached.
            #expect(try await store.invalidate(forKey: "l"))
            #expect(try await store.fill(Data("v2".utf8), forKey: "l", lease: second, expiry: .seconds(60), metadata: nil, isCompressible: false) == false)
            #expect(store.statistics.rejectedFills == 1)
            await store.close()
        }
    }

    @Test func aPlainReadOfAnInvalidatedValueLeavesItsLeaseToBeWon() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // A deadline no stalled test run outlasts: these tests are about leases, not time
            let store = try Self.store(port: server.port) { $0.deadline = .seconds(300) }
            try await store.setValue(Data("v1".utf8), forKey: "p", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try await store.invalidate(forKey: "p"))
            // memcached hands the win token to the first read of a stale value, a plain one too
            #expect(try await store.entry(forKey: "p")?.data == Data("v1".utf8))
            #expect(try await store.entries(forKeys: ["p"])["p"]?.data == Data("v1".utf8))
            // Then a leased read still wins it
            guard case .won(_, stale: let stale?) = try await store.leasedEntry(forKey: "p", leaseDuration: .seconds(30)) else {
                Issue.record("a plain read kept the lease of the invalidated value"); return
            }
            #expect(stale.data == Data("v1".utf8))
            await store.close()
        }
    }

    @Test func aConditionalInvalidationLeavesAValueWrittenSinceFresh() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // A deadline no stalled test run outlasts: these tests are about leases, not time
            let store = try Self.store(port: server.port) { $0.deadline = .seconds(300) }
            try await store.setValue(Data("old".utf8), forKey: "c", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            let read = try #require(try await store.entry(forKey: "c"))
            // Given a value written after the read, expiring later
            try await store.setValue(Data("new".utf8), forKey: "c", expiry: .seconds(7_200), metadata: nil, isCompressible: false)
            // An invalidation of what was read leaves it fresh
            #expect(try await store.invalidate(forKey: "c", ifExpiringBy: try #require(read.expirationDate)) == false)
            guard case .hit(let fresh) = try await store.leasedEntry(forKey: "c", leaseDuration: .seconds(30)) else {
                Issue.record("the value written since was marked stale"); return
            }
            #expect(fresh.data == Data("new".utf8))
            // While one that still expires by then is marked stale, once
            let now = try #require(try await store.entry(forKey: "c"))
            #expect(try await store.invalidate(forKey: "c", ifExpiringBy: try #require(now.expirationDate)))
            #expect(try await store.invalidate(forKey: "c", ifExpiringBy: try #require(now.expirationDate)) == false)
            guard case .won(_, stale: let stale?) = try await store.leasedEntry(forKey: "c", leaseDuration: .seconds(30)) else {
                Issue.record("the due value was not marked stale"); return
            }
            #expect(stale.data == Data("new".utf8))
            await store.close()
        }
    }

    @Test func aQuietBatchReturnsThePresentEntriesOnly() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port)
            let keys = (0..<40).map { "batch-\($0)" }
            for key in keys where key.hasSuffix("0") || key.hasSuffix("7") {
                try await store.setValue(Data(key.utf8), forKey: key, expiry: nil, metadata: nil, isCompressible: false)
            }
            let found = try await store.entries(forKeys: keys)
            #expect(Set(found.keys) == Set(keys.filter { $0.hasSuffix("0") || $0.hasSuffix("7") }))
            for (key, entry) in found { #expect(entry.data == Data(key.utf8)) }
            #expect(try await store.entries(forKeys: ["none-1", "none-2"]).isEmpty)
            #expect(store.statistics.errors == 0)
            await store.close()
        }
    }

    @Test func manyConcurrentCallsPipelineOnFewConnections() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port) { $0.connectionCount = 1 }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<64 {
                    group.addTask {
                        for step in 0..<50 {
                            let key = "k\(task)-\(step % 5)"
                            try await store.setValue(Data(key.utf8), forKey: key, expiry: nil, metadata: nil, isCompressible: false)
                            let read = try await store.entry(forKey: key)
                            #expect(read?.data == Data(key.utf8))
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(store.statistics.errors == 0)
            await store.close()
        }
    }

    @Test func callsFromTasksOnTheStoresExecutorRunOnItsEventLoopAndGetTheirOwnValues() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let store = try Self.store(port: server.port) { $0.connectionCount = 2 }
            let executor = try #require(store.taskExecutor as? EventLoopTaskExecutor)
            // Given 32 tasks on the store's executor and 32 on the global one, mixing sets, gets
            // and quiet batches of their own keys
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<64 {
                    group.addTask(executorPreference: task % 2 == 0 ? store.taskExecutor : nil) {
                        for step in 0..<40 {
                            let key = "e\(task)-\(step % 4)"
                            let value = Data("\(key)@\(step)".utf8)
                            try await store.setValue(value, forKey: key, expiry: nil, metadata: nil, isCompressible: false)
                            if task % 2 == 0 {
                                // Then a task that prefers the executor runs on the loop's thread
                                #expect(executor.eventLoop.inEventLoop)
                            }
                            // And every read returns the value this task just wrote, never another's
                            #expect(try await store.entry(forKey: key)?.data == value)
                            let batch = try await store.entries(forKeys: [key, "absent-\(task)"])
                            #expect(batch.count == 1 && batch[key]?.data == value)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(store.statistics.errors == 0)
            await store.close()
        }
    }

    @Test func callsFromTasksSpreadOverTheStoresExecutorsRunOnEachConnectionsLoop() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // Given a store whose two connections live on two event loops of its own group
            let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)
            let store = try Self.store(port: server.port) {
                $0.connectionCount = 2
                $0.eventLoopGroup = loops
            }
            let executors = try store.taskExecutors.map { try #require($0 as? EventLoopTaskExecutor) }
            #expect(executors.count == 2)
            #expect(executors[0] === store.taskExecutor as? EventLoopTaskExecutor)
            #expect(executors[0].eventLoop !== executors[1].eventLoop)
            // When 32 tasks spread over them set and read their own keys
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<32 {
                    let executor = executors[task % 2]
                    group.addTask(executorPreference: executor) {
                        for step in 0..<40 {
                            let key = "s\(task)-\(step % 4)"
                            let value = Data("\(key)@\(step)".utf8)
                            try await store.setValue(value, forKey: key, expiry: nil, metadata: nil, isCompressible: false)
                            // Then each runs on its executor's loop
                            #expect(executor.eventLoop.inEventLoop)
                            // And every read returns the value this task just wrote, never another's
                            #expect(try await store.entry(forKey: key)?.data == value)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(store.statistics.errors == 0)
            #expect(store.statistics.hits == 32 * 40)
            await store.close()
            try await loops.shutdownGracefully()
        }
    }
}

/// The raw bytes stored under a memcached key, or `nil`.
func rawValue(port: Int, key: String) throws -> Data? {
    func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard let newline = bytes.firstIndex(of: 0x0A) else { return nil }
        return newline + 1
    }
    func size(_ bytes: [UInt8], _ end: Int) -> Int? {
        let header = String(decoding: bytes[..<end], as: UTF8.self)
        guard header.hasPrefix("VA ") else { return nil }
        return Int(header.split(separator: " ")[1].trimmingCharacters(in: .whitespacesAndNewlines))
    }
    let reply = try rawExchange(port: port, Array("mg \(key) v\r\n".utf8)) { bytes in
        guard let end = headerEnd(bytes) else { return false }
        guard let size = size(bytes, end) else { return true }
        return bytes.count >= end + size + 2
    }
    guard let end = headerEnd(reply), let size = size(reply, end) else { return nil }
    return Data(reply[end..<(end + size)])
}

/// Stores `bytes` under a memcached key as another client would.
func rawSet(port: Int, key: String, _ bytes: Data) throws {
    let reply = try rawExchange(port: port, Array("ms \(key) \(bytes.count) T60\r\n".utf8) + Array(bytes) + Array("\r\n".utf8))
    guard reply.hasPrefix("HD") else { throw TestFailure("raw set failed: \(reply)") }
}
#endif
