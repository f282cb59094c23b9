import Synchronization

/// The counters a ``Storage`` keeps for one byte tier.
final class TierCounters: Sendable {
    let hits = Atomic<Int>(0)
    let misses = Atomic<Int>(0)
    let promotions = Atomic<Int>(0)
    let errors = Atomic<Int>(0)
}
