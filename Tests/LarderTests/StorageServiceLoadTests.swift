import Foundation
import LarderTestSupport
import Synchronization
import Testing
@testable import Larder

/// Get-or-load for services: fail-safe stale values, soft and hard timeouts, refresh ahead of
/// expiry and bulk loads, through memory and disk, with an injected wall clock (expiry) and a
/// manual clock (timeouts), and loaders that fail, hang and succeed on command.
@Suite(.timeLimit(.minutes(10)))
struct StorageServiceLoadTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))
    let loadClock = ManualClock()

    init() throws {
        folder = try TemporaryDirectory("service-load")
    }

    func makeStorage(disk: Bool = true, loading: LoadOptions = LoadOptions(maxStale: .seconds(3_600))) throws -> Storage<String, String> {
        var configuration = Storage<String, String>.Configuration(directory: disk ? folder.url.appendingPathComponent("cache") : nil)
        configuration.now = clock.closure
        configuration.loading = loading
        configuration.loadClock = loadClock
        return try Storage(configuration: configuration, transformer: .string)
    }

    /// Collects a storage's events from now on.
    final class EventLog: Sendable {
        let seen = Locked<[StorageEvent]>([])
        let task: Task<Void, Never>

        init(_ storage: Storage<String, String>) {
            let events = storage.events(bufferSize: 1_024)
            let seen = self.seen
            task = Task { for await event in events { seen.withLock { $0.append(event) } } }
        }

        func contains(_ kind: StorageEvent.Kind, _ key: String) async -> Bool {
            await pollUntil { self.seen.withLock { $0.contains { $0.kind == kind && $0.key == key } } }
        }

        deinit { task.cancel() }
    }

    /// Runs `body` in a synchronous context, so that it calls the synchronous API (an async
    /// context resolves `storage.value(forKey:)` to the async overload).
    func sync<T>(_ body: () throws -> T) rethrows -> T { try body() }

    // MARK: - Fail-safe

    @Test(arguments: [false, true])
    func aFailingLoaderGetsTheStaleValueMarkedStaleWhilePlainReadsNeverSeeIt(disk: Bool) async throws {
        // Given a value loaded with a 60 s lifetime, now two minutes old
        let storage = try makeStorage(disk: disk)
        let log = EventLog(storage)
        let loader = LoaderControl<String>(.succeed("v1"))
        _ = try await storage.value(forKey: "k", expiry: .seconds(60)) { _ in try await loader.load() }
        clock.advance(by: 120)
        // Then no read without a loader returns it
        #expect(try sync { try storage.value(forKey: "k") } == nil)
        #expect(try await storage.value(forKey: "k") == nil)
        #expect(try await storage.entry(forKey: "k") == nil)
        #expect(try await storage.values(forKeys: ["k"]).isEmpty)
        #expect(try sync { try storage.containsValue(forKey: "k") } == false)
        #expect(try await storage.keys(withPrefix: "").isEmpty)
        // When the loader fails, get-or-load returns the old value, marked stale
        loader.set(.fail)
        let entry = try await storage.entry(forKey: "k", expiry: .seconds(60)) { _ in try await loader.load() }
        #expect(entry.value == "v1" && entry.isStale)
        #expect(entry.tier == .memory)
        #expect(storage.statistics.staleServed == 1)
        #expect(storage.statistics.loadFailures == 1)
        #expect(await log.contains(.staleServed, "k"))
        // And past maxStale there is nothing left to serve
        clock.advance(by: 3_600)
        await #expect(throws: LoaderControl<String>.Failure.self) {
            try await storage.value(forKey: "k", expiry: .seconds(60), options: LoadOptions(maxStale: .seconds(3_600), failSafeThrottle: .zero)) { _ in
                try await loader.load()
            }
        }
    }

    @Test func theDiskKeepsStaleCopiesForTheNextProcess() async throws {
        // Given a value loaded by one storage, which then closes (a process that ends)
        do {
            let first = try makeStorage()
            _ = try await first.value(forKey: "k", expiry: .seconds(60)) { _ in "v1" }
            await first.close()
        }
        clock.advance(by: 600)
        // When a new storage on the same directory finds the source down
        let second = try makeStorage()
        #expect(try sync { try second.value(forKey: "k") } == nil)
        let entry = try await second.entry(forKey: "k", expiry: .seconds(60)) { _ in throw LoaderControl<String>.Failure() }
        // Then it serves the disk's stale copy
        #expect(entry.value == "v1" && entry.isStale && entry.tier == .disk)
    }

    @Test func afterAFailureTheLoaderIsNotCalledAgainForTheThrottle() async throws {
        let storage = try makeStorage(loading: LoadOptions(maxStale: .seconds(3_600), failSafeThrottle: .seconds(30)))
        let loader = LoaderControl<String>(.succeed("v1"))
        let load: @Sendable (String) async throws -> String = { _ in try await loader.load() }
        _ = try await storage.value(forKey: "k", expiry: .seconds(60), orLoad: load)
        clock.advance(by: 120)
        loader.set(.fail)
        #expect(try await storage.entry(forKey: "k", expiry: .seconds(60), orLoad: load).isStale)
        #expect(loader.calls == 2)
        // Within the throttle: stale, and the loader is left alone
        clock.advance(by: 20)
        #expect(try await storage.entry(forKey: "k", expiry: .seconds(60), orLoad: load).isStale)
        #expect(loader.calls == 2)
        // Past it: the loader runs again, and its value is fresh
        clock.advance(by: 11)
        loader.set(.succeed("v2"))
        let entry = try await storage.entry(forKey: "k", expiry: .seconds(60), orLoad: load)
        #expect(entry.value == "v2" && !entry.isStale && entry.tier == .loader)
        #expect(loader.calls == 3)
    }

    @Test(arguments: ["set", "remove", "take", "removeAll", "async set", "async remove"])
    func aWriteOrRemovalDropsTheStaleCopySoNoOlderValueComesBack(change: String) async throws {
        let storage = try makeStorage()
        _ = try await storage.value(forKey: "k", expiry: .seconds(60)) { _ in "v1" }
        switch change {
        case "set": try sync { try storage.setValue("v2", forKey: "k", expiry: .seconds(60)) }
        case "remove": _ = try sync { try storage.removeValue(forKey: "k") }
        case "take": _ = try sync { try storage.takeValue(forKey: "k") }
        case "removeAll": _ = try sync { try storage.removeAll() }
        case "async set": try await storage.setValue("v2", forKey: "k", expiry: .seconds(60))
        default: _ = try await storage.removeValue(forKey: "k")
        }
        clock.advance(by: 120)
        // A failing loader finds no stale copy of v1, in memory or on disk
        await #expect(throws: LoaderControl<String>.Failure.self) {
            try await storage.value(forKey: "k", expiry: .seconds(60)) { _ in throw LoaderControl<String>.Failure() }
        }
        let reopened = try makeStorage()
        await #expect(throws: LoaderControl<String>.Failure.self) {
            try await reopened.value(forKey: "k", expiry: .seconds(60)) { _ in throw LoaderControl<String>.Failure() }
        }
    }

    @Test func optionsOutOfRangeAreClearErrors() async throws {
        // Fail-safe on a storage that keeps no stale copies
        let plain = try makeStorage(loading: LoadOptions())
        await #expect(throws: StorageError.self) {
            try await plain.value(forKey: "k", options: LoadOptions(maxStale: .seconds(60))) { _ in "v" }
        }
        do {
            _ = try await plain.value(forKey: "k", options: LoadOptions(refreshAfter: 1.5)) { _ in "v" }
            Issue.record("refreshAfter 1.5 was accepted")
        } catch let error as StorageError {
            #expect(error.code == .invalidInput && error.message.contains("refreshAfter"))
        }
        for options in [LoadOptions(softTimeout: .seconds(2), hardTimeout: .seconds(1)), LoadOptions(hardTimeout: .zero),
                        LoadOptions(earlyRefreshBeta: -1), LoadOptions(failSafeThrottle: .seconds(-1))] {
            await #expect(throws: StorageError.self) { try await plain.value(forKey: "k", options: options) { _ in "v" } }
        }
        // A bad default is refused when the storage is made
        do {
            _ = try makeStorage(loading: LoadOptions(maxStale: .seconds(-5)))
            Issue.record("a negative maxStale was accepted")
        } catch let error as StorageError {
            #expect(error.code == .invalidConfiguration && error.message.contains("maxStale"))
        }
        // Nothing was loaded or stored by a refused call
        #expect(plain.statistics.loads == 0)
    }

    // MARK: - Timeouts

    @Test(arguments: [false, true])
    func aSoftTimeoutReturnsTheStaleValueAndTheLoaderFinishesInTheBackground(disk: Bool) async throws {
        // Given an expired value and a loader that hangs
        let storage = try makeStorage(disk: disk, loading: LoadOptions(maxStale: .seconds(3_600), softTimeout: .seconds(1)))
        let log = EventLog(storage)
        let loader = LoaderControl<String>(.succeed("v1"))
        let load: @Sendable (String) async throws -> String = { _ in try await loader.load() }
        _ = try await storage.value(forKey: "k", expiry: .seconds(60), orLoad: load)
        clock.advance(by: 120)
        loader.set(.hang)
        let call = Task { try await storage.entry(forKey: "k", expiry: .seconds(60), orLoad: load) }
        #expect(await loader.waitForHanging(1))
        #expect(await loadClock.waitForSleepers(1))
        // When the soft timeout passes
        loadClock.advance(by: .seconds(1))
        // Then the call returns the stale value and the loader keeps running
        let entry = try await call.value
        #expect(entry.value == "v1" && entry.isStale)
        #expect(storage.statistics.softTimeouts == 1 && storage.statistics.staleServed == 1)
        #expect(await log.contains(.softTimeout, "k"))
        #expect(loader.hangingCount == 1 && loader.cancellations == 0)
        // A second caller meanwhile joins that run rather than starting a loader
        let second = Task { try await storage.entry(forKey: "k", expiry: .seconds(60), orLoad: load) }
        #expect(await loadClock.waitForSleepers(1))
        #expect(loader.calls == 2)
        // When the loader finishes, its value is stored and served fresh
        loader.release(.success("v2"))
        #expect(try await second.value.value == "v2")
        #expect(try await pollUntil { try sync { try storage.value(forKey: "k") } == "v2" })
        #expect(loader.calls == 2)
    }

    @Test func aHardTimeoutWithNoStaleValueThrowsAndCancelsTheLoader() async throws {
        let storage = try makeStorage(loading: LoadOptions(maxStale: .seconds(3_600), hardTimeout: .seconds(5)))
        let log = EventLog(storage)
        let loader = LoaderControl<String>(.hang)
        let call = Task { try await storage.value(forKey: "k", expiry: .seconds(60)) { _ in try await loader.load() } }
        #expect(await loader.waitForHanging(1))
        #expect(await loadClock.waitForSleepers(1))
        loadClock.advance(by: .seconds(5))
        do {
            _ = try await call.value
            Issue.record("the call returned past its hard timeout")
        } catch let error as StorageError {
            #expect(error.code == .timeout && error.message.contains("hardTimeout"))
        }
        // Nobody waits any more: the loader is cancelled, and nothing was stored
        #expect(await pollUntil { loader.cancellations == 1 })
        #expect(try sync { try storage.value(forKey: "k") } == nil)
        #expect(storage.statistics.hardTimeouts == 1)
        #expect(await log.contains(.hardTimeout, "k"))
    }

    @Test func aSoftTimeoutWithNoStaleValueWaitsOnUntilTheHardTimeoutFromTheStart() async throws {
        let storage = try makeStorage(loading: LoadOptions(maxStale: .seconds(3_600), softTimeout: .seconds(1), hardTimeout: .seconds(5)))
        let loader = LoaderControl<String>(.hang)
        let call = Task { try await storage.value(forKey: "k", expiry: .seconds(60)) { _ in try await loader.load() } }
        #expect(await loader.waitForHanging(1))
        #expect(await loadClock.waitForSleepers(2))
        // At the soft timeout there is no stale value: the call goes on waiting
        loadClock.advance(by: .seconds(1))
        #expect(await loadClock.waitForSleepers(1))
        #expect(loader.hangingCount == 1 && storage.statistics.softTimeouts == 0)
        // And gives up five seconds after it started, not six
        loadClock.advance(by: .seconds(4))
        await #expect(throws: StorageError.self) { try await call.value }
        #expect(storage.statistics.hardTimeouts == 1)
        #expect(await pollUntil { loader.cancellations == 1 })
    }

    @Test func anInsertIfAbsentDropsTheStaleCopyOfTheTierThatDecided() async throws {
        let storage = try makeStorage()
        _ = try await storage.value(forKey: "k", expiry: .seconds(60)) { _ in "v1" }
        clock.advance(by: 120)
        #expect(try sync { try storage.insertValue("v2", forKey: "k", expiry: .seconds(60)) })
        clock.advance(by: 120)
        let reopened = try makeStorage()
        await #expect(throws: LoaderControl<String>.Failure.self) {
            try await reopened.value(forKey: "k", expiry: .seconds(60)) { _ in throw LoaderControl<String>.Failure() }
        }
    }

    @Test func aHardTimeoutWithAStaleValueServesItAndThrottles() async throws {
        let storage = try makeStorage(loading: LoadOptions(maxStale: .seconds(3_600), hardTimeout: .seconds(5)))
        let loader = LoaderControl<String>(.succeed("v1"))
        let load: @Sendable (String) async throws -> String = { _ in try await loader.load() }
        _ = try await storage.value(forKey: "k", expiry: .seconds(60), orLoad: load)
        clock.advance(by: 120)
        loader.set(.hang)
        let call = Task { try await storage.entry(forKey: "k", expiry: .seconds(60), orLoad: load) }
        #expect(await loader.waitForHanging(1))
        #expect(await loadClock.waitForSleepers(1))
        loadClock.advance(by: .seconds(5))
        let entry = try await call.value
        #expect(entry.value == "v1" && entry.isStale)
        #expect(await pollUntil { loader.cancellations == 1 })
        // The throttle keeps the next call from waiting out another hard timeout
        #expect(try await storage.entry(forKey: "k", expiry: .seconds(60), orLoad: load).isStale)
        #expect(loader.calls == 2)
    }

    // MARK: - Refresh ahead

    @Test(arguments: [false, true])
    func aHitPastTheRefreshPointReturnsAtOnceAndRefreshesOnceInTheBackground(disk: Bool) async throws {
        let storage = try makeStorage(disk: disk, loading: LoadOptions(refreshAfter: 0.8))
        let log = EventLog(storage)
        let loader = LoaderControl<String>(.succeed("v1"))
        let load: @Sendable (String) async throws -> String = { _ in try await loader.load() }
        _ = try await storage.value(forKey: "k", expiry: .seconds(100), orLoad: load)
        // Before the refresh point: a plain hit
        clock.advance(by: 50)
        #expect(try await storage.value(forKey: "k", expiry: .seconds(100), orLoad: load) == "v1")
        #expect(loader.calls == 1 && storage.statistics.refreshesStarted == 0)
        // Past it: twenty hits get the current value at once, and one refresh runs
        clock.advance(by: 35)
        loader.set(.hang)
        for _ in 0..<20 {
            let entry = try await storage.entry(forKey: "k", expiry: .seconds(100), orLoad: load)
            #expect(entry.value == "v1" && !entry.isStale)
        }
        #expect(await loader.waitForHanging(1))
        #expect(loader.calls == 2 && storage.statistics.refreshesStarted == 1)
        #expect(await log.contains(.refreshStarted, "k"))
        loader.release(.success("v2"))
        #expect(try await pollUntil { try sync { try storage.value(forKey: "k") } == "v2" })
        #expect(try sync { try storage.entry(forKey: "k")?.expirationDate } == clock.peek.addingTimeInterval(100))
    }

    @Test func aFailedRefreshKeepsTheValueAndIsReported() async throws {
        let storage = try makeStorage(loading: LoadOptions(refreshAfter: 0.5))
        let log = EventLog(storage)
        _ = try await storage.value(forKey: "k", expiry: .seconds(100)) { _ in "v1" }
        clock.advance(by: 60)
        #expect(try await storage.value(forKey: "k", expiry: .seconds(100)) { _ in throw LoaderControl<String>.Failure() } == "v1")
        #expect(await log.contains(.refreshFailed, "k"))
        #expect(storage.statistics.refreshFailures == 1)
        #expect(try sync { try storage.value(forKey: "k") } == "v1")
    }

    @Test func probabilisticEarlyRefreshStartsBeforeTheRefreshPointOnlyWhenAsked() async throws {
        // A large β makes XFetch's test pass as soon as the key has a load duration
        let storage = try makeStorage(loading: LoadOptions())
        let loader = LoaderControl<String>(.succeed("v1"))
        let load: @Sendable (String) async throws -> String = { _ in try await loader.load() }
        _ = try await storage.value(forKey: "k", expiry: .seconds(100), orLoad: load)
        clock.advance(by: 10)
        _ = try await storage.value(forKey: "k", expiry: .seconds(100), orLoad: load)
        #expect(storage.statistics.refreshesStarted == 0)
        _ = try await storage.value(forKey: "k", expiry: .seconds(100), options: LoadOptions(earlyRefreshBeta: 1e15), orLoad: load)
        #expect(storage.statistics.refreshesStarted == 1)
        #expect(await pollUntil { loader.calls == 2 })
    }

    // MARK: - The README's server recipe

    @Test func theReadmeServerRecipeServesTheLastGoodValueWhenTheSourceIsDownOrSlow() async throws {
        let cacheDirectory = folder.url.appendingPathComponent("recipe")
        let source = LoaderControl<Data>(.succeed(Data("page v1".utf8)))
        @Sendable func render() async throws -> Data { try await source.load() }
        // The recipe, as the README shows it (memcached left out: `additionalTiers: []`)
        let storage = try Storage<String, Data>(
            configuration: .init(directory: cacheDirectory, now: clock.closure, loading: LoadOptions(
                maxStale: .seconds(3_600),          // fail-safe: keep values an hour past expiry
                softTimeout: .milliseconds(100),    // slow source: the last good value after 100 ms
                hardTimeout: .seconds(2),           // never wait longer than 2 s
                refreshAfter: 0.8), loadClock: loadClock), // hot keys reload in the background before expiry
            additionalTiers: [], transformer: .data)
        let first = try await storage.entry(forKey: "home", expiry: .seconds(60)) { _ in try await render() }
        #expect(!first.isStale && first.tier == .loader)
        // The source goes down after the value expired: the last good value, marked stale
        clock.advance(by: 90)
        source.set(.fail)
        let page = try await storage.entry(forKey: "home", expiry: .seconds(60)) { _ in try await render() }
        #expect(page.isStale && page.value == Data("page v1".utf8))
    }

    // MARK: - Bulk

    @Test func aBulkLoadCallsTheLoaderOnceForEveryMissedKeyAndStoresTheValues() async throws {
        let storage = try makeStorage(loading: LoadOptions())
        try sync { try storage.setValue("cached", forKey: "a") }
        let loader = LoaderControl<String>(.succeed(""))
        let found = try await storage.values(forKeys: ["a", "b", "c", "b"], expiry: .seconds(60)) { keys in
            try await loader.loadMany(keys) { "loaded-\($0)" }
        }
        #expect(found == ["a": "cached", "b": "loaded-b", "c": "loaded-c"])
        #expect(loader.keysAsked == [["b", "c"]])
        // Stored on disk too: a new storage reads them without loading
        let reopened = try makeStorage(loading: LoadOptions())
        #expect(try sync { try reopened.value(forKey: "c", tiers: .disk) } == "loaded-c")
        #expect(try await reopened.values(forKeys: ["b", "c"]) { _ in throw LoaderControl<String>.Failure() } == ["b": "loaded-b", "c": "loaded-c"])
    }

    @Test func aBulkLoadJoinsASingleLoadInFlight() async throws {
        let storage = try makeStorage(loading: LoadOptions())
        let single = LoaderControl<String>(.hang)
        let call = Task { try await storage.value(forKey: "a", expiry: .seconds(60)) { _ in try await single.load() } }
        #expect(await single.waitForHanging(1))
        let bulk = LoaderControl<String>(.succeed(""))
        let many = Task {
            try await storage.values(forKeys: ["a", "b"], expiry: .seconds(60)) { keys in try await bulk.loadMany(keys) { "bulk-\($0)" } }
        }
        #expect(await pollUntil { bulk.keysAsked.count == 1 })
        single.release(.success("single-a"))
        #expect(try await many.value == ["a": "single-a", "b": "bulk-b"])
        #expect(try await call.value == "single-a")
        #expect(bulk.keysAsked == [["b"]] && single.calls == 1)
    }

    /// A storage of memory over two byte tiers that record their batches (no disk).
    func makeBatchStorage(
        _ fast: InMemoryByteTier, _ slow: InMemoryByteTier, loading: LoadOptions = LoadOptions()
    ) throws -> Storage<String, String> {
        var configuration = Storage<String, String>.Configuration()
        configuration.now = clock.closure
        configuration.loading = loading
        configuration.loadClock = loadClock
        configuration.logHandler = { _ in }
        return try Storage(configuration: configuration, additionalTiers: [fast, slow], transformer: .string)
    }

    @Test(arguments: [false, true])
    func aBulkLoadStoresItsValuesInOneBatchPerTier(failSafe: Bool) async throws {
        let fast = InMemoryByteTier(StorageTier("fast"), now: clock.closure)
        let slow = InMemoryByteTier(StorageTier("slow"), now: clock.closure)
        let storage = try makeBatchStorage(fast, slow, loading: failSafe ? LoadOptions(maxStale: .seconds(600)) : LoadOptions())
        let keys = (0..<50).map { "k\($0)" }
        let found = try await storage.values(forKeys: keys.shuffled(), expiry: .seconds(60)) { missing in
            Dictionary(uniqueKeysWithValues: missing.map { ($0, "v-\($0)") })
        }
        #expect(found.count == 50)
        // One call per byte tier, carrying every value (and, with fail-safe, every stale copy)
        let perTier = failSafe ? 100 : 50
        #expect(fast.batchSizes == [perTier] && slow.batchSizes == [perTier])
        for key in keys {
            for tier in [fast, slow] {
                let entry = try #require(tier.peek(key))
                #expect(String(decoding: entry.data, as: UTF8.self) == "v-\(key)")
                #expect(entry.expirationDate == clock.now.addingTimeInterval(60))
            }
        }
        // Every tier serves them without the loader; past their lifetime they are gone, and
        // with fail-safe a failing loader gets the stale copy.
        #expect(try await storage.values(forKeys: keys, tiers: [StorageTier("slow")]).count == 50)
        clock.advance(by: 61)
        #expect(try await storage.values(forKeys: keys).isEmpty)
        let afterExpiry = try? await storage.value(forKey: "k7", expiry: .seconds(60)) { _ in throw LoaderControl<String>.Failure() }
        #expect(afterExpiry == (failSafe ? "v-k7" : nil))
        #expect(storage.statistics.writes == 50 && storage.statistics.loadStoreFailures == 0)
    }

    @Test func aBulkLoadWhoseBatchFailsKeepsNoFasterCopyAndCountsEveryValue() async throws {
        let fast = InMemoryByteTier(StorageTier("fast"), now: clock.closure)
        let slow = InMemoryByteTier(StorageTier("slow"), now: clock.closure)
        let storage = try makeBatchStorage(fast, slow)
        slow.setFailing(writes: true)
        let found = try await storage.values(forKeys: ["k1", "k2", "k3"], expiry: .seconds(60)) { _ in
            ["k1": "new", "k2": "v2", "k3": "v3"]
        }
        // The caller has its values; nothing is kept that the slow tier did not take
        #expect(found == ["k1": "new", "k2": "v2", "k3": "v3"])
        #expect(storage.statistics.loadStoreFailures == 3 && storage.statistics.writes == 0)
        for key in ["k1", "k2", "k3"] {
            #expect(fast.peek(key) == nil && !storage.memory.containsValue(forKey: key))
        }
        #expect(fast.batchSizes.isEmpty)
    }

    @Test func bulkLoadsOverOverlappingKeysInEveryOrderAllFinishWithOneValuePerKey() async throws {
        let fast = InMemoryByteTier(StorageTier("fast"), now: clock.closure)
        let slow = InMemoryByteTier(StorageTier("slow"), now: clock.closure)
        let storage = try makeBatchStorage(fast, slow)
        let keys = (0..<40).map { "k\($0)" }
        // Each call holds every turn of its keys while it stores them; taken in one order, no two
        // calls (nor the single writes among them) can wait for each other.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for round in 0..<16 {
                group.addTask {
                    let subset = Array(keys.shuffled().prefix(25))
                    _ = try await storage.values(forKeys: subset, tiers: [StorageTier("fast"), StorageTier("slow")],
                                                 expiry: .seconds(3_600)) { missing in
                        Dictionary(uniqueKeysWithValues: missing.map { ($0, "round-\(round)") })
                    }
                }
                group.addTask { try await storage.setValue("single-\(round)", forKey: keys.randomElement()!) }
            }
            try await group.waitForAll()
        }
        // Memory, fast and slow agree on every key: whoever stored last did so in every tier
        for key in keys {
            let bytes = fast.peek(key).map { String(decoding: $0.data, as: UTF8.self) }
            #expect(bytes == slow.peek(key).map { String(decoding: $0.data, as: UTF8.self) })
        }
    }
}
