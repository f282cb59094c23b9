/// The bookkeeping of the W-TinyLFU eviction policy (``EvictionPolicy/wTinyLFU``).
///
/// Like the other policies it only answers *which* slot to evict; the store's limits accounting
/// says whether and in which scope. Three LRU lists (front = most recent): the **window**, that
/// every new entry enters, and the two segments of the **main** cache, **probation** and
/// **protected** (segmented LRU). With size buckets, each bucket also keeps its copy of the
/// three lists, always the global list filtered to the bucket (lists are only pushed to the
/// front or unlinked, so the projection stays ordered). A ``FrequencySketch`` estimates how
/// often each key was used.
///
/// Shares of each limit: the window 1% (of a count limit at least one entry), main the rest;
/// within main, probation ⌊20%⌋ and protected the rest. The rules follow libCacheSim's
/// `WTinyLFU.c` (with `main-cache=SLRU, window-size=0.01`), so that the two agree closely:
/// - A new entry enters the window (after its own write's evictions; it is *pending* until
///   ``didFinishWrite(_:)``) and is counted in the sketch.
/// - A hit in the window moves the entry to the window's front. A hit in main counts in the
///   sketch (and towards its aging period); in probation it moves the entry to the front of
///   protected, and protected's oldest entries go back to probation's front while protected is
///   over its share; in protected it moves the entry to the front.
/// - To pick a victim: while the window's oldest entry (the *candidate*) fits in main's share,
///   it moves there (to probation, or to protected when probation is full), counted in the
///   sketch. Otherwise it competes with main's victim (probation's oldest entry, or
///   protected's when probation is empty): if the candidate's estimate is strictly higher it is
///   admitted (main's victim is evicted and the candidate moves to main), otherwise the
///   candidate is the victim. The candidate is counted in the sketch either way. If the window
///   is empty, or main is over its share (after a limit was lowered), main's victim goes.
/// - A bucket's overflow runs the same procedure on the bucket's own lists, with the bucket's
///   `countLimit` split 1/99 the same way.
///
/// - Complexity: A hit is O(1) and never allocates (amortized: the sketch halves its counters
///   once every 16 × capacity uses of main). Picking a victim is amortized O(1): every entry
///   moves from the window to main at most once per insertion.
@usableFromInline
struct WTinyLFUPolicy: MemoryPolicy {
    /// The list a slot is in.
    @usableFromInline
    enum Segment: UInt8 {
        case none, window, probation, protected
        /// Being written: placed when the write is done (``didFinishWrite(_:)``).
        case pendingNew, pendingWindow, pendingMain
    }

    @usableFromInline
    struct Meta {
        @usableFromInline var keyHash: Int
        @usableFromInline var cost: Int
        @usableFromInline var bucket: Int32

        @inlinable
        init(keyHash: Int, cost: Int, bucket: Int32) {
            self.keyHash = keyHash
            self.cost = cost
            self.bucket = bucket
        }
    }

    @inlinable static var windowList: Int { 0 }
    @inlinable static var probationList: Int { 1 }
    @inlinable static var protectedList: Int { 2 }
    /// The sketch starts at most this large and doubles as a store fills.
    static let initialSketchCapacity = 1_024

    @usableFromInline var lists = LRUList(listCount: 3)
    @usableFromInline var bucketLists: LRUList
    @usableFromInline var meta: ContiguousArray<Meta> = []
    /// Each slot's list, apart from ``meta`` so that a hit reads one byte of a small array.
    @usableFromInline var segments: ContiguousArray<Segment> = []
    /// Each slot's cost (as in ``meta``), 8 bytes a slot, so that a hit that demotes
    /// protected's oldest entry reads its cost from a small array rather than from ``meta``
    /// (24 bytes a slot: about 0.8 of a last-level miss per scattered hit in callgrind's cache
    /// simulation). Kept apart from the list nodes, which it would make twice as large for
    /// every hit (measured: Zipf hits, mostly in protected, slowed by it).
    @usableFromInline var slotCosts: ContiguousArray<Int> = []
    /// Entries and costs per list (window, probation, protected).
    @usableFromInline var counts = (0, 0, 0)
    @usableFromInline var costs = (0, 0, 0)
    /// Entries per bucket and list: `3 × bucket + list`.
    @usableFromInline var bucketCounts: [Int]

    @usableFromInline var mainCountCapacity = 0
    @usableFromInline var mainCostCapacity = 0
    @usableFromInline var probationCountCapacity = 0
    @usableFromInline var probationCostCapacity = 0
    @usableFromInline var protectedCountCapacity = 0
    @usableFromInline var protectedCostCapacity = 0
    @usableFromInline let bucketMainCapacities: [Int]
    /// Whether the store has size buckets (else no entry has one, and a hit never reads
    /// ``meta`` for a bucket).
    @usableFromInline let hasBuckets: Bool

    @usableFromInline var sketch: FrequencySketch
    /// A window entry that won its contest: it moves to main once main's victim is gone.
    @usableFromInline var admitting = -1

    /// Creates the bookkeeping for the given limits (`bucketCountLimits` empty for no buckets).
    init(countLimit: Int, costLimit: Int, bucketCountLimits: [Int]) {
        bucketMainCapacities = bucketCountLimits.map { $0 - Self.windowCountShare($0) }
        hasBuckets = !bucketCountLimits.isEmpty
        bucketCounts = Array(repeating: 0, count: 3 * bucketCountLimits.count)
        bucketLists = LRUList(listCount: 3 * bucketCountLimits.count)
        sketch = FrequencySketch(capacity: 0)
        resize(countLimit: countLimit, costLimit: costLimit)
        sketch.resize(capacity: Swift.min(mainCountCapacity, Self.initialSketchCapacity))
    }

    /// The window's share of a count limit: 1%, at least one entry.
    static func windowCountShare(_ limit: Int) -> Int { limit <= 0 ? 0 : Swift.max(1, limit / 100) }
    /// The window's share of a cost limit: 1%.
    static func windowCostShare(_ limit: Int) -> Int { limit / 100 }
    /// Probation's share of main: 20%, rounded down (libCacheSim's SLRU with `seg-size=1:4`).
    static func probationShare(_ main: Int) -> Int { main / 5 }

    /// Sizes the lists for new store-wide limits: protected's excess falls back to probation;
    /// the window and main are rebalanced by the next victims.
    mutating func resize(countLimit: Int, costLimit: Int) {
        mainCountCapacity = countLimit - Self.windowCountShare(countLimit)
        mainCostCapacity = costLimit - Self.windowCostShare(costLimit)
        probationCountCapacity = Self.probationShare(mainCountCapacity)
        probationCostCapacity = Self.probationShare(mainCostCapacity)
        protectedCountCapacity = mainCountCapacity - probationCountCapacity
        protectedCostCapacity = mainCostCapacity - probationCostCapacity
        if mainCountCapacity < sketch.capacity { sketch.resize(capacity: mainCountCapacity) }
        demoteWhileProtectedIsOver()
    }

    @inlinable var mainCount: Int { counts.1 + counts.2 }
    @inlinable var mainCost: Int { costs.1 + costs.2 }
    @inlinable var liveCount: Int { counts.0 + counts.1 + counts.2 }

    // MARK: Recording changes

    /// Records a new entry in `slot`; it joins the window in ``didFinishWrite(_:)``.
    @inlinable
    mutating func didInsert(_ slot: Int, bucket: Int?, cost: Int, keyHash: Int) {
        let entry = Meta(keyHash: keyHash, cost: cost, bucket: Int32(bucket ?? -1))
        if slot < meta.count {
            meta[slot] = entry
            slotCosts[slot] = cost
            segments[slot] = .pendingNew
        } else {
            while meta.count < slot {
                meta.append(Meta(keyHash: 0, cost: 0, bucket: -1))
                slotCosts.append(0)
                segments.append(.none)
            }
            meta.append(entry)
            slotCosts.append(cost)
            segments.append(.pendingNew)
        }
    }

    /// Records a new value in `slot`: a use (as a hit), and the entry leaves its list until
    /// ``didFinishWrite(_:)`` puts it back, so this write cannot evict it.
    @inlinable
    mutating func didUpdate(_ slot: Int, from oldBucket: Int?, to bucket: Int?, cost: Int) {
        let old = segments[slot]
        unlink(slot)
        switch old {
        case .window, .pendingWindow: segments[slot] = .pendingWindow
        case .probation, .protected, .pendingMain: segments[slot] = .pendingMain
        case .none, .pendingNew: segments[slot] = .pendingNew
        }
        meta[slot].cost = cost
        slotCosts[slot] = cost
        meta[slot].bucket = Int32(bucket ?? -1)
    }

    /// Places the entry written in `slot`, once the write's evictions are done.
    @inlinable
    mutating func didFinishWrite(_ slot: Int) {
        switch segments[slot] {
        case .pendingNew:
            link(slot, in: Self.windowList)
            sketch.grow(toFit: liveCount, limit: mainCountCapacity)
            sketch.increment(meta[slot].keyHash)
        case .pendingWindow:
            link(slot, in: Self.windowList)
        case .pendingMain:
            // An overwrite of a main entry is a hit: to protected, counted.
            link(slot, in: Self.protectedList)
            demoteWhileProtectedIsOver()
            sketch.increment(meta[slot].keyHash)
            sketch.recordUse()
        case .none, .window, .probation, .protected:
            break
        }
    }

    /// Records a read of the entry in `slot`.
    @inlinable
    mutating func didAccess(_ slot: Int, bucket: Int?) {
        didAccess(slot, bucket: bucket, keyHash: meta[slot].keyHash, cost: meta[slot].cost)
    }

    /// Records a read of the entry in `slot`, whose key's hash and cost the caller has at hand
    /// (so the hit reads nothing of ``meta``: at 10,000 entries and more, every array a hit
    /// touches is a likely cache miss).
    @inlinable @inline(__always)
    mutating func didAccess(_ slot: Int, bucket: Int?, keyHash: Int, cost: Int) {
        let segment = segments.withUnsafeBufferPointer { $0[slot] }
        switch segment {
        case .window:
            lists.moveToFront(slot, in: Self.windowList)
            if let bucket { moveInBucket(slot, bucket: bucket, from: Self.windowList, toFrontOf: Self.windowList) }
            return
        case .protected, .probation:
            // The sketch first: its block depends only on the key's hash, so its likely cache
            // miss overlaps the list updates' own (the order changes no decision: the lists
            // never read the sketch, nor the sketch the lists).
            sketch.increment(keyHash)
            sketch.recordUse()
        case .none, .pendingNew, .pendingWindow, .pendingMain:
            return
        }
        if segment == .protected {
            lists.moveToFront(slot, in: Self.protectedList)
            if let bucket { moveInBucket(slot, bucket: bucket, from: Self.protectedList, toFrontOf: Self.protectedList) }
            return
        }
        // Probation: to protected's front; protected's oldest entries go back to probation's
        // front while protected is over its share. The first demotion (the usual one: a full
        // protected is one over after the move) is fused with the promotion: one pass over the
        // links and one write of both segments, so a probation hit checks each array's
        // uniqueness once; further ones (after a limit was lowered, or a costly entry came in)
        // are ``demoteWhileProtectedIsOver()``'s.
        counts.1 &-= 1
        costs.1 &-= cost
        counts.2 &+= 1
        costs.2 &+= cost
        let demotes = counts.2 > protectedCountCapacity || costs.2 > protectedCostCapacity
        let demoted = lists.promote(
            slot, from: Self.probationList, toFrontOf: Self.protectedList, demotingLast: demotes)
        if demoted < 0 {
            segments.withUnsafeMutableBufferPointer { $0[slot] = .protected }
            if let bucket { moveInBucket(slot, bucket: bucket, from: Self.probationList, toFrontOf: Self.protectedList) }
            return
        }
        segments.withUnsafeMutableBufferPointer { segments in
            segments[slot] = .protected
            segments[demoted] = .probation
        }
        let demotedCost = slotCosts.withUnsafeBufferPointer { $0[demoted] }
        counts.2 &-= 1
        costs.2 &-= demotedCost
        counts.1 &+= 1
        costs.1 &+= demotedCost
        if hasBuckets {
            if let bucket { moveInBucket(slot, bucket: bucket, from: Self.probationList, toFrontOf: Self.protectedList) }
            let demotedBucket = meta.withUnsafeBufferPointer { $0[demoted].bucket }
            if demotedBucket >= 0 {
                moveInBucket(demoted, bucket: Int(demotedBucket), from: Self.protectedList, toFrontOf: Self.probationList)
            }
        }
        demoteWhileProtectedIsOver()
    }

    /// Records that the entry in `slot` is gone. When it was main's victim of a contest the
    /// window's candidate won, the candidate now moves to main.
    @inlinable
    mutating func didRemove(_ slot: Int, bucket: Int?, isEviction: Bool) {
        unlink(slot)
        segments[slot] = .none
        if admitting >= 0 {
            let candidate = admitting
            admitting = -1
            if candidate != slot, segments[candidate] == .window { moveToMain(candidate) }
        }
    }

    // MARK: Choosing victims

    /// The entry to evict for a store-wide limit, after the moves from the window to main
    /// that finding it takes.
    @inlinable
    mutating func victim() -> Int? {
        while true {
            if mainCount > mainCountCapacity || mainCost > mainCostCapacity { return mainVictim() }
            guard let candidate = lists.last(in: Self.windowList) else { return mainVictim() }
            let cost = meta[candidate].cost
            if mainCount < mainCountCapacity, cost <= mainCostCapacity - mainCost {
                moveToMain(candidate)
                sketch.increment(meta[candidate].keyHash)
                continue
            }
            return contest(candidate, mainVictim())
        }
    }

    /// The entry to evict when `bucket` holds too many entries.
    @inlinable
    mutating func victim(inBucket bucket: Int) -> Int? {
        let base = 3 * bucket
        while true {
            let main = bucketCounts[base + Self.probationList] + bucketCounts[base + Self.protectedList]
            if main > bucketMainCapacities[bucket] { return mainVictim(inBucket: bucket) }
            guard let candidate = bucketLists.last(in: base + Self.windowList) else { return mainVictim(inBucket: bucket) }
            if main < bucketMainCapacities[bucket] {
                moveToMain(candidate)
                sketch.increment(meta[candidate].keyHash)
                continue
            }
            return contest(candidate, mainVictim(inBucket: bucket))
        }
    }

    /// TinyLFU's admission: the window's candidate against main's victim. Returns the loser;
    /// a winning candidate moves to main when the loser is removed (``didRemove(_:bucket:isEviction:)``).
    @inlinable
    mutating func contest(_ candidate: Int, _ mainVictim: Int?) -> Int {
        let candidateHash = meta[candidate].keyHash
        defer { sketch.increment(candidateHash) }
        guard let mainVictim else { return candidate }
        if sketch.estimate(candidateHash) > sketch.estimate(meta[mainVictim].keyHash) {
            admitting = candidate
            return mainVictim
        }
        return candidate
    }

    /// Probation's oldest entry, or protected's when probation is empty.
    @inlinable
    func mainVictim() -> Int? {
        lists.last(in: Self.probationList) ?? lists.last(in: Self.protectedList)
    }

    @inlinable
    func mainVictim(inBucket bucket: Int) -> Int? {
        bucketLists.last(in: 3 * bucket + Self.probationList) ?? bucketLists.last(in: 3 * bucket + Self.protectedList)
    }

    /// Moves a window entry to main: to probation if it has room, else to protected if that
    /// has room, else to probation (libCacheSim's SLRU insert: the lowest segment with room).
    @inlinable
    mutating func moveToMain(_ slot: Int) {
        unlink(slot)
        let cost = meta[slot].cost
        let probationHasRoom = counts.1 < probationCountCapacity && cost <= probationCostCapacity - costs.1
        let protectedHasRoom = counts.2 < protectedCountCapacity && cost <= protectedCostCapacity - costs.2
        link(slot, in: !probationHasRoom && protectedHasRoom ? Self.protectedList : Self.probationList)
    }

    /// Moves protected's oldest entries to probation's front while protected is over its share.
    @inlinable @inline(__always)
    mutating func demoteWhileProtectedIsOver() {
        // ``unlink(_:)`` then ``link(_:in:)`` in one step: one read of the entry's meta, one
        // list pass (this runs on every hit in probation once protected is full).
        while counts.2 > protectedCountCapacity || costs.2 > protectedCostCapacity,
              let oldest = lists.last(in: Self.protectedList) {
            let cost = slotCosts.withUnsafeBufferPointer { $0[oldest] }
            lists.move(oldest, from: Self.protectedList, toFrontOf: Self.probationList)
            segments.withUnsafeMutableBufferPointer { $0[oldest] = .probation }
            counts.2 &-= 1
            costs.2 &-= cost
            counts.1 &+= 1
            costs.1 &+= cost
            if hasBuckets {
                let bucket = meta.withUnsafeBufferPointer { $0[oldest].bucket }
                if bucket >= 0 {
                    moveInBucket(oldest, bucket: Int(bucket), from: Self.protectedList, toFrontOf: Self.probationList)
                }
            }
        }
    }

    // MARK: List primitives

    /// Moves `slot` from `list` to the front of `target` (may be `list`) in its bucket's copy
    /// of the lists, with the bucket's counts.
    ///
    /// Out of line, so that a hit in a store without buckets never touches ``bucketLists`` or
    /// ``bucketCounts``: inlined into the hit, the optimizer hoisted the arrays' uniqueness
    /// checks out of their `if`s, and the empty arrays of such a store are never unique (they
    /// are the runtime's shared empty storage), so every hit paid a runtime call and a "copy"
    /// of nothing (about 70 instructions, found with callgrind).
    @usableFromInline @inline(never)
    mutating func moveInBucket(_ slot: Int, bucket: Int, from list: Int, toFrontOf target: Int) {
        let base = 3 &* bucket
        if list == target {
            bucketLists.moveToFront(slot, in: base &+ list)
            return
        }
        bucketLists.move(slot, from: base &+ list, toFrontOf: base &+ target)
        bucketCounts[base &+ list] -= 1
        bucketCounts[base &+ target] += 1
    }

    /// Pushes `slot` to the front of `list` (and of its bucket's copy).
    @inlinable
    mutating func link(_ slot: Int, in list: Int) {
        let entry = meta[slot]
        segments[slot] = list == Self.windowList ? .window : list == Self.probationList ? .probation : .protected
        lists.pushFront(slot, in: list)
        switch list {
        case Self.windowList: counts.0 += 1; costs.0 += entry.cost
        case Self.probationList: counts.1 += 1; costs.1 += entry.cost
        default: counts.2 += 1; costs.2 += entry.cost
        }
        if entry.bucket >= 0 {
            let bucketList = 3 * Int(entry.bucket) + list
            bucketLists.pushFront(slot, in: bucketList)
            bucketCounts[bucketList] += 1
        }
    }

    /// Unlinks `slot` from its list, if it is in one (not pending).
    @inlinable
    mutating func unlink(_ slot: Int) {
        let entry = meta[slot]
        let list: Int
        switch segments[slot] {
        case .window: list = Self.windowList; counts.0 -= 1; costs.0 -= entry.cost
        case .probation: list = Self.probationList; counts.1 -= 1; costs.1 -= entry.cost
        case .protected: list = Self.protectedList; counts.2 -= 1; costs.2 -= entry.cost
        case .none, .pendingNew, .pendingWindow, .pendingMain: return
        }
        lists.remove(slot, from: list)
        if entry.bucket >= 0 {
            let bucketList = 3 * Int(entry.bucket) + list
            bucketLists.remove(slot, from: bucketList)
            bucketCounts[bucketList] -= 1
        }
    }

    /// Forgets every entry and every count; keeps the limits' shares and the sketch's size.
    mutating func removeAll() {
        lists.removeAll()
        bucketLists.removeAll()
        meta.removeAll(keepingCapacity: true)
        slotCosts.removeAll(keepingCapacity: true)
        segments.removeAll(keepingCapacity: true)
        counts = (0, 0, 0)
        costs = (0, 0, 0)
        for index in bucketCounts.indices { bucketCounts[index] = 0 }
        admitting = -1
        sketch.clear()
    }

    // MARK: Diagnostics

    /// The slots of a list from newest to oldest, store-wide or of one bucket (O(n)).
    func slots(inList list: Int, bucket: Int? = nil) -> [Int] {
        bucket.map { bucketLists.slots(in: 3 * $0 + list) } ?? lists.slots(in: list)
    }

    /// The window, then probation, then protected, each from newest to oldest (O(n)).
    func slotsInOrder() -> [Int] {
        slots(inList: Self.windowList) + slots(inList: Self.probationList) + slots(inList: Self.protectedList)
    }

    /// Descriptions of broken invariants, given the live slots and their buckets.
    func invariantViolations(live: [Int], bucketOf: (Int) -> Int?, bucketCount: Int) -> [String] {
        var problems: [String] = []
        let all = [Self.windowList, Self.probationList, Self.protectedList].map { slots(inList: $0) }
        let marks: [Segment] = [.window, .probation, .protected]
        if Set(all.joined()) != Set(live) || all.joined().count != live.count {
            problems.append("lists \(all) != live slots \(live)")
        }
        if [counts.0, counts.1, counts.2] != all.map(\.count) {
            problems.append("list counts \(counts) != \(all.map(\.count))")
        }
        if [costs.0, costs.1, costs.2] != all.map({ $0.reduce(0) { $0 + meta[$1].cost } }) {
            problems.append("list costs \(costs) disagree with the entries")
        }
        for slot in all.joined() where slotCosts[slot] != meta[slot].cost {
            problems.append("slot \(slot) cost \(slotCosts[slot]) != its cost \(meta[slot].cost)")
        }
        for (list, slots) in all.enumerated() {
            for slot in slots where segments[slot] != marks[list] {
                problems.append("slot \(slot) in list \(list) marked \(segments[slot])")
            }
        }
        for slot in live where Int(meta[slot].bucket) != (bucketOf(slot) ?? -1) {
            problems.append("slot \(slot) bucket \(meta[slot].bucket) != \(String(describing: bucketOf(slot)))")
        }
        for bucket in 0..<bucketCount {
            for list in 0..<3 {
                let own = slots(inList: list, bucket: bucket)
                if own != all[list].filter({ bucketOf($0) == bucket }) {
                    problems.append("bucket \(bucket) list \(list) disagrees with the global list")
                }
                if own.count != bucketCounts[3 * bucket + list] { problems.append("bucket \(bucket) list \(list) count disagrees") }
            }
        }
        if admitting >= 0 { problems.append("candidate \(admitting) left waiting for admission") }
        if sketch.uses >= sketch.samplePeriod { problems.append("sketch not halved after \(sketch.uses) uses") }
        return problems
    }
}
