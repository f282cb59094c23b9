#if Memcached
import LarderRemoteCore
import Foundation
import Larder
@testable import LarderMemcached
import LarderTestSupport
import NIOCore
import Synchronization
import Testing

/// `Storage` with a memcached tier: the rules of a shared tier, and leases in get-or-load.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct StorageRemoteTests {
    static func storage(
        port: Int, localCopyMaxAge: Duration? = .seconds(60), deadline: Duration = .seconds(300), directory: URL? = nil,
        leaseWaitLimit: Duration = .seconds(2)
    ) throws -> (Storage<String, String>, MemcachedStore) {
        // Five minutes: these tests are about the rules, not the deadline, and a test run that
        // starts every suite at once has stalled a busy 2-core machine's event loops for a minute.
        let store = try MemcachedStore(configuration: .init(
            port: port, namespace: "s:", deadline: deadline, localCopyMaxAge: localCopyMaxAge, leaseWaitLimit: leaseWaitLimit))
        let storage = try Storage<String, String>(
            configuration: .init(directory: directory), additionalTiers: [store], transformer: .string)
        return (storage, store)
    }

    @Test func writesGoThroughAndRemovalsReachTheRemoteFirst() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (a, storeA) = try Self.storage(port: server.port)
            let (b, storeB) = try Self.storage(port: server.port)
            try await a.setValue("shared", forKey: "k", expiry: .seconds(3_600))
            // B, another "machine", reads it from the remote and copies it into its memory.
            let entry = try #require(try await b.entry(forKey: "k"))
            #expect(entry.value == "shared" && entry.tier == .remote)
            #expect(try await b.entry(forKey: "k")?.tier == .memory)
            // A removes: the remote first, then A's local copies.
            #expect(try await a.removeValue(forKey: "k"))
            #expect(try await a.value(forKey: "k") == nil)
            #expect(try await storeB.entry(forKey: "k") == nil)
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func bNeverRefillsAValueARemoved() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (a, storeA) = try Self.storage(port: server.port)
            let (b, storeB) = try Self.storage(port: server.port, localCopyMaxAge: .milliseconds(200))
            try await a.setValue("v1", forKey: "k", expiry: .seconds(3_600))
            #expect(try await b.value(forKey: "k") == "v1")
            try await a.removeValue(forKey: "k")
            // B keeps reading (its local copy until it ages out, then misses) and loading.
            let end = ContinuousClock.now + .milliseconds(500)
            while ContinuousClock.now < end {
                _ = try await b.value(forKey: "k")
                #expect(try await storeA.entry(forKey: "k") == nil, "B put the removed value back")
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await b.value(forKey: "k") == nil, "B's local copy lived past localCopyMaxAge")
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func aLocalCopyNeverOutlivesLocalCopyMaxAgeOrTheRemoteTTL() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // Lifetimes of minutes, so a loaded machine cannot let them run out mid-test.
            let (a, storeA) = try Self.storage(port: server.port, localCopyMaxAge: .seconds(600))
            let (b, storeB) = try Self.storage(port: server.port, localCopyMaxAge: .seconds(600))
            try await a.setValue("short", forKey: "ttl", expiry: .seconds(300))
            let entry = try #require(try await b.entry(forKey: "ttl"))
            let end = try #require(entry.expirationDate)
            #expect(end.timeIntervalSinceNow <= 300.01, "bounded by the remote's TTL, not localCopyMaxAge")
            let copy = try #require(b.memory.entry(forKey: "ttl"))
            #expect(try #require(copy.expirationDate) <= end)
            try await a.setValue("long", forKey: "age", expiry: .seconds(3_600))
            _ = try await b.value(forKey: "age")
            let aged = try #require(b.memory.entry(forKey: "age")?.expirationDate)
            #expect(aged.timeIntervalSinceNow <= 600.01, "bounded by localCopyMaxAge, not the remote's hour")
            // With localCopyMaxAge zero, no local copy at all: B sees A's overwrite at once.
            let (c, storeC) = try Self.storage(port: server.port, localCopyMaxAge: .zero)
            #expect(try await c.value(forKey: "age") == "long")
            #expect(c.memory.entry(forKey: "age") == nil)
            try await a.setValue("newer", forKey: "age", expiry: .seconds(3_600))
            #expect(try await c.value(forKey: "age") == "newer")
            for store in [storeA, storeB, storeC] { await store.close() }
        }
    }

    @Test func aDeadRemoteIsAMissAndTheSyncAPINeverWaitsOnIt() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let directory = try TemporaryDirectory()
            let (storage, store) = try Self.storage(port: proxy.port, deadline: .seconds(1), directory: directory.url)
            proxy.set(.blackHole)
            // No remote error reaches the caller.
            try await storage.setValue("local", forKey: "k")
            #expect(try await storage.value(forKey: "k") == "local")
            #expect(try await storage.value(forKey: "absent") == nil)
            #expect(try await storage.removeValue(forKey: "k"))
            // The sync API reaches memory and disk only: it completes while an async write of
            // the same key still waits (1 s) on the black-holed server.
            let asyncDone = Tally()
            let writer = Task {
                try await storage.setValue("async", forKey: "same")
                asyncDone.add()
            }
            try await Task.sleep(for: .milliseconds(20))
            let read = try syncWriteThenRead(storage, "sync", forKey: "same")
            #expect(asyncDone.value == 0, "the sync write waited for the network")
            #expect(read == "sync")
            try await writer.value
            #expect(store.statistics.errors > 0)
            await store.close()
            await proxy.close()
        }
    }

    /// The sync API cannot reach the network: a sync call that names the shared tier throws
    /// instead of silently reading around it or leaving its copy behind a removal.
    @Test func aSyncCallNamingTheSharedTierThrowsAndChangesNothing() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // (An hour's local copy: a stalled machine must not let it age out mid-test.)
            let (storage, store) = try Self.storage(port: server.port, localCopyMaxAge: .seconds(3_600))
            try await storage.setValue("shared", forKey: "k", expiry: .seconds(3_600))
            #expect(syncCallsNamingTheSharedTier(storage, forKey: "k").allSatisfy { $0 })
            let error = syncRemovalError(storage, forKey: "k")
            #expect(error?.code == .invalidInput)
            #expect(error?.message.contains("remote") == true)
            // Nothing changed: the remote copy and the local one are both still there, and the
            // async read after the refused removal returns the value (it was never removed).
            #expect(try await store.entry(forKey: "k") != nil)
            #expect(try await storage.value(forKey: "k", tiers: .memory) == "shared")
            #expect(try await storage.removeValue(forKey: "k", tiers: .all))
            #expect(try await storage.value(forKey: "k") == nil, "a removed value never resurfaces")
            await store.close()
        }
    }

    @Test func afterAFailedRemoteReadTheLoadedValueIsNotWrittenBack() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            // A store without leases in the way: a plain shared tier wrapper.
            let store = try MemcachedStore(configuration: .init(port: proxy.port, namespace: "s:", deadline: .seconds(1)))
            let plain = PlainSharedTier(store)
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [plain], transformer: .string)
            proxy.set(.blackHole)
            #expect(try await storage.value(forKey: "k", expiry: .seconds(3_600)) { _ in "loaded" } == "loaded")
            proxy.set(.pass)
            // Wait until the store reads again (its breaker and back-off let it reconnect).
            let end = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < end {
                do {
                    _ = try await store.entry(forKey: "probe")
                    break
                } catch {
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            let reader = try MemcachedStore(configuration: .init(port: server.port, namespace: "s:", deadline: .seconds(300)))
            #expect(try await reader.entry(forKey: "k") == nil)
            // With the remote healthy, a load is written through.
            #expect(try await storage.value(forKey: "k2", expiry: .seconds(3_600)) { _ in "loaded2" } == "loaded2")
            #expect(try await reader.entry(forKey: "k2")?.data == Data("loaded2".utf8))
            await store.close()
            await reader.close()
            await proxy.close()
        }
    }

    // MARK: - Lease duration

    @Test func theLeaseTakenOnAMissLastsTheConfiguredLeaseDuration() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // Given a store whose leases last 3 s (the default is 30 s)
            let store = try MemcachedStore(configuration: .init(
                port: server.port, namespace: "s:", deadline: .seconds(300), leaseDuration: .seconds(3)))
            #expect(store.leaseDuration == .seconds(3))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            let gate = AsyncGate()
            let loading = Tally(0)
            // Before the lease is taken: a stalled task can start its loader long after the lease.
            let launched = ContinuousClock.now
            // When get-or-load wins the lease and its loader is still running
            let load = Task {
                try await storage.value(forKey: "leased", expiry: .seconds(3_600)) { _ in
                    loading.add()
                    try await gate.wait()
                    return "filled"
                }
            }
            while loading.value == 0 { try await Task.sleep(for: .milliseconds(5)) }
            // Then the placeholder the lease created expires within 3 s, not 30 s
            let key = String(decoding: try RemoteKey(namespace: "s:").key(for: "leased"), as: UTF8.self)
            let reply = try rawExchange(port: server.port, Array("mg \(key) t\r\n".utf8))
            if reply.hasPrefix("EN") {
                // Already gone: only right if the machine stalled past the 3 s lease.
                #expect(ContinuousClock.now - launched >= .seconds(2), "the placeholder vanished early: \(reply)")
            } else {
                let token = try #require(reply.split(separator: " ").first { $0.hasPrefix("t") }?.dropFirst()
                    .trimmingCharacters(in: .whitespacesAndNewlines), "no TTL in \(reply)")
                let ttl = try #require(Int(token))
                #expect((0...3).contains(ttl), "the lease's placeholder lives \(ttl) s; leaseDuration is 3 s")
            }
            gate.open()
            #expect(try await load.value == "filled")
            #expect(store.statistics.leaseWins == 1)
            // And the fill replaced the placeholder with the value's own TTL (an hour), unless
            // the machine stalled past the 3 s lease and the server refused the late fill.
            let filled = try rawExchange(port: server.port, Array("mg \(key) t\r\n".utf8))
            if filled.hasPrefix("EN") {
                #expect(store.statistics.rejectedFills == 1, "no value after a fill that was not refused")
                await store.close()
                return
            }
            let filledToken = try #require(filled.split(separator: " ").first { $0.hasPrefix("t") }?.dropFirst()
                .trimmingCharacters(in: .whitespacesAndNewlines))
            let filledTTL = try #require(Int(filledToken))
            #expect(filledTTL > 3 && filledTTL <= 3_600, "after the fill: \(filled)")
            await store.close()
        }
    }

    @Test func anUnfilledLeaseEndsAfterLeaseDurationAndAnotherCallerWinsIt() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // (2 s, not 1: memcached's clock ticks once a second, so a 1 s lease can end at the
            // next tick, which under load may come between the two reads below.)
            let store = try MemcachedStore(configuration: .init(
                port: server.port, namespace: "s:", deadline: .seconds(300), leaseDuration: .seconds(2)))
            // Given a lease won and never filled (its holder died)
            let taken = ContinuousClock.now
            guard case .won = try await store.leasedEntry(forKey: "orphan", leaseDuration: store.leaseDuration) else {
                Issue.record("the first read did not win the lease")
                return
            }
            switch try await store.leasedEntry(forKey: "orphan", leaseDuration: store.leaseDuration) {
            case .busy(stale: nil):
                break
            case .won where ContinuousClock.now - taken >= .seconds(1):
                // The machine stalled past the lease's end (memcached counts whole seconds): the
                // lease already ended, which is what the rest of the test waits for.
                break
            default:
                Issue.record("a second read did not find the lease busy")
                return
            }
            // When leaseDuration (2 s; memcached counts whole seconds) has passed (polled for up
            // to 25 s: a loaded machine stalls, and the default 30 s lease must still fail this)
            let end = ContinuousClock.now + .seconds(25)
            var wonAgain = false
            while !wonAgain, ContinuousClock.now < end {
                try await Task.sleep(for: .milliseconds(100))
                if case .won = try await store.leasedEntry(forKey: "orphan", leaseDuration: store.leaseDuration) { wonAgain = true }
            }
            // Then the key is leased afresh instead of waiting 30 s
            #expect(wonAgain, "the orphaned lease outlived 25 s, not its leaseDuration of 2 s")
            await store.close()
        }
    }

    /// A loader that throws gives its lease back: the next caller wins it at once and fills
    /// the key, instead of waiting out `leaseWaitLimit` and loading without filling.
    @Test func aLoaderThatThrowsReleasesItsLease() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            func make() throws -> (Storage<String, String>, MemcachedStore) {
                let store = try MemcachedStore(configuration: .init(
                    port: server.port, namespace: "s:", deadline: .seconds(300), leaseWaitLimit: .seconds(30)))
                return (try Storage(configuration: .init(), additionalTiers: [store], transformer: .string), store)
            }
            let (a, storeA) = try make()
            let (b, storeB) = try make()
            let gate = AsyncGate()
            let failing = Task {
                try await a.value(forKey: "k", expiry: .seconds(3_600)) { _ in
                    try await gate.wait()
                    throw StorageError(code: .io, message: "the source is down")
                }
            }
            // A holds the lease: B finds it busy and waits.
            let end = ContinuousClock.now + .seconds(120)
            while storeA.statistics.leaseWins == 0, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(5)) }
            #expect(storeA.statistics.leaseWins == 1)
            let waiting = Task { try await b.value(forKey: "k", expiry: .seconds(3_600)) { _ in "from B" } }
            while storeB.statistics.leaseWaits == 0, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(5)) }
            gate.open()
            await #expect(throws: StorageError.self) { try await failing.value }
            #expect(try await waiting.value == "from B")
            // B took the released lease and filled the key for the fleet.
            #expect(storeB.statistics.leaseWins == 1)
            #expect(try await storeA.entry(forKey: "k") != nil)
            await storeA.close()
            await storeB.close()
        }
    }

    /// A lease read that times out (a slow but live server) loads locally and leaves the
    /// fleet's value alone: failure is a miss, not a purge of the shared hot keys.
    @Test func aTimedOutLeaseReadNeverDeletesTheSharedValue() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let writer = try MemcachedStore(configuration: .init(port: server.port, namespace: "s:", deadline: .seconds(300)))
            let (slow, slowStore) = try Self.storage(port: proxy.port, deadline: .milliseconds(50))
            let keys = (0..<40).map { "hot-\($0)" }
            for key in keys {
                try await writer.setValue(Data("shared".utf8), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            proxy.set(.delay(.milliseconds(250)))
            for key in keys { #expect(try await slow.value(forKey: key, expiry: .seconds(3_600)) { _ in "loaded" } != nil) }
            proxy.set(.pass)
            var kept = 0
            for key in keys where try await writer.entry(forKey: key)?.data == Data("shared".utf8) { kept += 1 }
            #expect(kept == keys.count, "\(keys.count - kept) shared values were deleted by a slow read")
            #expect(slowStore.statistics.timeouts > 0 || slowStore.statistics.breakerRejections > 0)
            await writer.close()
            await slowStore.close()
            await proxy.close()
        }
    }

    @Test func aStampedeAcrossFourStoragesRunsTheLoaderOnce() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            // Waiters wait for the winner's fill however slow the machine: one loader, whatever the load.
            let pairs = try (0..<4).map { _ in try Self.storage(port: server.port, leaseWaitLimit: .seconds(60)) }
            let calls = Tally(0)
            let values = try await withThrowingTaskGroup(of: String.self) { group in
                for (storage, _) in pairs {
                    for _ in 0..<32 {
                        group.addTask {
                            try await storage.value(forKey: "hot", expiry: .seconds(3_600)) { _ in
                                calls.add()
                                try await Task.sleep(for: .milliseconds(200))
                                return "computed"
                            }
                        }
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(values.count == 128 && values.allSatisfy { $0 == "computed" })
            #expect(calls.value == 1)
            let wins = pairs.map { $0.1.statistics.leaseWins }.reduce(0, +)
            #expect(wins == 1)
            for (_, store) in pairs { await store.close() }
        }
    }

    @Test func aSoftInvalidationServesTheOldValueWhileOneCallerRefreshes() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let pairs = try (0..<4).map { _ in try Self.storage(port: server.port) }
            let (first, _) = pairs[0]
            #expect(try await first.value(forKey: "feed", expiry: .seconds(3_600)) { _ in "old" } == "old")
            try await first.invalidate(forKey: "feed")
            for (storage, _) in pairs { try await storage.removeValue(forKey: "feed", tiers: .memory) }
            let refreshes = Tally(0)
            let answered = Tally(0)
            let values = try await withThrowingTaskGroup(of: String.self) { group in
                for (storage, _) in pairs {
                    for _ in 0..<32 {
                        group.addTask {
                            let value = try await storage.value(forKey: "feed", expiry: .seconds(3_600)) { _ in
                                refreshes.add()
                                // The refresh ends only once every caller has its answer: a caller
                                // that waited for it would hold it up to this limit and get "new".
                                let limit = ContinuousClock.now + .seconds(300)
                                while answered.value < 128, ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(10)) }
                                return "new"
                            }
                            answered.add()
                            return value
                        }
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(values.count == 128 && values.allSatisfy { $0 == "old" }, "everyone answered with the old value, before the refresh ended")
            // The refresh lands once; afterwards readers get the new value.
            #expect(try await pollUntil { (try? await first.value(forKey: "feed", tiers: .remote)) == "new" })
            #expect(refreshes.value == 1)
            let (fresh, freshStore) = try Self.storage(port: server.port)
            #expect(try await fresh.value(forKey: "feed") == "new")
            await freshStore.close()
            for (_, store) in pairs { await store.close() }
        }
    }

    @Test func valuesForKeysReadsTheMemoryMissesInOneRemoteBatchAndCopiesThemIntoMemory() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let directory = try TemporaryDirectory()
            let (a, storeA) = try Self.storage(port: server.port)
            let (b, storeB) = try Self.storage(port: server.port, directory: directory.url)
            let keys = (0..<40).map { "batch key \($0) ✓" }
            for key in keys { try await a.setValue("value of \(key)", forKey: key, expiry: .seconds(3_600)) }
            #expect(storeA.statistics.errors == 0, "A's writes reached the server (timeouts: \(storeA.statistics.timeouts))")
            // B holds one key in memory already and one on its own disk; two keys exist nowhere.
            #expect(try await b.value(forKey: keys[0]) == "value of \(keys[0])")
            try await b.setValue("b's own", forKey: keys[1], tiers: [.disk])
            let before = storeB.statistics
            let found = try await b.values(forKeys: keys + ["absent 1", "absent 2", keys[5]])
            #expect(found.count == 40)
            #expect(found[keys[1]] == "b's own", "the disk answers before the remote")
            for key in keys where key != keys[1] { #expect(found[key] == "value of \(key)") }
            #expect(found["absent 1"] == nil && found["absent 2"] == nil)
            let after = storeB.statistics
            #expect(after.batchReads - before.batchReads == 1, "one quiet batch for every memory and disk miss")
            #expect(after.hits - before.hits == 38)
            // The two absent keys, and the fleet's clear time if B's second of trust in it ran out
            // (a stalled machine) and B read it again.
            #expect((2...3).contains(after.misses - before.misses))
            // The remote hits were copied into B's memory: a second read asks the remote nothing.
            #expect(try await b.values(forKeys: Array(keys[2...])).count == 38)
            #expect(storeB.statistics.batchReads == after.batchReads)
            #expect(try await b.entry(forKey: keys[7])?.tier == .memory)
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func aBulkLoadWritesTheRemoteInOneBatchAndAnotherStorageReadsEveryValue() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let directory = try TemporaryDirectory()
            let (a, storeA) = try Self.storage(port: server.port, directory: directory.url)
            let (b, storeB) = try Self.storage(port: server.port)
            let keys = (0..<40).map { "bulk key \($0)" }
            let loaded = try await a.values(forKeys: keys, expiry: .seconds(3_600)) { missing in
                Dictionary(uniqueKeysWithValues: missing.map { ($0, "value of \($0)") })
            }
            #expect(loaded.count == 40)
            // One quiet batch carried every value; A's disk holds them too
            #expect(storeA.statistics.batchWrites == 1 && storeA.statistics.writes == 40 && storeA.statistics.errors == 0)
            #expect(try await a.values(forKeys: keys, tiers: [.disk]) == loaded)
            // Another machine reads them all from memcached, loading nothing
            let read = try await b.values(forKeys: keys, expiry: .seconds(3_600)) { missing in
                Issue.record("loaded \(missing.count) keys A had stored")
                return [:]
            }
            #expect(read == loaded)
            #expect(storeB.statistics.batchReads == 1)
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func valuesForKeysOfTheRemoteAloneSkipsUndecodableBytesAndCopiesNothingLocally() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (b, storeB) = try Self.storage(port: server.port)
            for key in ["one", "two", "three"] { try await b.setValue("value of \(key)", forKey: key, tiers: [.remote]) }
            // Bytes that are not UTF-8, written under a key by a client that skipped the transformer.
            try await storeB.setValue(Data([0xff, 0xfe, 0xfd]), forKey: "bad", expiry: nil, metadata: nil, isCompressible: false)
            let before = b.statistics
            let batchesBefore = storeB.statistics.batchReads
            let found = try await b.values(forKeys: ["two", "bad", "absent", "one", "two", "three", "bad"], tiers: [.remote])
            #expect(found == ["one": "value of one", "two": "value of two", "three": "value of three"])
            #expect(storeB.statistics.batchReads - batchesBefore == 1, "one batch for all the keys")
            let after = b.statistics
            #expect(after.decodingFailures - before.decodingFailures == 1, "the repeated bad key decoded once")
            #expect(after.tiers[.remote]?.hits ?? 0 == (before.tiers[.remote]?.hits ?? 0) + 3, "the repeated good key counted once")
            // The undecodable bytes were removed from the remote; nothing was copied into memory.
            #expect(try await storeB.entry(forKey: "bad") == nil)
            #expect(try await b.entry(forKey: "one", tiers: [.memory]) == nil)
            #expect(try await storeB.entry(forKey: "one") != nil)
            await storeB.close()
        }
    }

    @Test func valuesForKeysTreatsADeadRemoteAsMisses() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (a, storeA) = try Self.storage(port: server.port)
            let (b, storeB) = try Self.storage(port: server.port, deadline: .seconds(1))
            try await a.setValue("remote", forKey: "r", expiry: .seconds(3_600))
            try await b.setValue("local", forKey: "l", expiry: .seconds(3_600))
            await server.kill()
            // No remote error reaches the caller: the memory hit stands, the remote key misses.
            let found = try await b.values(forKeys: ["l", "r"])
            #expect(found == ["l": "local"])
            #expect(storeB.statistics.errors > 0)
            #expect(b.statistics.tiers[.remote]?.errors ?? 0 > 0)
            await storeA.close()
            await storeB.close()
        }
    }
}

/// The synchronous API (a sync function picks the sync overloads).
func syncWriteThenRead(_ storage: Storage<String, String>, _ value: String, forKey key: String) throws -> String? {
    try storage.setValue(value, forKey: key, tiers: [.memory, .disk])
    return try storage.value(forKey: key, tiers: [.memory, .disk])
}

/// The error of a synchronous removal from every tier (`nil` if it returned).
func syncRemovalError(_ storage: Storage<String, String>, forKey key: String) -> StorageError? {
    do {
        try storage.removeValue(forKey: key, tiers: .all)
        return nil
    } catch {
        return error as? StorageError
    }
}

/// Synchronous calls on `storage` that name its shared tier (or leave the default tiers, which
/// do): each must throw, and change nothing.
func syncCallsNamingTheSharedTier(_ storage: Storage<String, String>, forKey key: String) -> [Bool] {
    [
        (try? storage.setValue("sync", forKey: key)) == nil,
        (try? storage.value(forKey: key)) == nil,
        (try? storage.entry(forKey: key)) == nil,
        (try? storage.containsValue(forKey: key)) == nil,
        (try? storage.removeValue(forKey: key, tiers: .all)) == nil,
        (try? storage.removeAll()) == nil,
    ]
}

/// A shared tier without leases, forwarding to a `MemcachedStore` (get-or-load then takes the
/// plain read path).
final class PlainSharedTier: SharedCacheTier {
    let base: MemcachedStore
    init(_ base: MemcachedStore) { self.base = base }
    var tierID: StorageTier { base.tierID }
    var localCopyMaxAge: Duration? { base.localCopyMaxAge }
    var copiesHitsToLocalTiers: Bool { false }
    var tierStatistics: TierStatistics { base.tierStatistics }
    func entry(forKey key: String) async throws -> TierEntry? { try await base.entry(forKey: key) }
    func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) async throws {
        try await base.setValue(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible)
    }
    func removeValue(forKey key: String) async throws -> Bool { try await base.removeValue(forKey: key) }
    func containsValue(forKey key: String) async throws -> Bool { try await base.containsValue(forKey: key) }
    func keys(withPrefix prefix: String) async throws -> [String] { [] }
    func removeAll() async throws {}
    func removeExpired() async throws -> Int { 0 }
    func close() async { await base.close() }
}
#endif

#if Memcached
/// Four real processes share one server: leases make one loader run across all of them.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct MemcachedMultiProcessTests {
    static var helper: URL {
        get throws {
            let binary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
            var directory = binary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("LarderMemcachedHelper")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
            throw TestFailure("LarderMemcachedHelper not found next to \(binary.path)")
        }
    }

    /// With one server, and with a pool of three (one hot key on each server: each lease lives
    /// on its key's own server), every key's loader runs once across 4 processes × 32 tasks.
    @Test(arguments: [1, 3])
    func aStampedeOfFourProcessesTimes32TasksRunsTheLoaderOncePerKey(servers count: Int) async throws {
        try await withChildProcesses { scope in
            var servers: [MemcachedServer] = []
            for _ in 0..<count { servers.append(try await MemcachedServer.start(in: scope)) }
            let ports = servers.map(\.port)
            // One key per server, picked by the ring the helpers' stores build.
            let remoteKey = try RemoteKey(namespace: "mp:")
            let ring = KetamaRing(servers: ports.map { ("127.0.0.1", $0, 1) })
            var keys: [String] = []
            for server in 0..<count {
                keys.append(try #require((0..<1_000).map { "hot-\($0)" }.first { ring.server(for: remoteKey.key(for: $0)) == server }))
            }
            let directory = try TemporaryDirectory()
            let countFile = directory.url.appendingPathComponent("calls").path
            let start = Int((Date().timeIntervalSince1970 + 1.5) * 1000)
            let helpers = try (0..<4).map { _ in
                try scope.start(try Self.helper, arguments: [
                    "stampede", ports.map(String.init).joined(separator: ","), keys.joined(separator: ","), countFile, "32", "\(start)",
                ])
            }
            for helper in helpers {
                #expect(await helper.waitForExit(timeout: .seconds(300)))
                #expect(helper.exitedCleanly, "\(helper.standardError)")
                await helper.waitForOutput()
                #expect(helper.standardOutput.contains("values \(32 * count) computed"), "\(helper.standardOutput)")
            }
            let calls = (try? String(contentsOfFile: countFile, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
            for key in keys {
                #expect(calls.filter { $0 == key }.count == 1, "the loader of \(key) ran \(calls.filter { $0 == key }.count) times across 4 processes")
            }
        }
    }
}
#endif
