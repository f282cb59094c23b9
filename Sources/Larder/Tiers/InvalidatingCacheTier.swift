/// What an ``InvalidatingCacheTier`` tells the storages on top of it: which local copies of its
/// values are no longer the fleet's value.
public enum TierInvalidation: Sendable, Hashable {
    /// These cache keys were set, overwritten, removed or invalidated by some client (this
    /// process included): drop their local copies.
    case keys([String])
    /// The tier can no longer vouch for any local copy of its values (its invalidation stream
    /// was lost, restarted, or the server was flushed): drop them all.
    case all
}

/// A ``SharedCacheTier`` that pushes invalidations, so a ``Storage``'s local copies of its values
/// are dropped when any client changes them (Redis `CLIENT TRACKING`).
///
/// ``Storage`` registers one listener per tier when it first reaches the tier and, from then on,
/// before each read or write of a key through the tier, tells the tier the key may get a local
/// copy (``trackLocalCopy(forKey:)``). On ``TierInvalidation/keys(_:)`` it drops the memory (and
/// local byte-tier) copies of those keys and skips any promotion of them that was in flight; on
/// ``TierInvalidation/all`` it does so for every key it registered.
///
/// Implementations must call listeners quickly and from any thread, never while holding a lock
/// a listener could need, and must report ``TierInvalidation/all`` whenever their stream of
/// invalidations had a gap (a lost connection), including once more when the stream resumes:
/// a read that started during the gap may otherwise keep a value changed during it.
/// While they cannot deliver invalidations, ``SharedCacheTier/localCopyMaxAge`` should return
/// `.zero` so that no unguarded copy is made.
public protocol InvalidatingCacheTier: SharedCacheTier {
    /// Adds a listener that receives every invalidation from now on.
    func addInvalidationListener(_ listener: @escaping @Sendable (TierInvalidation) -> Void)
    /// Called by ``Storage`` before a read or write of `key` that may leave a local copy, so the
    /// tier reports `key` in later invalidations.
    func trackLocalCopy(forKey key: String)
}
