/// A set of intrusive doubly-linked lists over integer slot indices, stored in one array.
///
/// Every slot belongs to at most one of the `listCount` lists. The links live in a contiguous
/// array indexed by slot, so moving a slot to the front is four array writes and never
/// allocates (array-index nodes are markedly faster than class nodes on Linux, where each class
/// node costs an allocation plus reference counting on every link update).
///
/// The front of a list is its most recently used slot, the back its least recently used.
///
/// - Complexity: Every operation is O(1) except growing the storage, which is amortized O(1).
struct LRUList {
    /// The links of one slot. `none` marks the end of a list.
    struct Link {
        var previous: Int
        var next: Int
    }

    /// The index that marks "no slot".
    static let none = -1

    private var links: ContiguousArray<Link> = []
    private var heads: ContiguousArray<Int>
    private var tails: ContiguousArray<Int>

    /// Creates `listCount` empty lists.
    init(listCount: Int) {
        heads = ContiguousArray(repeating: Self.none, count: listCount)
        tails = ContiguousArray(repeating: Self.none, count: listCount)
    }

    /// The most recently used slot of `list`, if any.
    func first(in list: Int) -> Int? {
        let head = heads[list]
        return head == Self.none ? nil : head
    }

    /// The least recently used slot of `list`, if any.
    func last(in list: Int) -> Int? {
        let tail = tails[list]
        return tail == Self.none ? nil : tail
    }

    /// The slot after `slot` (towards the least recently used end), if any.
    func slot(after slot: Int) -> Int? {
        let next = links[slot].next
        return next == Self.none ? nil : next
    }

    /// Inserts `slot`, which must not be in any list, at the front of `list`.
    mutating func pushFront(_ slot: Int, in list: Int) {
        if slot >= links.count {
            links.reserveCapacity(slot + 1)
            while links.count <= slot {
                links.append(Link(previous: Self.none, next: Self.none))
            }
        }
        let head = heads[list]
        links[slot] = Link(previous: Self.none, next: head)
        if head != Self.none {
            links[head].previous = slot
        } else {
            tails[list] = slot
        }
        heads[list] = slot
    }

    /// Unlinks `slot` from `list`, which must contain it.
    mutating func remove(_ slot: Int, from list: Int) {
        let link = links[slot]
        if link.previous != Self.none {
            links[link.previous].next = link.next
        } else {
            heads[list] = link.next
        }
        if link.next != Self.none {
            links[link.next].previous = link.previous
        } else {
            tails[list] = link.previous
        }
    }

    /// Moves `slot`, which `list` contains, to the front of `list`.
    @inline(__always)
    mutating func moveToFront(_ slot: Int, in list: Int) {
        guard heads[list] != slot else { return }
        remove(slot, from: list)
        pushFront(slot, in: list)
    }

    /// Empties every list, keeping the allocated storage.
    mutating func removeAll() {
        links.removeAll(keepingCapacity: true)
        for list in heads.indices {
            heads[list] = Self.none
            tails[list] = Self.none
        }
    }
}

/// The bookkeeping of the least-recently-used eviction policy.
///
/// The store splits eviction into two parts so that a second policy (S3-FIFO, issue #9) can
/// reuse the first: the *limits accounting* (``MemoryStore``'s totals and per-bucket counts)
/// decides **whether** and **in which scope** (the whole store or one size bucket) an entry must
/// go, and the *policy* answers **which** entry that is. A policy only sees slot indices and
/// bucket indices; it never sees keys, values or costs.
///
/// This LRU policy keeps one recency list over all slots plus one list per size bucket, so both
/// "least recently used overall" and "least recently used in bucket `b`" are O(1).
struct LRUPolicy {
    private var all = LRUList(listCount: 1)
    private var byBucket: LRUList

    /// Creates the bookkeeping for a store with `bucketCount` size buckets (0 for none).
    init(bucketCount: Int) {
        byBucket = LRUList(listCount: bucketCount)
    }

    /// Records a new entry in `slot`, belonging to `bucket` (or `nil`).
    @inline(__always)
    mutating func didInsert(_ slot: Int, bucket: Int?) {
        all.pushFront(slot, in: 0)
        if let bucket { byBucket.pushFront(slot, in: bucket) }
    }

    /// Records a read of, or a new value in, the entry in `slot`.
    @inline(__always)
    mutating func didAccess(_ slot: Int, bucket: Int?) {
        all.moveToFront(slot, in: 0)
        if let bucket { byBucket.moveToFront(slot, in: bucket) }
    }

    /// Records that the entry in `slot` moved from bucket `old` to bucket `new`, and was used.
    mutating func didChangeBucket(_ slot: Int, from old: Int?, to new: Int?) {
        all.moveToFront(slot, in: 0)
        if let old { byBucket.remove(slot, from: old) }
        if let new { byBucket.pushFront(slot, in: new) }
    }

    /// Records that the entry in `slot`, of `bucket`, is gone.
    @inline(__always)
    mutating func didRemove(_ slot: Int, bucket: Int?) {
        all.remove(slot, from: 0)
        if let bucket { byBucket.remove(slot, from: bucket) }
    }

    /// The entry to evict when a store-wide limit is exceeded.
    func victim() -> Int? {
        all.last(in: 0)
    }

    /// The entry to evict when `bucket` holds too many entries.
    func victim(inBucket bucket: Int) -> Int? {
        byBucket.last(in: bucket)
    }

    /// The slots from most to least recently used (for diagnostics and tests; O(n)).
    func slotsByRecency() -> [Int] {
        var result: [Int] = []
        var current = all.first(in: 0)
        while let slot = current {
            result.append(slot)
            current = all.slot(after: slot)
        }
        return result
    }

    /// The slots of `bucket` from most to least recently used (for tests; O(n)).
    func slotsByRecency(inBucket bucket: Int) -> [Int] {
        var result: [Int] = []
        var current = byBucket.first(in: bucket)
        while let slot = current {
            result.append(slot)
            current = byBucket.slot(after: slot)
        }
        return result
    }

    /// Forgets every entry.
    mutating func removeAll() {
        all.removeAll()
        byBucket.removeAll()
    }
}
