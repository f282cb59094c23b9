public import Synchronization

/// Lock-free counters of a ``Storage``; relaxed ordering is enough for statistics.
@usableFromInline
final class Counters: Sendable {
    // The memory tier's hits and misses, and the writes of a storage without byte tiers, are
    // counted under the memory store's lock (`MemoryStore.ownerCounts`), which they take anyway.
    let memoryPromotions = Atomic<Int>(0)
    let misses = Atomic<Int>(0)
    @usableFromInline let writes = Atomic<Int>(0)
    let decodingFailures = Atomic<Int>(0)
    let loads = Atomic<Int>(0)
    let loadStoreFailures = Atomic<Int>(0)
    let staleServed = Atomic<Int>(0)
    let softTimeouts = Atomic<Int>(0)
    let hardTimeouts = Atomic<Int>(0)
    let loadFailures = Atomic<Int>(0)
    let refreshesStarted = Atomic<Int>(0)
    let refreshFailures = Atomic<Int>(0)
    let tagRemovals = Atomic<Int>(0)
    let removedByTag = Atomic<Int>(0)
    /// One set per byte tier, in the storage's order.
    private let byteTiers: [(id: StorageTier, counters: TierCounters)]

    init(tiers: [StorageTier]) {
        byteTiers = tiers.map { ($0, TierCounters()) }
    }

    /// The counters of byte tier `id` (a linear search: a storage has a handful of tiers).
    func tier(_ id: StorageTier) -> TierCounters {
        for entry in byteTiers where entry.id == id { return entry.counters }
        preconditionFailure("Storage: no counters for tier \(id)")
    }
}
