import Foundation
import Testing
@testable import Larder

/// ``EvictionPolicy/s3fifo``'s own behaviour; the policy-independent behaviour is covered by
/// ``MemoryStoreTests``, which runs those tests under both policies.
///
/// Ten minutes, as every suite: the differential cases replay 100,000 operations each against a
/// linear-scan model, in a debug build, and in a full parallel run they have taken 95 s.
@Suite(.timeLimit(.minutes(10)))
struct S3FIFOPolicyTests {
    typealias Store = MemoryStore<String, Int>
    let clock = TestClock()

    func makeStore(_ configure: (inout Store.Configuration) -> Void = { _ in }) throws -> Store {
        var configuration = Store.Configuration(now: clock.closure, policy: .s3fifo)
        configure(&configuration)
        return try Store(configuration: configuration)
    }

    /// A store of countLimit 10 (small queue 1, main 9), filled with k0...k9: k0 in the small
    /// queue, k1...k9 in main (before the first eviction a full small queue sends newcomers to main).
    func makeFullStore() throws -> Store {
        let store = try makeStore { $0.countLimit = 10 }
        for key in 0..<10 { store.setValue(key, forKey: "k\(key)") }
        return store
    }

    // MARK: - Queues

    @Test func newEntriesFillTheSmallQueueThenMainUntilTheFirstEviction() throws {
        // Given / When
        let store = try makeFullStore()
        // Then
        let queues = store.queueKeys()
        #expect(queues.small == ["k0"])
        #expect(queues.main == (1...9).reversed().map { "k\($0)" })
        #expect(store.invariantViolations() == [])
    }

    @Test func aHitBumpsTheCounterUpToThreeAndMovesNothing() throws {
        // Given
        let store = try makeFullStore()
        let before = store.queueKeys()
        // When
        for _ in 0..<5 { _ = store.value(forKey: "k3") }
        _ = store.value(forKey: "k0")
        // Then
        let after = store.queueKeys()
        #expect(after.small == before.small && after.main == before.main)
        #expect(after.frequencies["k3"] == 3 && after.frequencies["k0"] == 1 && after.frequencies["k5"] == 0)
    }

    @Test func anUnreadSmallEntryIsEvictedFirstAndRememberedInTheGhost() throws {
        // Given a full store whose small queue holds k0
        let store = try makeFullStore()
        // When a new key arrives
        store.setValue(10, forKey: "new")
        // Then k0 (one-hit wonder) goes, to the ghost; the newcomer takes its place in small
        #expect(store.value(forKey: "k0") == nil)
        #expect(store.queueKeys().small == ["new"])
        #expect(store.ghostCount == 1)
        #expect(store.statistics.countEvictions == 1)
    }

    @Test func aKeyInTheGhostComesBackIntoTheMainQueue() throws {
        // Given k0 evicted into the ghost
        let store = try makeFullStore()
        store.setValue(10, forKey: "new")
        // When k0 is written again
        store.setValue(0, forKey: "k0")
        // Then it skips the small queue (and "new", unread, is the one evicted)
        let queues = store.queueKeys()
        #expect(queues.main.first == "k0")
        #expect(queues.small.isEmpty)
        #expect(store.value(forKey: "new") == nil)
        #expect(store.invariantViolations() == [])
    }

    @Test func aSmallEntryReadTwiceMovesToMainInsteadOfBeingEvicted() throws {
        // Given k0 in the small queue, read twice
        let store = try makeFullStore()
        _ = store.value(forKey: "k0")
        _ = store.value(forKey: "k0")
        // When a new key needs room
        store.setValue(10, forKey: "new")
        // Then k0 moved to the front of main with a fresh counter; the small queue was empty,
        // so main's oldest entry with a zero counter (k1) was evicted instead
        let queues = store.queueKeys()
        #expect(queues.main.first == "k0" && queues.frequencies["k0"] == 0)
        #expect(store.value(forKey: "k1") == nil)
        #expect(store.ghostCount == 0)  // main evictions are not remembered
    }

    @Test func mainGivesAReadEntryAnotherRoundWithItsCounterDecremented() throws {
        // Given a store of 5 (small share 0), everything in main: e d c b a
        let store = try makeStore { $0.countLimit = 5 }
        for key in ["a", "b", "c", "d", "e"] { store.setValue(1, forKey: key) }
        _ = store.value(forKey: "a")
        _ = store.value(forKey: "a")
        // When f arrives
        store.setValue(1, forKey: "f")
        // Then a (counter 2) went back to the front with counter 1, and b was evicted
        let queues = store.queueKeys()
        #expect(queues.main == ["a", "e", "d", "c"])
        #expect(queues.frequencies["a"] == 1)
        #expect(queues.small == ["f"])
    }

    @Test func theGhostQueueIsBoundedByTheMainQueuesShare() throws {
        // Given a store of 10 (main share 9)
        let store = try makeStore { $0.countLimit = 10 }
        // When a thousand distinct keys pass through
        for key in 0..<1_000 { store.setValue(key, forKey: "\(key)") }
        // Then the ghost remembers only the last 9 keys evicted from the small queue
        #expect(store.ghostCount == 9)
        #expect(store.invariantViolations() == [])
    }

    @Test func removalsExpiryAndRefusalsDoNotFeedTheGhost() throws {
        // Given
        let store = try makeStore { $0.countLimit = 10; $0.entryCostLimit = 5 }
        store.setValue(1, forKey: "removed")
        store.setValue(1, forKey: "expiring", expiry: .seconds(1))
        store.setValue(1, forKey: "refused")
        // When
        store.removeValue(forKey: "removed")
        clock.advance(by: 1)
        _ = store.removeExpired()
        store.setValue(2, forKey: "refused", cost: 6)
        // Then
        #expect(store.totalCount == 0 && store.ghostCount == 0)
    }

    @Test func anOverwriteCountsAsAHitAndIsNotEvictedByItsOwnWrite() throws {
        // Given a cost limit of 10 with a (cost 4) at the tail of the small queue
        let store = try makeStore { $0.costLimit = 10 }
        store.setValue(1, forKey: "a", cost: 4)
        store.setValue(1, forKey: "b", cost: 4)
        // When a grows to 8
        store.setValue(2, forKey: "a", cost: 8)
        // Then b is evicted, a stays, with its counter bumped
        #expect(store.value(forKey: "b") == nil)
        #expect(store.entry(forKey: "a")?.cost == 8)
        #expect(store.totalCost == 8)
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
        #expect(Set(store.keysByRecency()) == ["s1", "s2", "s3", "l2", "l3"])
        #expect(store.statistics.bucketEvictions == 1)
        // When a fourth small entry arrives, a small one goes
        store.setValue(1, forKey: "s4", cost: 0)
        #expect(Set(store.keysByRecency()).intersection(["l2", "l3"]) == ["l2", "l3"])
        #expect(store.totalCount == 5 && store.statistics.bucketEvictions == 2)
        #expect(store.invariantViolations() == [])
    }

    @Test func overflowTrimRatioEvictsDownToTheTargetUnderS3FIFO() throws {
        // Given a count limit of 10 with a ratio of 0.2, full
        let store = try makeStore {
            $0.countLimit = 10
            $0.overflowTrimRatio = 0.2
        }
        for key in 0..<10 { store.setValue(key, forKey: "\(key)") }
        // When the 11th entry arrives
        store.setValue(10, forKey: "10")
        // Then 8 remain, the new one among them
        #expect(store.totalCount == 8)
        #expect(store.containsValue(forKey: "10"))
        #expect(store.statistics.countEvictions == 3)
    }

    @Test func costLimitAndTrimEvictTheQueuesVictims() throws {
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
    }

    // MARK: - Differential test against a reference model

    static let s3fifoDifferentialCases: [MemoryStoreTests.DifferentialCase] = [
        .init(name: "count limit only, many evictions") {
            $0.countLimit = 20
            $0.costLimit = .max
        },
        .init(name: "cost limit only, large small queue") {
            $0.costLimit = 200
        },
        .init(name: "buckets only, ratio 0.2") {
            $0.sizeBuckets = [.init(maxEntryCost: 5, countLimit: 12), .init(maxEntryCost: 40, countLimit: 7), .init(maxEntryCost: .max, countLimit: 3)]
            $0.overflowTrimRatio = 0.2
        },
    ]

    // `.serialized` for CPU, not shared state: six 130,000-step runs at once starve every
    // other test of the two cores CI has, pushing trivial tests past their time limit.
    @Test(.serialized, arguments: MemoryStoreTests.differentialCases + s3fifoDifferentialCases)
    func behavesLikeTheReferenceModelOverRandomOperations(_ testCase: MemoryStoreTests.DifferentialCase) async throws {
        try await MemoryStoreTests.runDifferentialOffPool(testCase, policy: .s3fifo, fixedSeed: 0x5EED_0003, model: ReferenceS3FIFOStore.init)
    }
}
