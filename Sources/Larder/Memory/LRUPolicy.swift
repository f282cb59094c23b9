/// The bookkeeping of the least-recently-used eviction policy.
///
/// See ``MemoryPolicy`` for how the work is split with the store. This LRU policy keeps one recency list over all slots plus one list per size bucket, so both
/// "least recently used overall" and "least recently used in bucket `b`" are O(1).
@usableFromInline
struct LRUPolicy: MemoryPolicy {
    @usableFromInline var all = LRUList(listCount: 1)
    @usableFromInline var byBucket: LRUList

    /// Creates the bookkeeping for a store with `bucketCount` size buckets (0 for none).
    @inlinable
    init(bucketCount: Int) {
        byBucket = LRUList(listCount: bucketCount)
    }

    /// Records a new entry in `slot`, belonging to `bucket` (or `nil`).
    @inlinable @inline(__always)
    mutating func didInsert(_ slot: Int, bucket: Int?, cost: Int, keyHash: Int) {
        all.pushFront(slot, in: 0)
        if let bucket { byBucket.pushFront(slot, in: bucket) }
    }

    /// Records a read of, or a new value in, the entry in `slot`.
    @inlinable @inline(__always)
    mutating func didAccess(_ slot: Int, bucket: Int?) {
        all.moveToFront(slot, in: 0)
        if let bucket { byBucket.moveToFront(slot, in: bucket) }
    }

    /// Records a new value in `slot`, maybe of another bucket: a use.
    @inlinable @inline(__always)
    mutating func didUpdate(_ slot: Int, from old: Int?, to new: Int?, cost: Int) {
        guard old != new else { return didAccess(slot, bucket: new) }
        all.moveToFront(slot, in: 0)
        if let old { byBucket.remove(slot, from: old) }
        if let new { byBucket.pushFront(slot, in: new) }
    }

    /// Nothing to do: the written entry is already at the front.
    @inlinable @inline(__always)
    mutating func didFinishWrite(_ slot: Int) {}

    /// Records that the entry in `slot`, of `bucket`, is gone.
    @inlinable @inline(__always)
    mutating func didRemove(_ slot: Int, bucket: Int?, isEviction: Bool) {
        all.remove(slot, from: 0)
        if let bucket { byBucket.remove(slot, from: bucket) }
    }

    /// The entry to evict when a store-wide limit is exceeded.
    @inlinable
    func victim() -> Int? {
        all.last(in: 0)
    }

    /// The entry to evict when `bucket` holds too many entries.
    @inlinable
    func victim(inBucket bucket: Int) -> Int? {
        byBucket.last(in: bucket)
    }

    /// The slots from most to least recently used (O(n)).
    func slotsInOrder() -> [Int] {
        all.slots(in: 0)
    }

    /// The slots of `bucket` from most to least recently used (for tests; O(n)).
    func slotsByRecency(inBucket bucket: Int) -> [Int] {
        byBucket.slots(in: bucket)
    }

    /// Forgets every entry.
    @inlinable
    mutating func removeAll() {
        all.removeAll()
        byBucket.removeAll()
    }

    /// The recency list holds exactly the live slots, and each bucket's list is the store's
    /// order filtered to the bucket.
    func invariantViolations(live: [Int], bucketOf: (Int) -> Int?, bucketCount: Int) -> [String] {
        var problems: [String] = []
        let order = slotsInOrder()
        if Set(order) != Set(live) || order.count != live.count {
            problems.append("recency list \(order) != live slots \(live)")
        }
        for bucket in 0..<bucketCount {
            let bucketOrder = slotsByRecency(inBucket: bucket)
            if bucketOrder != order.filter({ bucketOf($0) == bucket }) {
                problems.append("bucket \(bucket) recency \(bucketOrder) disagrees with the store's order")
            }
        }
        return problems
    }
}
