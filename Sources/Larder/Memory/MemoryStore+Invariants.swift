// Diagnostics for tests: the store's view of its policy and the checks of its invariants.

import Foundation

extension MemoryStore {
    /// The keys from most to least recently used (for tests; O(n)). Under S3-FIFO: the small
    /// queue, then the main queue, each newest first.
    func keysByRecency() -> [Key] {
        return locked.withLockUnchecked { state in state.keysByRecency() }
    }

    /// S3-FIFO's small and main queues, newest first, and every entry's counter (for tests; O(n)).
    func queueKeys() -> (small: [Key], main: [Key], frequencies: [Key: Int]) {
        return locked.withLockUnchecked { state in state.queueKeys() }
    }

    /// The number of keys in S3-FIFO's ghost queue (for tests).
    var ghostCount: Int {
        return locked.withLockUnchecked { state in state.policy.s3fifo.ghost.count }
    }

    /// W-TinyLFU's window, probation and protected lists, newest first (for tests; O(n)).
    func segmentKeys() -> (window: [Key], probation: [Key], protected: [Key]) {
        return locked.withLockUnchecked { state in
            let lists = [WTinyLFUPolicy.windowList, WTinyLFUPolicy.probationList, WTinyLFUPolicy.protectedList]
            let keys = lists.map { list in state.policy.wTinyLFU.slots(inList: list).map { state.slots[$0]!.key } }
            return (keys[0], keys[1], keys[2])
        }
    }

    /// W-TinyLFU's popularity estimate of `key` (for tests).
    func frequencyEstimate(forKey key: Key) -> Int {
        return locked.withLockUnchecked { state in state.policy.wTinyLFU.sketch.estimate(key.hashValue) }
    }

    /// Descriptions of every broken internal invariant; empty when the store is consistent.
    func invariantViolations() -> [String] {
        return locked.withLockUnchecked { state in state.invariantViolations() }
    }
}

extension MemoryStore.State {
    /// LRU: keys from most to least recently used. S3-FIFO: the small queue, then the main
    /// queue, each from newest to oldest.
    func keysByRecency() -> [Key] {
        liveKeysByRecency(now: -.infinity)
    }

    /// S3-FIFO's queues, newest first, with each entry's counter; empty under LRU.
    func queueKeys() -> (small: [Key], main: [Key], frequencies: [Key: Int]) {
        let small = policy.s3fifo.slots(inList: S3FIFOPolicy.smallList).map { slots[$0]!.key }
        let main = policy.s3fifo.slots(inList: S3FIFOPolicy.mainList).map { slots[$0]!.key }
        var frequencies: [Key: Int] = [:]
        for slot in index.allSlots() where policy.kind == .s3fifo {
            frequencies[slots[slot]!.key] = Int(policy.s3fifo.meta[slot].frequency)
        }
        return (small, main, frequencies)
    }

    /// Descriptions of every broken invariant of the shared state, then of the policy's.
    func invariantViolations() -> [String] {
        var problems: [String] = []
        let live = slots.indices.filter { slots[$0] != nil }
        if live.count != index.count { problems.append("\(live.count) slots but \(index.count) keys") }
        if usage.count != index.count { problems.append("count \(usage.count) != \(index.count) keys") }
        let cost = live.reduce(0) { $0 + slots[$1]!.cost }
        if usage.cost != cost { problems.append("cost \(usage.cost) != sum \(cost)") }
        for slot in live where self.slot(of: slots[slot]!.key, hash: slots[slot]!.hash) != slot {
            problems.append("key \(slots[slot]!.key) is not found at its slot \(slot)")
        }
        for slot in live where slots[slot]!.hash != slots[slot]!.key.hashValue {
            problems.append("slot \(slot) keeps a wrong hash")
        }
        if Set(index.allSlots()) != Set(live) { problems.append("key index slots \(index.allSlots()) != live slots \(live)") }
        let free = Array(freeSlots.prefix(freeCount))
        if Set(free).count != freeCount || free.contains(where: { slots[$0] != nil }) || free.count + live.count != slots.count {
            problems.append("free slots \(free) disagree with the \(slots.count - live.count) empty ones")
        }
        problems += index.invariantViolations()
        var expiring: [Int: Double] = [:]
        for slot in live where slots[slot]!.expiration != .infinity { expiring[slot] = slots[slot]!.expiration }
        problems += expiry.invariantViolations(expiring: expiring)
        for bucket in limits.bucketMaxCosts.indices {
            let members = live.filter { slots[$0]!.bucket == bucket }
            if usage.bucketCounts[bucket] != members.count {
                problems.append("bucket \(bucket) count \(usage.bucketCounts[bucket]) != \(members.count)")
            }
            if usage.bucketCounts[bucket] > limits.bucketCountLimits[bucket] {
                problems.append("bucket \(bucket) over its limit")
            }
        }
        problems += policy.invariantViolations(
            live: live, bucketOf: { slots[$0]!.bucket }, bucketCount: limits.bucketMaxCosts.count
        )
        if usage.count > Swift.max(limits.countLimit, 1) { problems.append("count over the limit") }
        return problems
    }
}
