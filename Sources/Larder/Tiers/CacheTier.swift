public import Foundation

/// A tier of bytes behind a ``Storage``'s memory: a disk store, a shared remote cache.
///
/// A ``Storage`` keeps decoded values in its ``MemoryStore`` and hands the ``Transformer``'s
/// bytes to an ordered list of byte tiers, fastest first. Every tier speaks this protocol, so
/// the rules that compose them (read order, promotion, write and removal order) are written
/// once, in `Storage`, and a new tier joins without changing any of them.
///
/// Implementations must be thread-safe: every method may be called from any thread or task at
/// once. They must also keep these promises, which `Storage`'s guarantees rest on:
/// - A read returns exactly the bytes, expiry and metadata of the last completed write of the
///   key, or `nil`; never another key's bytes, never damaged bytes, never an expired entry.
/// - A write that throws leaves the previous value for the key in place or removes it; it never
///   leaves a mix of the two.
/// - `removeValue(forKey:)` that returned means no later read returns the removed value.
/// - Errors thrown are ``StorageError``s.
///
/// Tiers whose every operation is local and bounded (a disk) also conform to
/// ``LocalCacheTier``, which lets `Storage`'s synchronous API reach them. Tiers that need the
/// network conform only to `CacheTier`: `Storage` reaches them from `async` calls only.
///
/// ```swift
/// let disk = try DiskStore(directory: cacheURL)
/// let storage = try Storage<String, Data>(tiers: [disk], transformer: .data)
/// ```
public protocol CacheTier: AnyObject, Sendable {
    /// The tier's identity, used to name it in ``StorageTiers`` and in statistics.
    var tierID: StorageTier { get }

    /// The bytes stored for `key` with their expiration and metadata, or `nil` on a miss.
    func entry(forKey key: String) async throws -> TierEntry?

    /// Stores `data` for `key`, replacing any previous value.
    ///
    /// - Parameters:
    ///   - expiry: When the entry expires; `nil` takes the tier's default.
    ///   - metadata: Small caller bytes kept beside the value.
    ///   - isCompressible: Whether compression may help (a hint).
    func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) async throws

    /// Stores each of `writes` as ``setValue(_:forKey:expiry:metadata:isCompressible:)`` would;
    /// a key written twice keeps its last write. A tier that can write many keys at once (the
    /// disk tier in one transaction, a remote cache in one pipeline per server) implements it
    /// so; the default writes them one after another.
    ///
    /// A write that throws may leave some of the keys written, each whole, and the others with
    /// their previous values or removed; never a mix of two values for one key.
    func setValues(_ writes: [TierWrite]) async throws

    /// Removes the value for `key`; returns whether one was there.
    @discardableResult
    func removeValue(forKey key: String) async throws -> Bool

    /// Whether a live value is stored for `key`, without reading it or counting an access.
    func containsValue(forKey key: String) async throws -> Bool

    /// Every live key that starts with `prefix`.
    func keys(withPrefix prefix: String) async throws -> [String]

    /// Removes every value.
    func removeAll() async throws

    /// Removes expired values; returns how many.
    @discardableResult
    func removeExpired() async throws -> Int

    /// Counters and totals of the tier.
    var tierStatistics: TierStatistics { get }

    /// Stores `data` for `key` only when the tier holds no live value for it, and returns
    /// whether it did. A tier that can decide and write in one step (as the disk tier does, in
    /// one transaction) implements it so; the default checks, then writes, and is atomic only
    /// as far as `Storage`'s per-key turns make it.
    func insertValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) async throws -> Bool

    /// Removes the value for `key` and returns it (`nil` when there was no live value). The
    /// default reads, then removes.
    func takeEntry(forKey key: String) async throws -> TierEntry?

    /// Changes when the live value for `key` expires without rewriting it, and returns whether
    /// there was one. The default reads, then writes the same bytes with the new expiry.
    @discardableResult
    func setExpiry(_ expiry: Expiry, forKey key: String) async throws -> Bool

    /// Releases the tier's resources; later calls throw ``StorageError/Code/closed``.
    func close() async
}
