/// The bookkeeping of the S3-FIFO eviction policy (``EvictionPolicy/s3fifo``).
///
/// Like ``LRUPolicy`` it only answers *which* slot to evict; the store's limits accounting says
/// whether and in which scope. Unlike LRU it needs a share of each limit (10% for the small
/// queue) and each entry's cost, so it keeps its own per-queue counts and costs.
///
/// Layout: every queued slot is in one of two global FIFO lists (`small`, `main`; front =
/// newest) and, when the store has size buckets, also in its bucket's copy of that list, which
/// is always the global list filtered to the bucket (both are only ever pushed to the front or
/// unlinked, so the projection stays ordered). Per-slot metadata holds the counter, the queue,
/// the bucket, the cost and the key's hash (for the ghost queue).
///
/// The rules follow libCacheSim's `S3FIFO.c`, so that the two agree request for request:
/// - A new entry goes to the main queue if its key is in the ghost queue (and leaves the
///   ghost); otherwise, before the first eviction, to the main queue once the small queue is
///   full; otherwise to the small queue. The decision is made after the write's evictions,
///   which never pick the entry being written (it is *pending* until ``didFinishWrite(_:)``).
/// - To pick a victim: if the main queue is over its share of a limit, or the small queue is
///   empty, take from main, else from small. Small: the oldest entry moves to the front of main
///   with its counter reset if its counter is ≥ 2, and the scan goes on; otherwise it is the
///   victim (and goes to the ghost when evicted). If the small queue empties, decide again.
///   Main: the oldest entry with a non-zero counter goes back to the front with the counter
///   decremented; the first with a zero counter is the victim.
/// - A bucket's overflow runs the same procedure on the bucket's own lists, with the bucket's
///   `countLimit` split 10/90 the same way.
///
/// - Complexity: A hit is O(1) and moves nothing. Picking a victim is amortized O(1): every
///   entry moves to main at most once per insertion, and every reinsertion in main spends one
///   unit of a counter that only a hit can add.
@usableFromInline
struct S3FIFOPolicy: MemoryPolicy {
    /// The queue a slot is in.
    @usableFromInline
    enum Queue: UInt8 {
        case none, small, main
        /// Being written: placed when the write is done (``didFinishWrite(_:)``).
        case pendingNew, pendingSmall, pendingMain
    }

    @usableFromInline
    struct Meta {
        @usableFromInline var keyHash: Int
        @usableFromInline var cost: Int
        @usableFromInline var bucket: Int32
        @usableFromInline var frequency: UInt8
        @usableFromInline var queue: Queue

        @inlinable
        init(keyHash: Int, cost: Int, bucket: Int32, frequency: UInt8, queue: Queue) {
            self.keyHash = keyHash
            self.cost = cost
            self.bucket = bucket
            self.frequency = frequency
            self.queue = queue
        }
    }

    /// The counter saturates here (2 bits).
    @inlinable static var maxFrequency: UInt8 { 3 }
    /// A small-queue entry read this often moves to main instead of being evicted.
    @inlinable static var moveToMainThreshold: UInt8 { 2 }
    /// The small queue's share of every limit.
    static let smallRatio = 0.1

    @inlinable static var smallList: Int { 0 }
    @inlinable static var mainList: Int { 1 }

    @usableFromInline var queues = LRUList(listCount: 2)
    @usableFromInline var bucketQueues: LRUList
    @usableFromInline var meta: ContiguousArray<Meta> = []

    @usableFromInline var smallCount = 0
    @usableFromInline var smallCost = 0
    @usableFromInline var mainCount = 0
    @usableFromInline var mainCost = 0
    @usableFromInline var bucketSmallCounts: [Int]
    @usableFromInline var bucketMainCounts: [Int]

    @usableFromInline var smallCountCapacity: Int
    @usableFromInline var smallCostCapacity: Int
    @usableFromInline var mainCountCapacity: Int
    @usableFromInline var mainCostCapacity: Int
    @usableFromInline let bucketSmallCapacities: [Int]
    @usableFromInline let bucketMainCapacities: [Int]

    /// Whether any victim has been picked yet (libCacheSim's `has_evicted`).
    @usableFromInline var hasEvicted = false
    @usableFromInline var ghost = GhostQueue()

    /// Creates the bookkeeping for the given limits (`bucketCountLimits` empty for no buckets).
    init(countLimit: Int, costLimit: Int, bucketCountLimits: [Int]) {
        smallCountCapacity = Self.smallShare(countLimit)
        smallCostCapacity = Self.smallShare(costLimit)
        mainCountCapacity = countLimit - smallCountCapacity
        mainCostCapacity = costLimit - smallCostCapacity
        bucketSmallCapacities = bucketCountLimits.map(Self.smallShare)
        bucketMainCapacities = bucketCountLimits.map { $0 - Self.smallShare($0) }
        bucketSmallCounts = Array(repeating: 0, count: bucketCountLimits.count)
        bucketMainCounts = Array(repeating: 0, count: bucketCountLimits.count)
        bucketQueues = LRUList(listCount: 2 * bucketCountLimits.count)
    }

    static func smallShare(_ limit: Int) -> Int { Int((Double(limit) * smallRatio).rounded(.down)) }

    /// Sizes the queues for new store-wide limits (the entries stay where they are; the next
    /// victims rebalance them).
    mutating func resize(countLimit: Int, costLimit: Int) {
        smallCountCapacity = Self.smallShare(countLimit)
        smallCostCapacity = Self.smallShare(costLimit)
        mainCountCapacity = countLimit - smallCountCapacity
        mainCostCapacity = costLimit - smallCostCapacity
    }

    // MARK: Recording changes

    /// Records a new entry in `slot`; it joins a queue in ``didFinishWrite(_:)``.
    @inlinable
    mutating func didInsert(_ slot: Int, bucket: Int?, cost: Int, keyHash: Int) {
        // Leave the ghost before this write's evictions can push the key out of it.
        let queue: Queue = !ghost.isEmpty && ghost.remove(keyHash) ? .pendingMain : .pendingNew
        let entry = Meta(keyHash: keyHash, cost: cost, bucket: Int32(bucket ?? -1), frequency: 0, queue: queue)
        if slot < meta.count {
            meta[slot] = entry
        } else {
            while meta.count < slot { meta.append(Meta(keyHash: 0, cost: 0, bucket: -1, frequency: 0, queue: .none)) }
            meta.append(entry)
        }
    }

    /// Records a new value in `slot`: counts as a hit, and the entry leaves its queue until
    /// ``didFinishWrite(_:)`` puts it back at the front, so this write cannot evict it.
    @inlinable
    mutating func didUpdate(_ slot: Int, from oldBucket: Int?, to bucket: Int?, cost: Int) {
        let old = meta[slot]
        unlink(slot, old)
        meta[slot].queue = old.queue == .main ? .pendingMain : .pendingSmall
        meta[slot].frequency = Swift.min(old.frequency &+ 1, Self.maxFrequency)
        meta[slot].cost = cost
        meta[slot].bucket = Int32(bucket ?? -1)
    }

    /// Places the entry written in `slot` in its queue, once the write's evictions are done.
    @inlinable
    mutating func didFinishWrite(_ slot: Int) {
        let entry = meta[slot]
        let queue: Queue
        switch entry.queue {
        case .pendingMain:
            queue = .main
        case .pendingSmall:
            queue = .small
        default:
            // libCacheSim: until the first eviction, a full small queue sends newcomers to main.
            let smallIsFull = smallCount >= smallCountCapacity || smallCost >= smallCostCapacity
            queue = !hasEvicted && smallIsFull ? .main : .small
        }
        link(slot, entry, in: queue)
    }

    /// Records a read of the entry in `slot`: bumps its counter and moves nothing.
    @inlinable @inline(__always)
    mutating func didAccess(_ slot: Int, bucket: Int?) {
        meta.withUnsafeMutableBufferPointer { meta in
            let frequency = meta[slot].frequency
            if frequency < Self.maxFrequency { meta[slot].frequency = frequency &+ 1 }
        }
    }

    /// Records that the entry in `slot` is gone; an eviction from the small queue leaves its
    /// key in the ghost queue.
    @inlinable
    mutating func didRemove(_ slot: Int, bucket: Int?, isEviction: Bool) {
        let entry = meta[slot]
        unlink(slot, entry)
        meta[slot].queue = .none
        if isEviction, entry.queue == .small {
            // As large as the main queue: its share of countLimit, and never more keys than
            // the store holds (which bounds it when only costLimit is set).
            ghost.add(entry.keyHash, limit: Swift.min(mainCountCapacity, smallCount + mainCount))
        }
    }

    // MARK: Choosing victims

    /// The entry to evict for a store-wide limit, after the promotions and reinsertions that
    /// finding it takes.
    @inlinable
    mutating func victim() -> Int? {
        hasEvicted = true
        while true {
            if mainCount > mainCountCapacity || mainCost > mainCostCapacity || smallCount == 0 {
                return mainVictim(list: Self.mainList, bucketed: false)
            }
            while let oldest = queues.last(in: Self.smallList) {
                if meta[oldest].frequency < Self.moveToMainThreshold { return oldest }
                moveToMain(oldest)
            }
            // Every small entry moved to main: decide again (now from main).
        }
    }

    /// The entry to evict when `bucket` holds too many entries.
    @inlinable
    mutating func victim(inBucket bucket: Int) -> Int? {
        hasEvicted = true
        let small = 2 * bucket, main = 2 * bucket + 1
        while true {
            if bucketMainCounts[bucket] > bucketMainCapacities[bucket] || bucketSmallCounts[bucket] == 0 {
                return mainVictim(list: main, bucketed: true)
            }
            while let oldest = bucketQueues.last(in: small) {
                if meta[oldest].frequency < Self.moveToMainThreshold { return oldest }
                moveToMain(oldest)
            }
        }
    }

    /// The oldest entry of a main list with a zero counter; the ones before it go back to the
    /// front with their counters decremented (CLOCK with a 2-bit counter).
    @inlinable
    mutating func mainVictim(list: Int, bucketed: Bool) -> Int? {
        while true {
            let candidate = bucketed ? bucketQueues.last(in: list) : queues.last(in: list)
            guard let oldest = candidate else { return nil }
            let frequency = meta[oldest].frequency
            if frequency == 0 { return oldest }
            meta[oldest].frequency = frequency - 1
            queues.moveToFront(oldest, in: Self.mainList)
            let bucket = Int(meta[oldest].bucket)
            if bucket >= 0 { bucketQueues.moveToFront(oldest, in: 2 * bucket + 1) }
        }
    }

    @inlinable
    mutating func moveToMain(_ slot: Int) {
        let entry = meta[slot]
        unlink(slot, entry)
        meta[slot].frequency = 0
        link(slot, entry, in: .main)
    }

    // MARK: Queue primitives

    @inlinable
    mutating func link(_ slot: Int, _ entry: Meta, in queue: Queue) {
        meta[slot].queue = queue
        let bucket = Int(entry.bucket)
        if queue == .small {
            queues.pushFront(slot, in: Self.smallList)
            smallCount += 1
            smallCost += entry.cost
            if bucket >= 0 {
                bucketQueues.pushFront(slot, in: 2 * bucket)
                bucketSmallCounts[bucket] += 1
            }
        } else {
            queues.pushFront(slot, in: Self.mainList)
            mainCount += 1
            mainCost += entry.cost
            if bucket >= 0 {
                bucketQueues.pushFront(slot, in: 2 * bucket + 1)
                bucketMainCounts[bucket] += 1
            }
        }
    }

    /// Unlinks `slot` from its queue, if it is in one (not pending).
    @inlinable
    mutating func unlink(_ slot: Int, _ entry: Meta) {
        let bucket = Int(entry.bucket)
        switch entry.queue {
        case .small:
            queues.remove(slot, from: Self.smallList)
            smallCount -= 1
            smallCost -= entry.cost
            if bucket >= 0 {
                bucketQueues.remove(slot, from: 2 * bucket)
                bucketSmallCounts[bucket] -= 1
            }
        case .main:
            queues.remove(slot, from: Self.mainList)
            mainCount -= 1
            mainCost -= entry.cost
            if bucket >= 0 {
                bucketQueues.remove(slot, from: 2 * bucket + 1)
                bucketMainCounts[bucket] -= 1
            }
        case .none, .pendingNew, .pendingSmall, .pendingMain:
            break
        }
    }

    /// Forgets every entry and the ghost queue; keeps the limits' shares.
    mutating func removeAll() {
        queues.removeAll()
        bucketQueues.removeAll()
        meta.removeAll(keepingCapacity: true)
        smallCount = 0
        smallCost = 0
        mainCount = 0
        mainCost = 0
        for bucket in bucketSmallCounts.indices {
            bucketSmallCounts[bucket] = 0
            bucketMainCounts[bucket] = 0
        }
        hasEvicted = false
        ghost = GhostQueue()
    }

    // MARK: Diagnostics

    /// The slots of a list from newest to oldest (O(n)).
    func slots(inList list: Int, bucket: Int? = nil) -> [Int] {
        let lists = bucket == nil ? queues : bucketQueues
        return lists.slots(in: bucket.map { 2 * $0 + list } ?? list)
    }

    /// The small queue, then the main queue, each from newest to oldest (O(n)).
    func slotsInOrder() -> [Int] {
        slots(inList: Self.smallList) + slots(inList: Self.mainList)
    }

    /// Descriptions of broken invariants, given the live slots and their buckets.
    func invariantViolations(live: [Int], bucketOf: (Int) -> Int?, bucketCount: Int) -> [String] {
        var problems: [String] = []
        let small = slots(inList: Self.smallList), main = slots(inList: Self.mainList)
        if Set(small + main) != Set(live) || small.count + main.count != live.count {
            problems.append("queues small \(small) + main \(main) != live slots \(live)")
        }
        if small.count != smallCount || main.count != mainCount {
            problems.append("queue counts \(smallCount)/\(mainCount) != \(small.count)/\(main.count)")
        }
        if small.reduce(0, { $0 + meta[$1].cost }) != smallCost || main.reduce(0, { $0 + meta[$1].cost }) != mainCost {
            problems.append("queue costs \(smallCost)/\(mainCost) disagree with the entries")
        }
        for slot in small where meta[slot].queue != .small { problems.append("slot \(slot) in small marked \(meta[slot].queue)") }
        for slot in main where meta[slot].queue != .main { problems.append("slot \(slot) in main marked \(meta[slot].queue)") }
        for slot in live where meta[slot].frequency > Self.maxFrequency { problems.append("slot \(slot) counter over 3") }
        for slot in live where Int(meta[slot].bucket) != (bucketOf(slot) ?? -1) {
            problems.append("slot \(slot) bucket \(meta[slot].bucket) != \(String(describing: bucketOf(slot)))")
        }
        for bucket in 0..<bucketCount {
            let bucketSmall = slots(inList: Self.smallList, bucket: bucket)
            let bucketMain = slots(inList: Self.mainList, bucket: bucket)
            if bucketSmall != small.filter({ bucketOf($0) == bucket }) || bucketMain != main.filter({ bucketOf($0) == bucket }) {
                problems.append("bucket \(bucket) queues disagree with the global queues")
            }
            if bucketSmall.count != bucketSmallCounts[bucket] || bucketMain.count != bucketMainCounts[bucket] {
                problems.append("bucket \(bucket) queue counts disagree")
            }
        }
        problems += ghost.invariantViolations(limit: Swift.max(mainCountCapacity, 0))
        return problems
    }
}
