import Foundation
import LarderTestSupport
import Testing
@testable import Larder

@Suite(.timeLimit(.minutes(10)))
struct MemoryStoreTests {
    typealias Store = MemoryStore<String, Int>
    let clock = TestClock()

    /// Both policies, for the tests whose behaviour does not depend on the eviction order.
    static let policies: [EvictionPolicy] = [.lru, .s3fifo, .wTinyLFU]

    /// A store of `String → Int` on the test clock; every `Int` value costs 1 unless told.
    func makeStore(
        _ policy: EvictionPolicy = .lru, _ configure: (inout Store.Configuration) -> Void = { _ in }
    ) throws -> Store {
        var configuration = Store.Configuration(now: clock.closure, policy: policy)
        configure(&configuration)
        return try Store(configuration: configuration)
    }

    // MARK: - Reading and writing

    @Test(arguments: Self.policies)
    func returnsTheStoredValueAndNilForAMissingKey(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        // When
        store.setValue(1, forKey: "a")
        // Then
        #expect(store.value(forKey: "a") == 1)
        #expect(store.value(forKey: "b") == nil)
        #expect(store.totalCount == 1)
    }

    @Test(arguments: Self.policies)
    func overwritingAKeyReplacesItsValueAndCost(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(1, forKey: "a", cost: 10)
        // When
        store.setValue(2, forKey: "a", cost: 3)
        // Then
        #expect(store.value(forKey: "a") == 2)
        #expect(store.totalCount == 1)
        #expect(store.totalCost == 3)
    }

    @Test(arguments: Self.policies)
    func removeValueReturnsTheRemovedValueOnce(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(7, forKey: "a", cost: 5)
        // When
        let first = store.removeValue(forKey: "a")
        let second = store.removeValue(forKey: "a")
        // Then
        #expect(first)
        #expect(!second)
        #expect(store.totalCount == 0 && store.totalCost == 0)
    }

    @Test(arguments: Self.policies)
    func subscriptReadsWritesAndRemoves(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        // When
        store["a"] = 1
        let read = store["a"]
        store["a"] = nil
        // Then
        #expect(read == 1)
        #expect(store["a"] == nil)
        #expect(store.totalCount == 0)
    }

    @Test(arguments: Self.policies)
    func entryForKeyReturnsValueCostAndExpirationDate(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        let start = clock.peek
        store.setValue(1, forKey: "ttl", cost: 4, expiry: .seconds(60))
        store.setValue(2, forKey: "forever", cost: 9, expiry: .never)
        // When
        let ttl = try #require(store.entry(forKey: "ttl"))
        let forever = try #require(store.entry(forKey: "forever"))
        // Then
        #expect(ttl.value == 1 && ttl.cost == 4)
        #expect(ttl.expirationDate == start.addingTimeInterval(60))
        #expect(forever.value == 2 && forever.cost == 9 && forever.expirationDate == nil)
        #expect(store.entry(forKey: "missing") == nil)
    }

    @Test(arguments: Self.policies)
    func removeAllEmptiesTheStoreButKeepsTheCounters(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        for key in ["a", "b", "c"] { store.setValue(1, forKey: key, cost: 2) }
        _ = store.value(forKey: "a")
        // When
        store.removeAll()
        // Then
        #expect(store.totalCount == 0 && store.totalCost == 0)
        #expect(store.value(forKey: "a") == nil)
        #expect(store.statistics.writes == 3 && store.statistics.hits == 1)
        store.setValue(5, forKey: "d")
        #expect(store.value(forKey: "d") == 5)
        #expect(store.invariantViolations() == [])
    }

    // MARK: - LRU order

    @Test func readsMoveAnEntryToMostRecentlyUsed() throws {
        // Given a full store of a, b, c (a least recently used)
        let store = try makeStore { $0.countLimit = 3 }
        for key in ["a", "b", "c"] { store.setValue(1, forKey: key) }
        // When a is read and d is written
        _ = store.value(forKey: "a")
        store.setValue(1, forKey: "d")
        // Then b, now the least recently used, is the one evicted
        #expect(store.keysByRecency() == ["d", "a", "c"])
        #expect(store.value(forKey: "b") == nil)
    }

    @Test func writesMoveAnEntryToMostRecentlyUsed() throws {
        // Given
        let store = try makeStore { $0.countLimit = 3 }
        for key in ["a", "b", "c"] { store.setValue(1, forKey: key) }
        // When a is overwritten and d is written
        store.setValue(2, forKey: "a")
        store.setValue(1, forKey: "d")
        // Then
        #expect(store.keysByRecency() == ["d", "a", "c"])
    }

    @Test func entryForKeyCountsAsARead() throws {
        // Given
        let store = try makeStore { $0.countLimit = 2 }
        store.setValue(1, forKey: "a")
        store.setValue(2, forKey: "b")
        // When
        _ = store.entry(forKey: "a")
        store.setValue(3, forKey: "c")
        // Then
        #expect(store.keysByRecency() == ["c", "a"])
        #expect(store.statistics.hits == 1)
    }

    @Test func containsValueDoesNotChangeRecencyOrCounters() throws {
        // Given
        let store = try makeStore { $0.countLimit = 2 }
        store.setValue(1, forKey: "a")
        store.setValue(2, forKey: "b")
        // When
        let contained = store.containsValue(forKey: "a")
        let missing = store.containsValue(forKey: "z")
        store.setValue(3, forKey: "c")
        // Then a was still the least recently used
        #expect(contained && !missing)
        #expect(store.keysByRecency() == ["c", "b"])
        #expect(store.statistics.hits == 0 && store.statistics.misses == 0)
    }

    // MARK: - Limits

    @Test func evictsLeastRecentlyUsedEntryWhenCountLimitIsExceeded() throws {
        // Given
        let store = try makeStore { $0.countLimit = 2 }
        store.setValue(1, forKey: "a")
        store.setValue(2, forKey: "b")
        // When
        store.setValue(3, forKey: "c")
        // Then
        #expect(store.keysByRecency() == ["c", "b"])
        #expect(store.statistics.countEvictions == 1)
    }

    @Test func evictsLeastRecentlyUsedEntriesUntilTheCostFits() throws {
        // Given a cost limit of 10 holding 4 + 4
        let store = try makeStore { $0.costLimit = 10 }
        store.setValue(1, forKey: "a", cost: 4)
        store.setValue(2, forKey: "b", cost: 4)
        // When an entry of 7 arrives
        store.setValue(3, forKey: "c", cost: 7)
        // Then both older entries go (4 + 7 would still exceed 10)
        #expect(store.keysByRecency() == ["c"])
        #expect(store.totalCost == 7)
        #expect(store.statistics.costEvictions == 2)
    }

    @Test(arguments: Self.policies)
    func doesNotKeepAnEntryCostlierThanTheCostLimit(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy) { $0.costLimit = 10 }
        store.setValue(1, forKey: "a", cost: 5)
        // When
        let kept = store.setValue(2, forKey: "huge", cost: 11)
        // Then the store is not flushed for an entry it could never hold
        #expect(!kept)
        #expect(store.keysByRecency() == ["a"])
        #expect(store.statistics.rejections == 1)
    }

    @Test(arguments: Self.policies)
    func entryCostLimitRefusesALargerEntryAndRemovesTheOlderValue(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy) { $0.entryCostLimit = 100 }
        store.setValue(1, forKey: "a", cost: 100)
        store.setValue(1, forKey: "b", cost: 1)
        // When a new value for a is too costly
        let kept = store.setValue(2, forKey: "a", cost: 101)
        // Then neither the new nor the stale value is returned
        #expect(!kept)
        #expect(store.value(forKey: "a") == nil)
        #expect(store.totalCount == 1 && store.totalCost == 1)
        #expect(store.statistics.rejections == 1)
    }

    @Test(arguments: Self.policies)
    func countLimitOfZeroKeepsNothing(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy) { $0.countLimit = 0 }
        // When
        let kept = store.setValue(1, forKey: "a")
        // Then
        #expect(!kept)
        #expect(store.totalCount == 0)
    }

    static let buckets = [
        SizeBucket(maxEntryCost: 10, countLimit: 3),
        SizeBucket(maxEntryCost: 100, countLimit: 2),
        SizeBucket(maxEntryCost: 1_000, countLimit: 1),
    ]

    @Test func eachBucketEvictsItsOwnLeastRecentlyUsedEntry() throws {
        // Given small entries s1...s3 (bucket 0) and large entries l1, l2 (bucket 1), interleaved
        let store = try makeStore { $0.sizeBuckets = Self.buckets }
        store.setValue(1, forKey: "s1", cost: 5)
        store.setValue(1, forKey: "l1", cost: 50)
        store.setValue(1, forKey: "s2", cost: 10)
        store.setValue(1, forKey: "l2", cost: 11)
        store.setValue(1, forKey: "s3", cost: 1)
        // When a third large entry arrives
        store.setValue(1, forKey: "l3", cost: 100)
        // Then the large bucket's own LRU (l1) goes, not the store-wide LRU (s1)
        #expect(store.keysByRecency() == ["l3", "s3", "l2", "s2", "s1"])
        // When a fourth small entry arrives, s1 goes
        store.setValue(1, forKey: "s4", cost: 0)
        #expect(store.keysByRecency() == ["s4", "l3", "s3", "l2", "s2"])
        #expect(store.statistics.bucketEvictions == 2)
        #expect(store.invariantViolations() == [])
    }

    @Test(arguments: Self.policies)
    func anEntryFittingNoBucketIsNotKept(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy) { $0.sizeBuckets = Self.buckets }
        store.setValue(1, forKey: "big", cost: 1_000)
        // When
        let kept = store.setValue(2, forKey: "big", cost: 1_001)
        // Then
        #expect(!kept)
        #expect(store.value(forKey: "big") == nil)
        #expect(store.totalCount == 0)
    }

    @Test func changingAnEntrysCostMovesItToAnotherBucket() throws {
        // Given a small entry a and a full large bucket (b, c)
        let store = try makeStore { $0.sizeBuckets = Self.buckets }
        store.setValue(1, forKey: "a", cost: 1)
        store.setValue(1, forKey: "b", cost: 50)
        store.setValue(1, forKey: "c", cost: 50)
        // When a becomes large
        store.setValue(2, forKey: "a", cost: 60)
        // Then the large bucket evicts its LRU (b) and a counts as large
        #expect(store.keysByRecency() == ["a", "c"])
        #expect(store.invariantViolations() == [])
    }

    @Test func bucketsApplyTogetherWithCountAndCostLimits() throws {
        // Given room for 7 bucketed entries but a count limit of 4 and a cost limit of 150
        let store = try makeStore {
            $0.sizeBuckets = [.init(maxEntryCost: 10, countLimit: 5), .init(maxEntryCost: 100, countLimit: 2)]
            $0.countLimit = 4
            $0.costLimit = 150
        }
        store.setValue(1, forKey: "s1", cost: 10)
        store.setValue(1, forKey: "s2", cost: 10)
        store.setValue(1, forKey: "l1", cost: 60)
        store.setValue(1, forKey: "s3", cost: 10)
        // When a fifth entry arrives: count limit evicts s1 (store-wide LRU)
        store.setValue(1, forKey: "s4", cost: 10)
        #expect(store.keysByRecency() == ["s4", "s3", "l1", "s2"])
        // When a large entry of 80 arrives: the count limit evicts s2 (count 5 > 4), then the
        // cost is 80 + 10 + 10 + 60 = 160 > 150, so the cost limit evicts l1
        store.setValue(1, forKey: "l2", cost: 80)
        // Then
        #expect(store.keysByRecency() == ["l2", "s4", "s3"])
        #expect(store.totalCost == 100)
        #expect(store.statistics.countEvictions == 2 && store.statistics.costEvictions == 1)
        #expect(store.statistics.bucketEvictions == 0)
    }

    // MARK: - Overflow trim ratio

    @Test func overflowTrimRatioEvictsDownToTheTargetCount() throws {
        // Given a count limit of 10 with a ratio of 0.2, full
        let store = try makeStore {
            $0.countLimit = 10
            $0.overflowTrimRatio = 0.2
        }
        for key in 0..<10 { store.setValue(key, forKey: "\(key)") }
        // When the 11th entry arrives
        store.setValue(10, forKey: "10")
        // Then the store keeps (1 - 0.2) × 10 = 8 entries: the 8 most recent
        #expect(store.keysByRecency() == (3...10).reversed().map { "\($0)" })
        #expect(store.statistics.countEvictions == 3)
    }

    @Test func overflowTrimRatioAppliesToCost() throws {
        // Given a cost limit of 100, ratio 0.5, full with ten entries of 10
        let store = try makeStore {
            $0.costLimit = 100
            $0.overflowTrimRatio = 0.5
        }
        for key in 0..<10 { store.setValue(key, forKey: "\(key)", cost: 10) }
        // When the 11th arrives
        store.setValue(10, forKey: "10", cost: 10)
        // Then the total is at most 50: the 5 most recent survive
        #expect(store.keysByRecency() == (6...10).reversed().map { "\($0)" })
        #expect(store.totalCost == 50)
    }

    @Test func overflowTrimRatioAppliesToEachBucket() throws {
        // Given a bucket of 4 small entries, ratio 0.5, and 2 large entries elsewhere
        let store = try makeStore {
            $0.sizeBuckets = [.init(maxEntryCost: 10, countLimit: 4), .init(maxEntryCost: .max, countLimit: 10)]
            $0.overflowTrimRatio = 0.5
        }
        store.setValue(1, forKey: "L1", cost: 50)
        for key in 1...4 { store.setValue(1, forKey: "s\(key)", cost: 1) }
        store.setValue(1, forKey: "L2", cost: 50)
        // When a fifth small entry arrives
        store.setValue(1, forKey: "s5", cost: 1)
        // Then the small bucket drops to 2 entries; the large ones stay
        #expect(store.keysByRecency() == ["s5", "L2", "s4", "L1"])
        #expect(store.statistics.bucketEvictions == 3)
    }

    @Test(arguments: Self.policies)
    func theNewEntryIsNeverEvictedByItsOwnWrite(policy: EvictionPolicy) throws {
        // Given a ratio so high that the target is 0 entries
        let store = try makeStore(policy) {
            $0.countLimit = 3
            $0.overflowTrimRatio = 0.9
        }
        for key in ["a", "b", "c"] { store.setValue(1, forKey: key) }
        // When
        let kept = store.setValue(1, forKey: "d")
        // Then
        #expect(kept)
        #expect(store.keysByRecency() == ["d"])
    }

    @Test(arguments: [
        (10, 0.0, 10), (10, 0.2, 8), (10, 0.3, 7), (10, 0.25, 7), (100, 0.29, 71),
        (100, 0.7, 30), (3, 0.5, 1), (1, 0.5, 0), (Int.max, 0.5, Int.max / 2 + 1),
    ])
    func trimTargetRoundsDownWithoutFloatingPointSurprises(limit: Int, ratio: Double, expected: Int) {
        #expect(trimTarget(limit: limit, ratio: ratio) == expected)
    }

    // MARK: - Trimming

    @Test func trimToCountEvictsLeastRecentlyUsedFirst() throws {
        // Given
        let store = try makeStore()
        for key in ["a", "b", "c", "d"] { store.setValue(1, forKey: key) }
        _ = store.value(forKey: "a")
        // When
        store.trim(toCount: 2)
        // Then
        #expect(store.keysByRecency() == ["a", "d"])
        #expect(store.statistics.countEvictions == 2)
    }

    @Test func trimToCostEvictsLeastRecentlyUsedFirst() throws {
        // Given
        let store = try makeStore()
        store.setValue(1, forKey: "a", cost: 5)
        store.setValue(1, forKey: "b", cost: 5)
        store.setValue(1, forKey: "c", cost: 5)
        // When
        store.trim(toCost: 6)
        // Then
        #expect(store.keysByRecency() == ["c"])
        #expect(store.totalCost == 5)
        #expect(store.statistics.costEvictions == 2)
    }

    // MARK: - Expiry

    @Test(arguments: Self.policies)
    func anEntryExpiresWhenTheClockReachesItsExpiration(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(1, forKey: "a", expiry: .seconds(10))
        // When just before the end
        clock.advance(by: 9.5)
        // Then
        #expect(store.value(forKey: "a") == 1)
        // When at the end
        clock.advance(by: 0.5)
        // Then it is gone, and dropped
        #expect(store.value(forKey: "a") == nil)
        #expect(store.totalCount == 0)
        #expect(store.statistics.expirations == 1 && store.statistics.misses == 1)
    }

    @Test(arguments: Self.policies)
    func defaultExpiryAppliesWhenAWriteGivesNone(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy) { $0.defaultExpiry = .seconds(5) }
        store.setValue(1, forKey: "default")
        store.setValue(2, forKey: "forever", expiry: .never)
        store.setValue(3, forKey: "longer", expiry: .seconds(50))
        // When
        clock.advance(by: 6)
        // Then
        #expect(store.value(forKey: "default") == nil)
        #expect(store.value(forKey: "forever") == 2)
        #expect(store.value(forKey: "longer") == 3)
    }

    @Test(arguments: Self.policies)
    func expiryDateIsTakenAsGiven(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        let end = clock.peek.addingTimeInterval(30)
        store.setValue(1, forKey: "a", expiry: .date(end))
        // When
        clock.advance(by: 29)
        let before = store.entry(forKey: "a")
        clock.advance(by: 1)
        // Then
        #expect(before?.expirationDate == end)
        #expect(store.entry(forKey: "a") == nil)
    }

    @Test(arguments: Self.policies)
    func anAlreadyExpiredWriteIsNotKeptAndDropsTheOlderValue(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(1, forKey: "a")
        // When
        let kept = store.setValue(2, forKey: "a", expiry: .date(clock.peek.addingTimeInterval(-1)))
        // Then
        #expect(!kept)
        #expect(store.value(forKey: "a") == nil)
        #expect(store.statistics.rejections == 1)
    }

    @Test(arguments: Self.policies)
    func containsValueIsFalseForAnExpiredEntryAndDropsIt(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(1, forKey: "a", cost: 3, expiry: .seconds(1))
        // When
        clock.advance(by: 1)
        // Then
        #expect(!store.containsValue(forKey: "a"))
        #expect(store.totalCount == 0 && store.totalCost == 0)
    }

    @Test(arguments: Self.policies)
    func removeValueDoesNotCountAnExpiredValue(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(1, forKey: "a", expiry: .seconds(1))
        clock.advance(by: 2)
        // When
        let removed = store.removeValue(forKey: "a")
        // Then
        #expect(!removed)
        #expect(store.totalCount == 0)
    }

    @Test(arguments: Self.policies)
    func removeExpiredDropsOnlyExpiredEntries(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(1, forKey: "short", cost: 2, expiry: .seconds(1))
        store.setValue(2, forKey: "shorter", cost: 2, expiry: .seconds(0.5))
        store.setValue(3, forKey: "long", cost: 2, expiry: .seconds(100))
        store.setValue(4, forKey: "forever", cost: 2)
        clock.advance(by: 1)
        // When
        let removed = store.removeExpired()
        // Then
        #expect(removed == 2)
        #expect(Set(store.keysByRecency()) == ["long", "forever"])
        #expect(store.totalCost == 4)
        #expect(store.statistics.expirations == 2)
    }

    @Test(arguments: Self.policies)
    func aHitReadsAnInjectedClockOnceToStampItsUseAndContainsNever(policy: EvictionPolicy) throws {
        // Given an entry that never expires (the default clock would stamp hits with the
        // coarse system clock; an injected one is read so that tests control ages)
        let store = try makeStore(policy)
        store.setValue(1, forKey: "a")
        let readsBefore = clock.readCount
        // When
        for _ in 0..<100 { _ = store.value(forKey: "a") }
        _ = store.containsValue(forKey: "a")
        // Then
        #expect(clock.readCount == readsBefore + 100)
    }

    @Test(arguments: Self.policies)
    func aHitOnAnEntryThatCanExpireReadsTheClockOnce(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        store.setValue(1, forKey: "a", expiry: .seconds(10))
        let readsBefore = clock.readCount
        // When
        _ = store.value(forKey: "a")
        // Then
        #expect(clock.readCount == readsBefore + 1)
    }

    // MARK: - Cost

    @Test func costDefaultsToTheByteSizeOfDataStringsAndBytes() throws {
        // Given
        let data = try MemoryStore<String, Data>()
        let strings = try MemoryStore<String, String>()
        let bytes = try MemoryStore<String, [UInt8]>()
        // When
        data.setValue(Data(count: 123), forKey: "a")
        strings.setValue("héllo", forKey: "a")  // é is two UTF-8 bytes
        bytes.setValue([1, 2, 3], forKey: "a")
        // Then
        #expect(data.totalCost == 123)
        #expect(strings.totalCost == 6)
        #expect(bytes.totalCost == 3)
    }

    @Test(arguments: Self.policies)
    func costDefaultsToOneForOtherValuesAndTheCallersCostWins(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy)
        // When
        store.setValue(1_000, forKey: "a")
        store.setValue(1_000, forKey: "b", cost: 42)
        // Then
        #expect(store.totalCost == 43)
    }

    @Test(arguments: Self.policies)
    func theConfigurationsCostClosureMeasuresValues(policy: EvictionPolicy) throws {
        // Given
        let store = try makeStore(policy) { $0.cost = { $0 * 2 } }
        // When
        store.setValue(21, forKey: "a")
        store.setValue(21, forKey: "b", cost: 1)
        // Then
        #expect(store.entry(forKey: "a")?.cost == 42)
        #expect(store.totalCost == 43)
    }

    // MARK: - No user code under the lock

    final class ReentrantProbe {
        let onDeinit: () -> Void
        init(_ onDeinit: @escaping () -> Void) { self.onDeinit = onDeinit }
        deinit { onDeinit() }
    }

    @Test(arguments: Self.policies)
    func evictedAndReplacedValuesAreReleasedOutsideTheLock(policy: EvictionPolicy) throws {
        // Given values whose deinitializer calls back into the store (a deadlock if the store
        // released them under its non-recursive lock)
        let store = try MemoryStore<String, ReentrantProbe> {
            $0.countLimit = 1
            $0.policy = policy
        }
        var observedCounts: [Int] = []
        store.setValue(ReentrantProbe { observedCounts.append(store.totalCount) }, forKey: "a")
        // When one is evicted, one replaced, one removed by removeAll
        store.setValue(ReentrantProbe { observedCounts.append(store.totalCount) }, forKey: "b")
        store.setValue(ReentrantProbe { observedCounts.append(store.totalCount) }, forKey: "b")
        store.removeAll()
        // Then every deinitializer ran and saw a consistent store
        #expect(observedCounts == [1, 1, 0])
    }

    @Test func theCostClosureAndClockRunOutsideTheLock() throws {
        // Given a cost closure and a clock that read the store
        final class Box: @unchecked Sendable { var store: Store? }
        let box = Box()
        let store = try Store {
            $0.cost = { _ in (box.store?.totalCount ?? 0) + 1 }
            $0.now = { _ = box.store?.totalCount; return Date(timeIntervalSinceReferenceDate: 0) }
        }
        box.store = store
        // When
        store.setValue(1, forKey: "a", expiry: .seconds(10))
        store.setValue(1, forKey: "b", expiry: .seconds(10))
        // Then (no deadlock) the second cost saw the first entry
        #expect(store.value(forKey: "a") == 1)
        #expect(store.totalCost == 1 + 2)
        box.store = nil
    }

    // MARK: - Configuration

    struct InvalidCase: Sendable, CustomTestStringConvertible {
        let field: String
        let value: String
        let apply: @Sendable (inout Store.Configuration) -> Void
        var testDescription: String { "\(field) = \(value)" }
    }

    static let invalidCases: [InvalidCase] = [
        .init(field: "countLimit", value: "-1") { $0.countLimit = -1 },
        .init(field: "costLimit", value: "-5") { $0.costLimit = -5 },
        .init(field: "entryCostLimit", value: "-1") { $0.entryCostLimit = -1 },
        .init(field: "overflowTrimRatio", value: "-0.1") { $0.overflowTrimRatio = -0.1 },
        .init(field: "overflowTrimRatio", value: "1.0") { $0.overflowTrimRatio = 1 },
        .init(field: "overflowTrimRatio", value: "nan") { $0.overflowTrimRatio = .nan },
        .init(field: "overflowTrimRatio", value: "inf") { $0.overflowTrimRatio = .infinity },
        .init(field: "sizeBuckets[1].maxEntryCost", value: "10") {
            $0.sizeBuckets = [.init(maxEntryCost: 100, countLimit: 1), .init(maxEntryCost: 10, countLimit: 1)]
        },
        .init(field: "sizeBuckets[1].maxEntryCost", value: "10") {
            $0.sizeBuckets = [.init(maxEntryCost: 10, countLimit: 1), .init(maxEntryCost: 10, countLimit: 2)]
        },
        .init(field: "sizeBuckets[0].maxEntryCost", value: "0") {
            $0.sizeBuckets = [.init(maxEntryCost: 0, countLimit: 1)]
        },
        .init(field: "sizeBuckets[1].countLimit", value: "0") {
            $0.sizeBuckets = [.init(maxEntryCost: 1, countLimit: 1), .init(maxEntryCost: 2, countLimit: 0)]
        },
        .init(field: "sizeBuckets[0].countLimit", value: "-3") {
            $0.sizeBuckets = [.init(maxEntryCost: 1, countLimit: -3)]
        },
        .init(field: "defaultExpiry", value: "seconds(0.0)") { $0.defaultExpiry = .seconds(0) },
        .init(field: "defaultExpiry", value: "seconds(-1.0)") { $0.defaultExpiry = .seconds(-1) },
        .init(field: "defaultExpiry", value: "seconds(nan)") { $0.defaultExpiry = .seconds(.nan) },
        .init(field: "defaultExpiry", value: "seconds(inf)") { $0.defaultExpiry = .seconds(.infinity) },
        .init(field: "defaultExpiry", value: "date") {
            $0.defaultExpiry = .date(Date(timeIntervalSinceReferenceDate: .infinity))
        },
    ]

    @Test(arguments: invalidCases)
    func anInvalidConfigurationThrowsNamingTheField(_ invalid: InvalidCase) throws {
        // Given
        var configuration = Store.Configuration()
        invalid.apply(&configuration)
        // When
        let error = #expect(throws: StorageError.self) { try Store(configuration: configuration) }
        // Then
        let found = try #require(error)
        #expect(found.code == .invalidConfiguration)
        #expect(found.field == invalid.field)
        #expect(found.message.hasPrefix("\(invalid.field) = \(invalid.value)"))
        #expect(found.message.count > "\(invalid.field) = \(invalid.value)".count + 2)
    }

    @Test func boundaryConfigurationsAreAccepted() throws {
        // Given / When / Then
        _ = try makeStore {
            $0.countLimit = 0
            $0.costLimit = 0
            $0.entryCostLimit = 0
            $0.overflowTrimRatio = 0.999
            $0.sizeBuckets = [.init(maxEntryCost: 1, countLimit: 1), .init(maxEntryCost: .max, countLimit: .max)]
            $0.defaultExpiry = .seconds(0.001)
        }
        _ = try makeStore { $0.defaultExpiry = .date(.distantPast) }
    }

    @Test func theConvenienceInitializerAppliesTheClosure() throws {
        // Given / When
        let store = try Store { $0.countLimit = 7 }
        // Then
        #expect(store.configuration.countLimit == 7)
        #expect(store.configuration.costLimit == Store.Configuration().costLimit)
    }

    // MARK: - Statistics

    @Test func statisticsCountHitsMissesInsertionsAndEvictionsByReason() throws {
        // Given
        let store = try makeStore {
            $0.countLimit = 3
            $0.costLimit = 100
            $0.entryCostLimit = 60
            $0.sizeBuckets = [.init(maxEntryCost: 10, countLimit: 2), .init(maxEntryCost: .max, countLimit: 5)]
        }
        // When
        store.setValue(1, forKey: "a", cost: 1)
        store.setValue(2, forKey: "b", cost: 1)
        store.setValue(3, forKey: "c", cost: 1)   // bucket 0 holds 3 > 2: evicts a (bucket)
        store.setValue(4, forKey: "d", cost: 50)  // [d c b], cost 52
        store.setValue(5, forKey: "e", cost: 50)  // count 4 > 3: evicts b (count); cost 101: evicts c (cost)
        store.setValue(6, forKey: "f", cost: 40)  // [f e d], cost 140 > 100: evicts d (cost)
        store.setValue(7, forKey: "g", cost: 61)  // over entryCostLimit: refused
        store.setValue(8, forKey: "h", cost: 1, expiry: .seconds(1))  // [h f e], cost 91
        _ = store.value(forKey: "e")              // hit
        _ = store.value(forKey: "a")              // miss
        clock.advance(by: 1)
        _ = store.value(forKey: "h")              // miss, expired
        // Then
        var expected = Store.Statistics()
        expected.hits = 1
        expected.misses = 2
        expected.writes = 7
        expected.rejections = 1
        expected.bucketEvictions = 1
        expected.countEvictions = 1
        expected.costEvictions = 2
        expected.expirations = 1
        expected.totalCount = 2
        expected.totalCost = 90
        #expect(store.statistics == expected)
        #expect(store.statistics.evictions == 4)
        #expect(store.statistics.hitRatio == 1.0 / 3.0)
    }

    // MARK: - Concurrency

    @Test(arguments: Self.policies)
    func concurrentUseKeepsTheTotalsConsistent(policy: EvictionPolicy) async throws {
        // Given a store shared by many tasks
        let store = try MemoryStore<Int, [UInt8]> {
            $0.policy = policy
            $0.countLimit = 100
            $0.costLimit = 5_000
            $0.sizeBuckets = [.init(maxEntryCost: 50, countLimit: 60), .init(maxEntryCost: 500, countLimit: 30)]
            $0.overflowTrimRatio = 0.1
        }
        // When 8 tasks write, read, remove and trim at once
        let reads = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var random = SplitMix64(seed: UInt64(task))
                    var reads = 0
                    for _ in 0..<5_000 {
                        let key = Int.random(in: 0..<300, using: &random)
                        switch Int.random(in: 0..<10, using: &random) {
                        case 0..<4:
                            store.setValue([UInt8](repeating: 0, count: Int.random(in: 0...600, using: &random)), forKey: key)
                        case 4..<8:
                            if let value = store.value(forKey: key) { #expect(value.count <= 500) }
                            reads += 1
                        case 8: store.removeValue(forKey: key)
                        default:
                            if Bool.random(using: &random) { store.trim(toCount: 80) } else { _ = store.containsValue(forKey: key) }
                        }
                    }
                    return reads
                }
            }
            return await group.reduce(0, +)
        }
        // Then
        let statistics = store.statistics
        #expect(store.invariantViolations() == [])
        #expect(statistics.totalCount <= 100)
        #expect(statistics.totalCost <= 5_000)
        #expect(statistics.hits + statistics.misses == reads)
        var presentCost = 0
        for key in 0..<300 {
            if let entry = store.entry(forKey: key) { presentCost += entry.cost }
        }
        #expect(presentCost == statistics.totalCost)
    }

    // MARK: - Differential test against a reference model

    struct DifferentialCase: Sendable, CustomTestStringConvertible {
        let name: String
        let configuration: @Sendable (inout MemoryStore<Int, Int>.Configuration) -> Void
        var testDescription: String { name }
    }

    static let differentialCases: [DifferentialCase] = [
        .init(name: "buckets, limits and ratio") {
            $0.countLimit = 25  // below the buckets' 31, so the count limit competes with them
            $0.costLimit = 900
            $0.entryCostLimit = 150
            $0.sizeBuckets = [.init(maxEntryCost: 20, countLimit: 15), .init(maxEntryCost: 60, countLimit: 10), .init(maxEntryCost: .max, countLimit: 6)]
            $0.overflowTrimRatio = 0.25
            $0.cost = { $0 % 50 }
        },
        .init(name: "count and cost, default expiry, no ratio") {
            $0.countLimit = 25
            $0.costLimit = 300
            $0.defaultExpiry = .seconds(30)
        },
        .init(name: "buckets that reject large entries, half ratio") {
            $0.sizeBuckets = [.init(maxEntryCost: 10, countLimit: 8), .init(maxEntryCost: 100, countLimit: 4)]
            $0.overflowTrimRatio = 0.5
            $0.costLimit = 250
        },
    ]

    @Test(arguments: differentialCases)
    func behavesLikeTheReferenceModelOverRandomOperations(_ testCase: DifferentialCase) async throws {
        try await Self.runDifferentialOffPool(testCase, policy: .lru, fixedSeed: 0x5EED_0001, model: ReferenceMemoryStore.init)
    }

    /// What each policy's differential test runs: 100,000 steps from `fixedSeed`, then 30,000
    /// from a random seed, off the cooperative pool (a minute of computing must not hold one of
    /// its two threads).
    static func runDifferentialOffPool<Model: MemoryStoreModel<Int, Int>>(
        _ testCase: DifferentialCase, policy: EvictionPolicy, fixedSeed: UInt64,
        model makeModel: @escaping (MemoryStore<Int, Int>.Configuration, @escaping (Int) -> Int) -> Model
    ) async throws {
        try await OffPool.run {
            let tests = MemoryStoreTests()
            try tests.runDifferential(testCase, policy: policy, seed: fixedSeed, operations: 100_000, model: makeModel)
            try tests.runDifferential(testCase, policy: policy, seed: UInt64.random(in: 0...UInt64.max), operations: 30_000, model: makeModel)
        }
    }

    func runDifferential<Model: MemoryStoreModel<Int, Int>>(
        _ testCase: DifferentialCase, policy: EvictionPolicy, seed: UInt64, operations: Int,
        model makeModel: (MemoryStore<Int, Int>.Configuration, @escaping (Int) -> Int) -> Model
    ) throws {
        let clock = TestClock()
        var configuration = MemoryStore<Int, Int>.Configuration(now: clock.closure, policy: policy)
        testCase.configuration(&configuration)
        let store = try MemoryStore<Int, Int>(configuration: configuration)
        let measure = configuration.cost ?? { _ in 1 }
        var model = makeModel(configuration, measure)
        var random = SplitMix64(seed: seed)
        let context = "seed \(seed) (\(testCase.name), \(policy))"

        func randomExpiry(now: Date) -> Expiry? {
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1: return nil
            case 2: return .never
            case 3: return .seconds(Double(Int.random(in: 1...40, using: &random)))
            case 4: return .seconds(Double(Int.random(in: -2...2, using: &random)) / 2)
            default: return .date(now.addingTimeInterval(Double(Int.random(in: -5...40, using: &random))))
            }
        }

        for step in 0..<operations {
            let now = clock.peek
            let time = now.timeIntervalSinceReferenceDate
            let key = Int.random(in: 0..<64, using: &random)
            let operation = Int.random(in: 0..<100, using: &random)
            let where_ = "\(context), step \(step), operation \(operation), key \(key)"
            switch operation {
            case 0..<30:
                let value = Int.random(in: 0..<1_000, using: &random)
                let cost: Int? = switch Int.random(in: 0..<8, using: &random) {
                case 0..<4: nil
                case 4..<7: Int.random(in: 0...20, using: &random)
                default: Int.random(in: 0...160, using: &random)
                }
                let expiry = randomExpiry(now: now)
                let kept = store.setValue(value, forKey: key, cost: cost, expiry: expiry)
                let expected = model.setValue(value, forKey: key, cost: cost, expiry: expiry, now: time)
                #expect(kept == expected, "setValue: \(where_)")
            case 30..<55:
                #expect(store.value(forKey: key) == model.value(forKey: key, now: time)?.value, "value: \(where_)")
            case 55..<60:
                let entry = store.entry(forKey: key)
                let expected = model.value(forKey: key, now: time)
                #expect(entry?.value == expected?.value, "entry value: \(where_)")
                #expect(entry?.cost == expected?.cost, "entry cost: \(where_)")
                #expect(
                    entry?.expirationDate?.timeIntervalSinceReferenceDate
                        == expected.flatMap { $0.expiration == .infinity ? nil : $0.expiration },
                    "entry expiration: \(where_)"
                )
            case 60..<70:
                #expect(store.removeValue(forKey: key) == (model.removeValue(forKey: key, now: time) != nil), "removeValue: \(where_)")
            case 70..<80:
                #expect(store.containsValue(forKey: key) == model.containsValue(forKey: key, now: time), "contains: \(where_)")
            case 80..<82:
                #expect(store.removeExpired() == model.removeExpired(now: time), "removeExpired: \(where_)")
            case 82..<94:
                clock.advance(by: Double(Int.random(in: 0...6, using: &random)) / 2)
            case 94..<96:
                let value = Int.random(in: 0..<1_000, using: &random)
                store[key] = value
                model.setValue(value, forKey: key, cost: nil, expiry: nil, now: time)
            case 96:
                let count = Int.random(in: 0...30, using: &random)
                store.trim(toCount: count)
                model.trim(toCount: count, now: time)
            case 97:
                let cost = Int.random(in: 0...500, using: &random)
                store.trim(toCost: cost)
                model.trim(toCost: cost, now: time)
            case 98 where Int.random(in: 0..<20, using: &random) == 0:
                store.removeAll()
                model.removeAll()
            default:
                store[key] = nil
                _ = model.removeValue(forKey: key, now: time)
            }

            // Order and statistics every step; S3-FIFO's counters and ghost, W-TinyLFU's estimates,
            // every 16 steps.
            let order = store.keysByRecency()
            let checksQueues = policy != .lru && step % 16 == 0
            let counters = !checksQueues ? [:] : policy == .s3fifo
                ? store.queueKeys().frequencies
                : Dictionary(uniqueKeysWithValues: order.map { ($0, store.frequencyEstimate(forKey: $0)) })
            guard order == model.keysByRecency, store.statistics == model.snapshot,
                  !checksQueues || (counters == model.frequencies && store.ghostCount == model.ghostCount)
            else {
                Issue.record("""
                    Diverged from the model: \(where_)
                    store order \(order), counters \(counters), ghost \(store.ghostCount)
                    model order \(model.keysByRecency), counters \(model.frequencies), ghost \(model.ghostCount)
                    store statistics \(store.statistics)
                    model statistics \(model.snapshot)
                    """)
                return
            }
            if step % 1_000 == 0 {
                let violations = store.invariantViolations()
                guard violations.isEmpty else {
                    Issue.record("Invariants broken: \(violations), \(where_)")
                    return
                }
            }
        }
        #expect(store.invariantViolations() == [], "\(context)")
    }
}
