import Foundation
import Testing
@testable import Larder

/// ``EvictionPolicy/wTinyLFU``'s own behaviour and its frequency sketch; the
/// policy-independent behaviour is covered by ``MemoryStoreTests``, which runs those tests under
/// every policy.
///
/// Sketch estimates depend on the keys' hashes, which Swift seeds per process, so tests that
/// depend on a contest use stores of 1,000 entries (a sketch of 16,384 counters) and margins
/// that collisions cannot close; the exact rule is checked by the differential test, whose
/// model shares the hash-to-position function with the store.
///
/// Ten minutes, as every suite: the differential cases replay 100,000 operations each against a
/// linear-scan model, in a debug build, and in a full parallel run they have taken 116 s.
@Suite(.timeLimit(.minutes(10)))
struct WTinyLFUPolicyTests {
    typealias Store = MemoryStore<String, Int>
    let clock = TestClock()

    func makeStore(_ configure: (inout Store.Configuration) -> Void = { _ in }) throws -> Store {
        var configuration = Store.Configuration(now: clock.closure, policy: .wTinyLFU)
        configure(&configuration)
        return try Store(configuration: configuration)
    }

    /// A store of countLimit 1,000 (window 10, main 990: probation 198, protected 792) after
    /// k0...k1000 were written: the first overflow moved k0...k989 to main (k0...k197 to
    /// probation, then, probation full, k198...k989 to protected) and evicted one window entry.
    func makeFullStore() throws -> Store {
        let store = try makeStore { $0.countLimit = 1_000 }
        for key in 0...1_000 { store.setValue(key, forKey: "k\(key)") }
        return store
    }

    // MARK: - Lists

    @Test func theFirstOverflowMovesTheOldestEntriesIntoMainUntilItIsFull() throws {
        // Given / When
        let store = try makeFullStore()
        // Then probation and protected were filled in write order
        let lists = store.segmentKeys()
        #expect(lists.protected == (198..<990).reversed().map { "k\($0)" })
        // and the window's oldest (k990, counted once) contested probation's oldest (k0,
        // counted on insertion and on its move): the tie keeps k0, unless a collision in the
        // sketch raised k990's estimate above it
        if store.containsValue(forKey: "k0") {
            #expect(lists.probation == (0..<198).reversed().map { "k\($0)" })
            #expect(!store.containsValue(forKey: "k990"))
        } else {
            #expect(lists.probation == ["k990"] + (1..<198).reversed().map { "k\($0)" })
        }
        #expect(lists.window == (991...1_000).reversed().map { "k\($0)" })
        #expect(store.totalCount == 1_000 && store.statistics.countEvictions == 1)
        #expect(store.invariantViolations() == [])
    }

    @Test func aProbationHitMovesTheEntryToProtectedAndDemotesProtectedsOldest() throws {
        // Given a full store: protected holds its share, 792 entries
        let store = try makeFullStore()
        // When k1, in probation, is read
        _ = store.value(forKey: "k1")
        // Then it leads protected, and protected's oldest (k198) leads probation
        let lists = store.segmentKeys()
        #expect(lists.protected.first == "k1" && lists.protected.count == 792)
        #expect(lists.probation.first == "k198" && !lists.probation.contains("k1"))
        #expect(store.invariantViolations() == [])
    }

    @Test func aWindowHitMovesTheEntryToTheWindowsFrontAndIsNotCounted() throws {
        // Given
        let store = try makeFullStore()
        let oldest = try #require(store.segmentKeys().window.last)
        let before = store.frequencyEstimate(forKey: oldest)
        // When
        _ = store.value(forKey: oldest)
        // Then
        #expect(store.segmentKeys().window.first == oldest)
        #expect(store.frequencyEstimate(forKey: oldest) == before)
    }

    @Test func aMainHitIsCountedInTheSketch() throws {
        // Given
        let store = try makeFullStore()
        let before = store.frequencyEstimate(forKey: "k500")
        // When
        for _ in 0..<3 { _ = store.value(forKey: "k500") }
        // Then (a count-min sketch never underestimates; below saturation it counts every use)
        #expect(store.frequencyEstimate(forKey: "k500") >= before + 3)
    }

    @Test func aKeyWrittenAgainAndAgainWinsAdmissionOverMainsVictim() throws {
        // Given a full store
        let store = try makeFullStore()
        // When "hot" is written, then pushed out of the window by ten new keys, over and over
        var rounds = 0
        var next = 2_000
        while !store.segmentKeys().probation.contains("hot") && !store.segmentKeys().protected.contains("hot"), rounds < 10 {
            rounds += 1
            if !store.containsValue(forKey: "hot") { store.setValue(1, forKey: "hot") }
            for _ in 0..<10 {
                store.setValue(next, forKey: "k\(next)")
                next += 1
            }
        }
        // Then its count grew past that of probation's oldest entry (moved to main once, and
        // never read), so it was admitted within a few rounds
        #expect(rounds < 10, "hot never admitted")
        #expect(store.frequencyEstimate(forKey: "hot") >= 3)
        #expect(store.invariantViolations() == [])
    }

    @Test func aScanOfNewKeysDoesNotFlushMain() throws {
        // Given a full store whose main entries were each read three times
        let wTinyLFU = try makeFullStore()
        let lru = try MemoryStore<String, Int> { $0.countLimit = 1_000; $0.policy = .lru }
        for key in 0...1_000 { lru.setValue(key, forKey: "k\(key)") }
        for _ in 0..<3 {
            for key in 0..<990 {
                _ = wTinyLFU.value(forKey: "k\(key)")
                _ = lru.value(forKey: "k\(key)")
            }
        }
        // When 5,000 keys are written once each
        for key in 10_000..<15_000 {
            wTinyLFU.setValue(key, forKey: "k\(key)")
            lru.setValue(key, forKey: "k\(key)")
        }
        // Then W-TinyLFU still holds nearly all the read keys; LRU holds none
        let kept = (0..<990).filter { wTinyLFU.containsValue(forKey: "k\($0)") }.count
        #expect(kept >= 950, "only \(kept) of 990 kept")
        #expect((0..<990).allSatisfy { !lru.containsValue(forKey: "k\($0)") })
        #expect(wTinyLFU.invariantViolations() == [])
    }

    @Test func anOverwriteOfAMainEntryCountsAsAHit() throws {
        // Given
        let store = try makeFullStore()
        // When k1 (probation) is written again
        store.setValue(-1, forKey: "k1")
        // Then it leads protected, with its new value
        #expect(store.segmentKeys().protected.first == "k1")
        #expect(store.value(forKey: "k1") == -1)
        #expect(store.invariantViolations() == [])
    }

    // MARK: - Limits

    @Test func aBucketOverflowEvictsWithinThatBucketOnly() throws {
        // Given small entries s1...s3 (bucket 0, limit 3) and large l1, l2 (bucket 1, limit 2)
        let store = try makeStore { $0.sizeBuckets = MemoryStoreTests.buckets }
        for (key, cost) in [("s1", 5), ("l1", 50), ("s2", 10), ("l2", 11), ("s3", 1)] {
            store.setValue(1, forKey: key, cost: cost)
        }
        // When a third large entry arrives
        store.setValue(1, forKey: "l3", cost: 100)
        // Then a large entry goes (not s1, the store's oldest)
        let keys = Set(store.keysByRecency())
        #expect(keys.isSuperset(of: ["s1", "s2", "s3", "l3"]) && keys.count == 5)
        #expect(store.statistics.bucketEvictions == 1)
        // When a fourth small entry arrives, a small one goes
        store.setValue(1, forKey: "s4", cost: 0)
        #expect(Set(store.keysByRecency()).filter { $0.hasPrefix("l") }.count == 2)
        #expect(store.totalCount == 5 && store.statistics.bucketEvictions == 2)
        #expect(store.invariantViolations() == [])
    }

    @Test func loweredLimitsRebalanceTheWindowAndMain() throws {
        // Given a full store of 1,000
        let store = try makeFullStore()
        // When the count limit drops to 100, then 1,000 new keys are written
        try store.setLimits(countLimit: 100)
        #expect(store.totalCount == 100)
        #expect(store.invariantViolations() == [])
        for key in 20_000..<21_000 { store.setValue(key, forKey: "k\(key)") }
        // Then the lists hold the new shares: window 1, main 99
        let lists = store.segmentKeys()
        #expect(lists.window.count == 1)
        #expect(lists.probation.count + lists.protected.count == 99)
        #expect(lists.protected.count <= 99 - 99 / 5)
        // When the limit is raised again, the store fills up to it
        try store.setLimits(countLimit: 500)
        for key in 30_000..<31_000 { store.setValue(key, forKey: "k\(key)") }
        #expect(store.totalCount == 500)
        #expect(store.invariantViolations() == [])
    }

    @Test func costLimitAndTrimEvictThePolicysVictims() throws {
        // Given a cost limit of 10 holding 4 + 4
        let store = try makeStore { $0.costLimit = 10 }
        store.setValue(1, forKey: "a", cost: 4)
        store.setValue(2, forKey: "b", cost: 4)
        // When an entry of 7 arrives: both older entries must go
        store.setValue(3, forKey: "c", cost: 7)
        // Then
        #expect(store.keysByRecency() == ["c"])
        #expect(store.statistics.costEvictions == 2)
        // When trimmed to nothing
        store.trim(toCount: 0)
        #expect(store.totalCount == 0 && store.totalCost == 0)
        #expect(store.invariantViolations() == [])
    }

    // MARK: - Frequency sketch

    @Test func theSketchCountsAfterTheDoorkeeperAndSaturatesAtSixteen() {
        // Given
        var sketch = FrequencySketch(capacity: 1_000)
        let hash = "key".hashValue
        #expect(sketch.estimate(hash) == 0)
        // When / Then: the first occurrence only sets the doorkeeper
        sketch.increment(hash)
        #expect(sketch.estimate(hash) == 1)
        for count in 2...16 {
            sketch.increment(hash)
            #expect(sketch.estimate(hash) == count)
        }
        // 15 in the counters plus the doorkeeper, at most
        for _ in 0..<10 { sketch.increment(hash) }
        #expect(sketch.estimate(hash) == 16)
    }

    @Test func theSketchNeverUnderestimates() {
        // Given 2,000 keys counted 1...8 times in a sketch sized for 1,000
        var sketch = FrequencySketch(capacity: 1_000)
        let hashes = (0..<2_000).map { "key \($0)".hashValue }
        for (index, hash) in hashes.enumerated() {
            for _ in 0...(index % 8) { sketch.increment(hash) }
        }
        // Then every estimate is at least the true count
        for (index, hash) in hashes.enumerated() {
            #expect(sketch.estimate(hash) >= index % 8 + 1)
        }
    }

    @Test func theSketchHalvesItsCountersAndClearsTheDoorkeeperAfterItsPeriod() {
        // Given a key counted 11 times (10 in the counters)
        var sketch = FrequencySketch(capacity: 100)
        let hash = "key".hashValue
        for _ in 0..<11 { sketch.increment(hash) }
        #expect(sketch.samplePeriod == 1_600)
        // When the period's uses are recorded
        for _ in 0..<1_599 { sketch.recordUse() }
        #expect(sketch.estimate(hash) == 11)
        sketch.recordUse()
        // Then the counters hold 5 and the doorkeeper nothing
        #expect(sketch.estimate(hash) == 5)
        #expect(sketch.uses == 0)
    }

    @Test func theSketchGrowsByDoublingUpToItsLimitAndForgetsOnResize() {
        // Given
        var sketch = FrequencySketch(capacity: 1_024)
        let hash = "key".hashValue
        sketch.increment(hash)
        sketch.increment(hash)
        // When the keys outgrow it
        sketch.grow(toFit: 1_025, limit: 3_000)
        // Then it doubled and forgot its counts
        #expect(sketch.capacity == 2_048 && sketch.estimate(hash) == 0)
        sketch.grow(toFit: 5_000, limit: 3_000)
        #expect(sketch.capacity == 3_000)
        #expect(sketch.table.count == 8 * FrequencySketch.blockCount(forCapacity: 3_000))
        sketch.grow(toFit: 1_000, limit: 3_000)
        #expect(sketch.capacity == 3_000)
    }

    // MARK: - Differential test against a reference model

    static let wTinyLFUDifferentialCases: [MemoryStoreTests.DifferentialCase] = [
        .init(name: "count limit only, many evictions") {
            $0.countLimit = 20
            $0.costLimit = .max
        },
        .init(name: "cost limit only") {
            $0.costLimit = 200
        },
        .init(name: "buckets only, ratio 0.2") {
            $0.sizeBuckets = [.init(maxEntryCost: 5, countLimit: 12), .init(maxEntryCost: 40, countLimit: 7), .init(maxEntryCost: .max, countLimit: 3)]
            $0.overflowTrimRatio = 0.2
        },
        .init(name: "count and cost limits, keys read often") {
            $0.countLimit = 40
            $0.costLimit = 600
        },
    ]

    // `.serialized` for CPU, not shared state (as in S3FIFOPolicyTests).
    @Test(.serialized, arguments: MemoryStoreTests.differentialCases + wTinyLFUDifferentialCases)
    func behavesLikeTheReferenceModelOverRandomOperations(_ testCase: MemoryStoreTests.DifferentialCase) async throws {
        try await MemoryStoreTests.runDifferentialOffPool(testCase, policy: .wTinyLFU, fixedSeed: 0x5EED_0007, model: ReferenceWTinyLFUStore.init)
    }
}
