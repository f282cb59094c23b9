/// What an eviction policy of ``MemoryStore`` implements: the order in which entries go.
///
/// The store splits eviction in two. Its *limits accounting* (totals, per-bucket counts, the
/// overflow targets, expired entries first) decides **whether** entries must go and **in which
/// scope** (the whole store or one size bucket); the *policy* answers **which** entry that is.
/// A policy only sees slot indices, size-bucket indices, costs and key hashes; it never sees
/// keys or values, so every limit means the same under every policy.
///
/// The store calls, for each write: ``didInsert(_:bucket:cost:keyHash:)`` (new key) or
/// ``didUpdate(_:from:to:cost:)`` (existing key), then its eviction loops (``victim()``,
/// ``victim(inBucket:)``, ``didRemove(_:bucket:isEviction:)``), then ``didFinishWrite(_:)``.
///
/// To add a policy: one file with a type conforming to this protocol (its ordering and its
/// invariant checks), plus a case in ``EvictionPolicy`` and in ``PolicyBookkeeping``.
protocol MemoryPolicy {
    /// Records a new entry in `slot`, of size bucket `bucket` (`nil`: the store has none).
    mutating func didInsert(_ slot: Int, bucket: Int?, cost: Int, keyHash: Int)
    /// Records a new value, cost or bucket for the entry in `slot`; counts as a use.
    mutating func didUpdate(_ slot: Int, from oldBucket: Int?, to newBucket: Int?, cost: Int)
    /// Records a read of the entry in `slot`.
    mutating func didAccess(_ slot: Int, bucket: Int?)
    /// Records that the entry in `slot` is gone. `isEviction`: the policy chose it to meet a
    /// limit (not a removal, replacement, refusal or expiry).
    mutating func didRemove(_ slot: Int, bucket: Int?, isEviction: Bool)
    /// Called once the write to `slot` and its evictions are done.
    mutating func didFinishWrite(_ slot: Int)
    /// The entry to evict when a store-wide limit is exceeded.
    mutating func victim() -> Int?
    /// The entry to evict when `bucket` holds too many entries.
    mutating func victim(inBucket bucket: Int) -> Int?
    /// Forgets every entry.
    mutating func removeAll()
    /// Every slot, in the order ``MemoryStore/keys()`` reports (O(n)).
    func slotsInOrder() -> [Int]
    /// Descriptions of broken invariants of the policy's structures, given the live slots and
    /// their buckets (O(n); for tests).
    func invariantViolations(live: [Int], bucketOf: (Int) -> Int?, bucketCount: Int) -> [String]
}
