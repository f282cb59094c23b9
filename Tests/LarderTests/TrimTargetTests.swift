import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// One overflow rule for both stores: the target that `trimTarget(limit:ratio:)` computes, and
/// expired entries first.
@Suite(.timeLimit(.minutes(10)))
struct TrimTargetTests {
    /// 0, 0.05, …, 0.95, each the `Double` nearest to its decimal literal (as a user writes it).
    static let ratios = (0..<20).map { Double($0) / 20 }

    // MARK: - Memory and disk keep the same count

    /// The count a store keeps after `limit + 1` writes of new keys: the target, but never
    /// less than the entry just written (a write never evicts its own entry).
    static func expectedCount(limit: Int, ratio: Double) -> Int {
        limit == 0 ? 0 : Swift.max(1, trimTarget(limit: limit, ratio: ratio))
    }

    @Test func trimTargetReadsTheRatioAsTheDecimalItStandsFor() {
        // Given ratios whose product with the limit is an integer only in decimal arithmetic
        // When the target is computed
        // Then it is that integer, not one less
        #expect(trimTarget(limit: 10, ratio: 0.8) == 2)
        #expect(trimTarget(limit: 10, ratio: 0.3) == 7)
        #expect(trimTarget(limit: 100, ratio: 0.15) == 85)
        #expect(trimTarget(limit: 10, ratio: 0.05) == 9)  // 9.5 rounds down
        #expect(trimTarget(limit: 7, ratio: 0) == 7)
    }

    @Test(arguments: [EvictionPolicy.lru, .s3fifo, .wTinyLFU])
    func memoryKeepsTheTargetCountForEveryLimitAndRatio(policy: EvictionPolicy) async throws {
        // Off the cooperative pool: 4,000 stores take tens of seconds of one of its two threads.
        try await OffPool.run {
            // Given every (limit, ratio) pair with limits 0…200 and ratios 0…0.95 in steps of 0.05
            for ratio in Self.ratios {
                for limit in 0...200 {
                    let store = try MemoryStore<Int, Int> {
                        $0.countLimit = limit
                        $0.overflowTrimRatio = ratio
                        $0.policy = policy
                    }
                    // When limit + 1 new keys are written
                    for key in 0...limit { store.setValue(key, forKey: key) }
                    // Then the store keeps the target count
                    let expected = Self.expectedCount(limit: limit, ratio: ratio)
                    guard store.totalCount == expected else {
                        Issue.record("memory (\(policy)) limit \(limit) ratio \(ratio): \(store.totalCount) entries, expected \(expected)")
                        return
                    }
                }
            }
        }
    }

    /// The disk grid: every limit 1…24, then 25, 50, …, 200 (a disk store refuses `countLimit`
    /// 0, memory's 0 keeps nothing and is tested above). With every ratio that is 640 real
    /// stores, one fresh directory each, about 25,000 disk writes. The full 201 × 20 grid
    /// (4,000 disk stores, 406,000 writes) passes too but takes over three minutes in a debug
    /// build; memory is checked on the full grid above against the same `trimTarget`.
    static let diskLimits = Array(1...24) + Array(stride(from: 25, through: 200, by: 25))

    @Test func memoryAndDiskKeepTheSameCountForEveryRatioOnTheDiskGrid() async throws {
        // Off the cooperative pool: 640 stores take tens of seconds of one of its two threads.
        let disagreements = try await OffPool.run { () throws -> [String] in
            let root = try TemporaryDirectory("trim-target")
            let value = Data([1])
            var disagreements: [String] = []
            for (ratioIndex, ratio) in Self.ratios.enumerated() {
                for limit in Self.diskLimits {
                    // Given a memory store and a disk store with the same count limit and ratio
                    let memory = try MemoryStore<String, Data> {
                        $0.countLimit = limit
                        $0.overflowTrimRatio = ratio
                    }
                    let directory = root.url.appendingPathComponent("\(ratioIndex)-\(limit)", isDirectory: true)
                    let disk = try DiskStore(directory: directory) {
                        $0.countLimit = limit
                        $0.overflowTrimRatio = ratio
                        $0.durability = .fast
                    }
                    // When limit + 1 new keys are written to each
                    for index in 0...limit {
                        let key = "k\(index)"
                        memory.setValue(value, forKey: key)
                        try disk.setValue(value, forKey: key, isCompressible: false)
                    }
                    // Then both keep the same count, the target's
                    let expected = Self.expectedCount(limit: limit, ratio: ratio)
                    if memory.totalCount != expected || disk.totalCount != expected {
                        disagreements.append("limit \(limit) ratio \(ratio): memory \(memory.totalCount), disk \(disk.totalCount), target \(expected)")
                    }
                    disk.close()
                    try? FileManager.default.removeItem(at: directory)
                }
            }
            return disagreements
        }
        #expect(disagreements == [], "\(disagreements.count) of \(Self.ratios.count * Self.diskLimits.count) pairs disagree")
    }

    // MARK: - Expired entries go first

    @Test(arguments: [EvictionPolicy.lru, .s3fifo, .wTinyLFU])
    func anOverflowingWriteDropsExpiredEntriesBeforeEvictingLiveOnes(policy: EvictionPolicy) throws {
        // Given a full store whose most recently written entry has expired
        let clock = TestClock()
        let store = try MemoryStore<String, Int> {
            $0.countLimit = 3
            $0.now = clock.closure
            $0.policy = policy
        }
        store.setValue(1, forKey: "b")
        store.setValue(2, forKey: "c")
        store.setValue(3, forKey: "a", expiry: .seconds(10))
        clock.advance(by: 11)
        // When a write without expiry overflows the count limit
        store.setValue(4, forKey: "d")
        // Then the expired entry went, and no live one
        #expect(Set(store.keys()) == ["b", "c", "d"])
        #expect(store.totalCount == 3)
        #expect(store.statistics.expirations == 1)
        #expect(store.statistics.evictions == 0)
        #expect(store.invariantViolations() == [])
    }

    @Test func anOverflowingWriteDropsEveryExpiredEntryThenEvictsDownToTheTarget() throws {
        // Given a store of 10 with ratio 0.5 holding 2 expired and 8 live entries
        let clock = TestClock()
        let store = try MemoryStore<Int, Int> {
            $0.countLimit = 10
            $0.overflowTrimRatio = 0.5
            $0.now = clock.closure
        }
        for key in 0..<8 { store.setValue(key, forKey: key) }
        store.setValue(8, forKey: 8, expiry: .seconds(5))
        store.setValue(9, forKey: 9, expiry: .seconds(5))
        clock.advance(by: 6)
        // When an eleventh entry is written
        store.setValue(10, forKey: 10)
        // Then both expired entries went, then the least recently used down to 5 entries
        #expect(store.totalCount == 5)
        #expect(store.keys() == [10, 7, 6, 5, 4])
        #expect(store.statistics.expirations == 2)
        #expect(store.statistics.countEvictions == 4)
        #expect(store.invariantViolations() == [])
    }

    @Test func aWriteThatDoesNotOverflowLeavesExpiredEntriesAlone() throws {
        // Given a store with room and an expired entry
        let clock = TestClock()
        let store = try MemoryStore<Int, Int> {
            $0.countLimit = 10
            $0.now = clock.closure
        }
        store.setValue(1, forKey: 1, expiry: .seconds(1))
        clock.advance(by: 2)
        // When a write fits
        store.setValue(2, forKey: 2)
        // Then the expired entry is still held (and still never returned)
        #expect(store.totalCount == 2)
        #expect(store.statistics.expirations == 0)
        #expect(store.value(forKey: 1) == nil)
    }

    @Test func aCostOverflowAlsoDropsExpiredEntriesFirst() throws {
        // Given a cost-limited store whose newest entry has expired
        let clock = TestClock()
        let store = try MemoryStore<Int, Int> {
            $0.costLimit = 30
            $0.now = clock.closure
        }
        store.setValue(1, forKey: 1, cost: 10)
        store.setValue(2, forKey: 2, cost: 10)
        store.setValue(3, forKey: 3, cost: 10, expiry: .date(clock.peek.addingTimeInterval(1)))
        clock.advance(by: 1)
        // When a write overflows the cost limit
        store.setValue(4, forKey: 4, cost: 10)
        // Then the expired entry paid for it
        #expect(Set(store.keys()) == [1, 2, 4])
        #expect(store.totalCost == 30)
        #expect(store.statistics.costEvictions == 0)
    }

    @Test(arguments: [EvictionPolicy.lru, .s3fifo, .wTinyLFU])
    func trimDropsExpiredEntriesBeforeLiveOnes(policy: EvictionPolicy) throws {
        // Given three entries, the most recent of which has expired
        let clock = TestClock()
        let store = try MemoryStore<Int, Int> {
            $0.now = clock.closure
            $0.policy = policy
        }
        store.setValue(1, forKey: 1, cost: 5)
        store.setValue(2, forKey: 2, cost: 5)
        store.setValue(3, forKey: 3, cost: 5, expiry: .seconds(1))
        clock.advance(by: 1)
        // When trimmed to two entries, then to a cost of ten
        store.trim(toCount: 2)
        store.trim(toCost: 10)
        // Then only the expired entry went
        #expect(Set(store.keys()) == [1, 2])
        #expect(store.totalCount == 2)
        #expect(store.statistics.expirations == 1)
        #expect(store.statistics.evictions == 0)
    }

    @Test func aNegativeTrimClampsToZero() throws {
        // Given a store with entries
        let store = try MemoryStore<Int, Int>()
        for key in 0..<5 { store.setValue(key, forKey: key, cost: 3) }
        // When trimmed to a negative count
        store.trim(toCount: -1)
        // Then it is empty, as with 0
        #expect(store.totalCount == 0)
        for key in 0..<5 { store.setValue(key, forKey: key, cost: 3) }
        // When trimmed to a negative cost
        store.trim(toCost: -100)
        // Then it is empty too
        #expect(store.totalCount == 0)
        #expect(store.totalCost == 0)
        #expect(store.statistics.countEvictions == 5)
        #expect(store.statistics.costEvictions == 5)
    }

    @Test(arguments: [Expiry.seconds(-1), .seconds(0), .seconds(.infinity), .seconds(.nan)])
    func aDefaultExpiryThatIsNotPositiveAndFiniteIsRefused(expiry: Expiry) {
        #expect(throws: StorageError.self) {
            try MemoryStore<Int, Int> { $0.defaultExpiry = expiry }
        }
    }

    @Test func aCountLimitOfZeroIsValidAndKeepsNothing() throws {
        let store = try MemoryStore<Int, Int> { $0.countLimit = 0 }
        #expect(store.setValue(1, forKey: 1) == false)
        #expect(store.totalCount == 0)
    }
}
