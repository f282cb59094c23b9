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

    /// Releases the tier's resources; later calls throw ``StorageError/Code/closed``.
    func close() async
}

/// A ``CacheTier`` whose operations are local and bounded, reachable from synchronous code.
///
/// ``Storage``'s synchronous API walks only local tiers; its `async` API runs their work on
/// Larder's I/O queue, never on the caller's executor.
public protocol LocalCacheTier: CacheTier {
    /// The bytes stored for `key`; see ``CacheTier/entry(forKey:)``.
    func entry(forKey key: String) throws -> TierEntry?
    /// Stores `data` for `key`; see ``CacheTier/setValue(_:forKey:expiry:metadata:isCompressible:)``.
    func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) throws
    /// Removes the value for `key`; see ``CacheTier/removeValue(forKey:)``.
    @discardableResult
    func removeValue(forKey key: String) throws -> Bool
    /// Whether a live value is stored for `key`; see ``CacheTier/containsValue(forKey:)``.
    func containsValue(forKey key: String) throws -> Bool
    /// Every live key that starts with `prefix`.
    func keys(withPrefix prefix: String) throws -> [String]
    /// Removes every value.
    func removeAll() throws
    /// Removes expired values; returns how many.
    @discardableResult
    func removeExpired() throws -> Int
    /// Releases the tier's resources.
    func close()
}

/// A value as a byte tier holds it: the bytes, when they expire, and the caller's metadata.
public struct TierEntry: Sendable, Hashable {
    /// The stored bytes, as the transformer produced them.
    public var data: Data
    /// When the entry expires, or `nil` if it never does.
    public var expirationDate: Date?
    /// The caller's metadata bytes, if any were written with the value.
    public var metadata: Data?

    /// Creates an entry.
    public init(data: Data, expirationDate: Date? = nil, metadata: Data? = nil) {
        self.data = data
        self.expirationDate = expirationDate
        self.metadata = metadata
    }
}

/// Counters and totals of one tier, in the same vocabulary for every tier: what a byte tier
/// reports, and what ``StorageStatistics`` reports per tier (memory included).
public struct TierStatistics: Sendable, Hashable {
    /// Reads that returned a value.
    public var hits = 0
    /// Reads that found nothing, an expired entry or a damaged one.
    public var misses = 0
    /// Completed writes.
    public var writes = 0
    /// Values copied into this tier from a slower one by a ``Storage`` read.
    public var promotions = 0
    /// Entries removed by the tier's limits.
    public var evictions = 0
    /// Expired entries removed.
    public var expirations = 0
    /// Entries dropped because their bytes were damaged or missing.
    public var corruptEntriesDropped = 0
    /// Operations that failed (I/O, network).
    public var errors = 0
    /// Entries in the tier now.
    public var totalCount = 0
    /// Stored bytes in the tier now (the total cost, for memory).
    public var totalSize = 0

    /// Creates statistics with every counter at zero.
    public init() {}
}
