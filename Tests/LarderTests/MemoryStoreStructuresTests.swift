import LarderTestSupport
import Testing
@testable import Larder

/// The store's own structures under stress: the key index with colliding hashes, the LRU lists'
/// moves, and the expiry heap under random expirations.
/// Time limit: well under a second alone, but the whole parallel suite can keep these waiting.
@Suite(.timeLimit(.minutes(10)))
struct MemoryStoreStructuresTests {
    /// A key whose hash takes only three values, so every probe run is long and every deletion
    /// shifts entries back.
    struct CollidingKey: Hashable, Sendable, CustomStringConvertible {
        let id: Int
        func hash(into hasher: inout Hasher) { hasher.combine(id % 3) }
        static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id }
        var description: String { "#\(id)" }
    }

    // MARK: - Key index

    @Test(arguments: [EvictionPolicy.lru, .s3fifo, .wTinyLFU])
    func collidingKeysAreFoundRemovedAndEvictedLikeAnyOthers(policy: EvictionPolicy) throws {
        // Given a store limited to 40 entries and keys whose hashes collide
        let store = try MemoryStore<CollidingKey, Int> {
            $0.countLimit = 40
            $0.policy = policy
        }
        var random = SplitMix64(seed: 12)
        var latest: [Int: Int] = [:]
        // When writes, reads and removals of 120 keys are mixed
        for step in 0..<20_000 {
            let id = Int.random(in: 0..<120, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                store.setValue(step, forKey: CollidingKey(id: id))
                latest[id] = step
            case 5..<8:
                // Then a held key always returns its latest value
                if let value = store.value(forKey: CollidingKey(id: id)) { #expect(value == latest[id]) }
            default:
                store.removeValue(forKey: CollidingKey(id: id))
                latest[id] = nil
            }
            if step % 500 == 0 { #expect(store.invariantViolations() == [], "step \(step)") }
        }
        // Then the index holds exactly the live entries, each reachable
        #expect(store.invariantViolations() == [])
        #expect(store.totalCount <= 40)
        for key in store.keys() { #expect(store.value(forKey: key) == latest[key.id]) }
    }

    @Test func removingEveryCollidingKeyLeavesAnEmptyConsistentIndex() throws {
        // Given 300 keys in three hash classes
        let store = try MemoryStore<CollidingKey, Int>()
        for id in 0..<300 { store.setValue(id, forKey: CollidingKey(id: id)) }
        // When they are removed in a scattered order
        for index in 0..<300 {
            let id = (index * 7) % 300
            #expect(store.removeValue(forKey: CollidingKey(id: id)))
            if index % 50 == 0 { #expect(store.invariantViolations() == []) }
        }
        // Then nothing is left and nothing is found
        #expect(store.totalCount == 0)
        #expect(store.value(forKey: CollidingKey(id: 5)) == nil)
        #expect(store.invariantViolations() == [])
    }

    // MARK: - LRU lists

    @Test func movingASlotBetweenListsKeepsBothListsLinkedInOrder() {
        // Given list 0 = [3, 2, 1, 0] and list 1 = [4]
        var lists = LRUList(listCount: 2)
        for slot in 0..<4 { lists.pushFront(slot, in: 0) }
        lists.pushFront(4, in: 1)
        // When a middle slot, the tail, the head and then the last slot move to list 1's front
        lists.move(2, from: 0, toFrontOf: 1)
        #expect(lists.slots(in: 0) == [3, 1, 0] && lists.slots(in: 1) == [2, 4])
        lists.move(0, from: 0, toFrontOf: 1)
        #expect(lists.slots(in: 0) == [3, 1] && lists.last(in: 0) == 1)
        lists.move(3, from: 0, toFrontOf: 1)
        lists.move(1, from: 0, toFrontOf: 1)
        // Then list 0 is empty and list 1 holds every slot, most recently moved first
        #expect(lists.first(in: 0) == nil && lists.last(in: 0) == nil)
        #expect(lists.slots(in: 1) == [1, 3, 0, 2, 4] && lists.last(in: 1) == 4)
        // And a move within one list is a move to its front; one back into an empty list links it
        lists.move(4, from: 1, toFrontOf: 1)
        lists.move(0, from: 1, toFrontOf: 0)
        #expect(lists.slots(in: 1) == [4, 1, 3, 2] && lists.last(in: 1) == 2)
        #expect(lists.slots(in: 0) == [0] && lists.first(in: 0) == 0 && lists.last(in: 0) == 0)
    }

    @Test func promotingASlotDemotesTheTargetListsOldestSlot() {
        // Given list 0 (probation) = [2, 1, 0] and list 1 (protected) = [5, 4, 3]
        var lists = LRUList(listCount: 2)
        for slot in 0..<3 { lists.pushFront(slot, in: 0) }
        for slot in 3..<6 { lists.pushFront(slot, in: 1) }
        // When a middle slot is promoted with a demotion
        let demoted = lists.promote(1, from: 0, toFrontOf: 1, demotingLast: true)
        // Then it leads list 1, and list 1's oldest, returned, leads list 0
        #expect(demoted == 3)
        #expect(lists.slots(in: 0) == [3, 2, 0] && lists.slots(in: 1) == [1, 5, 4])
        #expect(lists.last(in: 0) == 0 && lists.last(in: 1) == 4)
        // And a promotion without a demotion only moves the slot (here the last of list 0)
        #expect(lists.promote(0, from: 0, toFrontOf: 1, demotingLast: false) == -1)
        #expect(lists.slots(in: 0) == [3, 2] && lists.slots(in: 1) == [0, 1, 5, 4] && lists.last(in: 0) == 2)
    }

    @Test func promotingIntoAnEmptyListWithADemotionMovesTheSlotBack() {
        // Given list 0 = [1, 0] and an empty list 1
        var lists = LRUList(listCount: 2)
        lists.pushFront(0, in: 0)
        lists.pushFront(1, in: 0)
        // When its oldest is promoted to list 1, whose oldest is then demoted
        let demoted = lists.promote(0, from: 0, toFrontOf: 1, demotingLast: true)
        // Then that is the promoted slot itself, now at list 0's front, and list 1 is empty again
        #expect(demoted == 0)
        #expect(lists.slots(in: 0) == [0, 1] && lists.first(in: 1) == nil && lists.last(in: 1) == nil)
    }

    // MARK: - Expiry heap

    @Test func removeExpiredRemovesExactlyTheExpiredEntriesAmongRandomExpirations() throws {
        // Given 500 entries with random lifetimes, some rewritten with another lifetime or none
        let clock = TestClock()
        let store = try MemoryStore<Int, Int> { $0.now = clock.closure }
        var random = SplitMix64(seed: 7)
        var lifetimes: [Int: Double] = [:]
        for key in 0..<500 {
            let lifetime = Double(Int.random(in: 1...100, using: &random))
            store.setValue(key, forKey: key, expiry: .seconds(lifetime))
            lifetimes[key] = lifetime
        }
        for key in stride(from: 0, to: 500, by: 3) {
            if key % 2 == 0 {
                store.setValue(key, forKey: key, expiry: .never)
                lifetimes[key] = .infinity
            } else {
                let lifetime = Double(Int.random(in: 1...100, using: &random))
                store.setValue(key, forKey: key, expiry: .seconds(lifetime))
                lifetimes[key] = lifetime
            }
        }
        for key in stride(from: 1, to: 500, by: 10) {
            store.removeValue(forKey: key)
            lifetimes[key] = nil
        }
        #expect(store.invariantViolations() == [])
        // When the clock passes 50 seconds and expired entries are removed
        clock.advance(by: 50)
        let removed = store.removeExpired()
        // Then exactly those with a lifetime of at most 50 seconds went
        let expected = lifetimes.filter { $0.value <= 50 }
        #expect(removed == expected.count)
        #expect(Set(store.keys()) == Set(lifetimes.keys).subtracting(expected.keys))
        #expect(store.invariantViolations() == [])
    }
}
