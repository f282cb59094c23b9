/// The keys recently evicted from S3-FIFO's small queue, by hash, in FIFO order.
///
/// A ring buffer of `(hash, stamp)` in eviction order, plus ``GhostTable``, which maps each
/// live hash to the stamp of its ring entry. Removing a key (a ghost hit) only deletes its
/// table entry and leaves a stale ring entry behind (its stamp no longer matches); stale
/// entries are dropped when they reach the head, and the ring is compacted when they make up
/// most of it. So every operation is amortized O(1), the ring never holds much more than twice
/// the live entries, and the bound counts live entries only, as libCacheSim's ghost FIFO does.
///
/// A hash collision between two keys can at worst make one key look like a ghost hit (it then
/// enters the main queue directly); with 64-bit hashes this does not happen in practice.
@usableFromInline
struct GhostQueue {
    @usableFromInline
    struct Entry {
        @usableFromInline var hash: Int
        /// The order of insertion; negative marks an empty ``GhostTable`` bucket.
        @usableFromInline var stamp: Int

        @inlinable
        init(hash: Int, stamp: Int) {
            self.hash = hash
            self.stamp = stamp
        }
    }

    /// Power-of-two storage; `head` is the oldest entry, `ringCount` entries follow it.
    @usableFromInline var ring: ContiguousArray<Entry> = []
    @usableFromInline var head = 0
    @usableFromInline var ringCount = 0
    @usableFromInline var live = GhostTable()
    @usableFromInline var nextStamp = 0

    @inlinable
    init() {}

    @inlinable var isEmpty: Bool { live.count == 0 }
    @inlinable var count: Int { live.count }

    /// Removes `hash` if it is a live ghost; returns whether it was.
    @inlinable
    mutating func remove(_ hash: Int) -> Bool {
        guard let index = live.find(hash) else { return false }
        live.remove(at: index)
        // Its ring entry is now stale: keep the ring within twice the live entries here too,
        // or a run of ghost hits without evictions would leave it over that bound.
        if ringCount > 2 * live.count + 32 { compact() }
        return true
    }

    /// Appends `hash`, then drops the oldest entries until at most `limit` remain.
    @inlinable
    mutating func add(_ hash: Int, limit: Int) {
        guard limit > 0 else { return }
        let entry = Entry(hash: hash, stamp: nextStamp)
        nextStamp &+= 1
        live.upsert(entry)  // on a hash collision the older ring entry becomes stale
        push(entry)
        while live.count > limit {
            let oldest = popFirst()
            // Only the live entry for a hash carries its stamp; a stale one is just dropped.
            if let index = live.find(oldest.hash), live.entries[index].stamp == oldest.stamp {
                live.remove(at: index)
            }
        }
        if ringCount > 2 * live.count + 32 { compact() }
    }

    @inlinable
    func isStale(_ entry: Entry) -> Bool {
        guard let index = live.find(entry.hash) else { return true }
        return live.entries[index].stamp != entry.stamp
    }

    @inlinable
    mutating func push(_ entry: Entry) {
        if ringCount == ring.count { relay(capacity: Swift.max(16, 2 * ring.count), keepingStale: true) }
        let position = (head &+ ringCount) & (ring.count &- 1)
        ring.withUnsafeMutableBufferPointer { $0[position] = entry }
        ringCount += 1
    }

    @inlinable
    mutating func popFirst() -> Entry {
        let entry = ring.withUnsafeBufferPointer { $0[head] }
        head = (head &+ 1) & (ring.count &- 1)
        ringCount -= 1
        return entry
    }

    /// Re-lays the ring in order into `capacity` (a power of two) slots.
    @usableFromInline
    mutating func relay(capacity: Int, keepingStale: Bool) {
        var fresh = ContiguousArray(repeating: Entry(hash: 0, stamp: 0), count: capacity)
        var kept = 0
        for offset in 0..<ringCount {
            let entry = ring[(head + offset) & (ring.count - 1)]
            if keepingStale || !isStale(entry) {
                fresh[kept] = entry
                kept += 1
            }
        }
        ring = fresh
        head = 0
        ringCount = kept
    }

    /// Drops every stale entry, shrinking the storage to fit twice the live entries.
    @usableFromInline
    mutating func compact() {
        var capacity = 16
        while capacity < 2 * live.count { capacity *= 2 }
        relay(capacity: capacity, keepingStale: false)
    }

    /// The live hashes from oldest to newest (for tests; O(n)).
    func hashesInOrder() -> [Int] {
        (0..<ringCount).map { ring[(head + $0) & (ring.count - 1)] }.filter { !isStale($0) }.map(\.hash)
    }

    func invariantViolations(limit: Int) -> [String] {
        var problems: [String] = []
        let order = hashesInOrder()
        if order.count != live.count || Set(order).count != order.count {
            problems.append("ghost ring holds \(order.count) live entries, table \(live.count)")
        }
        if live.count > limit { problems.append("ghost holds \(live.count) > \(limit) keys") }
        if ringCount > 2 * live.count + 32 { problems.append("ghost ring \(ringCount) not compacted (\(live.count) live)") }
        return problems
    }
}
