import Synchronization

/// The keys of a ``Storage`` whose local copies an ``InvalidatingCacheTier`` guards: a cache key
/// → key table filled before each read or write through such a tier, and emptied, key by key or
/// all at once, by the tier's invalidations.
///
/// - Invariant: every key that may hold a local copy of a guarded tier's value is in `keys`
///   from before the read or write that could make the copy until an invalidation names it.
final class LocalCopyGuard<Key: CacheKey>: Sendable {
    private struct State {
        var keys: [String: Key] = [:]
        var isListening = false
    }
    private let state = Mutex(State())
    let tiers: [any InvalidatingCacheTier]

    init(tiers: [any InvalidatingCacheTier]) {
        self.tiers = tiers
    }

    /// Registers `key` with the storage and then with every guarded tier. The first call runs
    /// `install` (which adds the storage's listeners to the tiers) before any key reaches a
    /// tier, and every other call waits for it: no invalidation of a registered key is missed.
    func register(_ key: Key, installingListeners install: () -> Void) {
        let cacheKey = key.cacheKey
        state.withLock { state in
            if !state.isListening {
                state.isListening = true
                install()
            }
            state.keys[cacheKey] = key
        }
        for tier in tiers { tier.trackLocalCopy(forKey: cacheKey) }
    }

    /// Takes the registered keys named by `invalidation` out of the table.
    func take(_ invalidation: TierInvalidation) -> [Key] {
        state.withLock { state in
            switch invalidation {
            case .all:
                let keys = Array(state.keys.values)
                state.keys.removeAll()
                return keys
            case .keys(let cacheKeys):
                return cacheKeys.compactMap { state.keys.removeValue(forKey: $0) }
            }
        }
    }

    /// How many keys are registered (for tests).
    var count: Int { state.withLock { $0.keys.count } }
}
