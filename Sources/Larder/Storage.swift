import Foundation
public import Synchronization

/// The two-tier cache: a ``MemoryStore`` in front of an optional ``DiskStore``.
///
/// Reads look in memory, then on disk; a disk hit is decoded once and promoted into memory with
/// the entry's remaining lifetime. Writes and removals reach every tier the call names
/// (``StorageTiers``, "contains" semantics; the configuration's ``Configuration/defaultTiers``
/// otherwise). Memory holds decoded values; only the disk sees bytes from the ``Transformer``.
///
/// ```swift
/// let storage = try Storage<URL, Data>(
///     configuration: .init(directory: cachesURL.appendingPathComponent("thumbnails")),
///     transformer: .data)
/// try storage.setValue(bytes, forKey: url, expiry: .seconds(3_600))
/// let cached = try storage.value(forKey: url)        // memory hit
/// let entry = try storage.entry(forKey: url)         // value, tier and expiration
/// try storage.removeValue(forKey: url, tiers: .all)
/// ```
///
/// Read-your-writes: a read that starts after a write returned sees that write, from any
/// thread. Writes to one key are serialized, and a promotion never puts an older value over a
/// newer write or a removal.
///
/// - Important: Calls that reach the disk tier do file and SQLite I/O on the calling thread;
///   use the `async` forms from Swift concurrency, which run that work off the caller's executor.
public final class Storage<Key: CacheKey, Value>: @unchecked Sendable {
    // @unchecked: every stored property is immutable; the stores and the counters are
    // thread-safe, and the stripe locks are only taken and released inside one method.

    /// The configuration the storage was created with.
    public let configuration: Configuration
    /// The memory tier.
    public let memory: MemoryStore<Key, Value>
    /// The disk tier, or `nil` for a memory-only storage.
    public let disk: DiskStore?
    /// The value codec for the disk tier.
    public let transformer: Transformer<Value>

    /// Writes, removals and promotions of one key happen under that key's stripe lock.
    private let stripes: [NSLock]
    @usableFromInline let counters = Counters()

    /// Creates a storage.
    ///
    /// - Parameters:
    ///   - configuration: The tiers' settings; without a directory the storage is memory-only.
    ///   - transformer: The codec for the disk tier.
    /// - Throws: ``StorageError/invalidConfiguration(field:value:reason:)`` for a bad
    ///   configuration of either tier, or the errors of ``DiskStore/init(directory:configuration:)``.
    public init(configuration: Configuration = .init(), transformer: Transformer<Value>) throws {
        self.configuration = configuration
        self.transformer = transformer
        self.memory = try MemoryStore(configuration: configuration.memory)
        if let directory = configuration.directory {
            self.disk = try DiskStore(directory: directory, configuration: configuration.disk)
        } else {
            self.disk = nil
        }
        self.stripes = (0..<64).map { _ in NSLock() }
    }

    /// Creates a storage with a configuration edited by `configure`.
    public convenience init(transformer: Transformer<Value>, _ configure: (inout Configuration) -> Void) throws {
        var configuration = Configuration()
        configure(&configuration)
        try self.init(configuration: configuration, transformer: transformer)
    }

    /// The tiers this storage has.
    public var availableTiers: StorageTiers {
        disk == nil ? .memory : .all
    }

    // MARK: - Reading

    /// The value for `key`, from memory or else from disk, or `nil` on a miss.
    ///
    /// - Parameter tiers: Where to look; defaults to the configuration's default tiers.
    /// - Throws: ``StorageError`` for disk I/O failures or tiers the storage does not have.
    @inlinable
    public func value(forKey key: Key, tiers: StorageTiers? = nil) throws -> Value? {
        try entry(forKey: key, tiers: tiers)?.value
    }

    /// The value for `key` with the tier that answered and its expiration, or `nil` on a miss.
    ///
    /// A disk hit is promoted into memory (when `tiers` includes memory) with the entry's
    /// remaining lifetime. Bytes the transformer cannot decode are a miss that removes them.
    @inlinable
    public func entry(forKey key: Key, tiers: StorageTiers? = nil) throws -> Entry? {
        let tiers = try resolve(tiers)
        if let found = memoryEntry(forKey: key, tiers: tiers) { return found }
        return try diskEntry(forKey: key, tiers: tiers)
    }

    /// The memory half of a read: no I/O, safe on any executor.
    @inlinable
    func memoryEntry(forKey key: Key, tiers: StorageTiers) -> Entry? {
        guard tiers.contains(.memory) else { return nil }
        if let found = memory.entry(forKey: key) {
            counters.memoryHits.add(1, ordering: .relaxed)
            return Entry(value: found.value, tier: .memory, expirationDate: found.expirationDate)
        }
        counters.memoryMisses.add(1, ordering: .relaxed)
        return nil
    }

    /// The disk half of a read, after a memory miss: reads, decodes and promotes.
    @usableFromInline
    func diskEntry(forKey key: Key, tiers: StorageTiers) throws -> Entry? {
        guard tiers.contains(.disk), let disk else {
            counters.misses.add(1, ordering: .relaxed)
            return nil
        }
        let lock = stripe(for: key)
        lock.lock()
        defer { lock.unlock() }
        // Another reader may have promoted the value while this one waited for the stripe.
        if tiers.contains(.memory), let found = memory.entry(forKey: key) {
            counters.memoryHits.add(1, ordering: .relaxed)
            counters.memoryMisses.add(-1, ordering: .relaxed)
            return Entry(value: found.value, tier: .memory, expirationDate: found.expirationDate)
        }
        guard let found = try disk.entry(forKey: key.cacheKey) else {
            counters.diskMisses.add(1, ordering: .relaxed)
            counters.misses.add(1, ordering: .relaxed)
            return nil
        }
        let (data, expirationDate) = (found.data, found.expirationDate)
        let value: Value
        do {
            value = try transformer.decode(data)
        } catch {
            try disk.removeValue(forKey: key.cacheKey)
            counters.decodingFailures.add(1, ordering: .relaxed)
            counters.diskMisses.add(1, ordering: .relaxed)
            counters.misses.add(1, ordering: .relaxed)
            return nil
        }
        counters.diskHits.add(1, ordering: .relaxed)
        if tiers.contains(.memory) {
            if memory.setValue(value, forKey: key, expiry: expirationDate.map(Expiry.date) ?? .never) {
                counters.promotions.add(1, ordering: .relaxed)
            }
        }
        return Entry(value: value, tier: .disk, expirationDate: expirationDate)
    }

    /// Whether any of `tiers` holds a live value for `key`. Reads no value from disk and does
    /// not change recency.
    public func containsValue(forKey key: Key, tiers: StorageTiers? = nil) throws -> Bool {
        let tiers = try resolve(tiers)
        if tiers.contains(.memory), memory.containsValue(forKey: key) { return true }
        if tiers.contains(.disk), let disk { return try disk.containsValue(forKey: key.cacheKey) }
        return false
    }

    /// The value for `key`, or `nil` on a miss or any error — for call sites where a cache
    /// failure should simply mean "not cached".
    public subscript(key: Key) -> Value? {
        (try? value(forKey: key)) ?? nil
    }

    // MARK: - Writing

    /// Stores `value` for `key` in `tiers`.
    ///
    /// The disk write happens first; if it throws, no tier changes. Memory holds the value
    /// itself, never its encoded bytes.
    ///
    /// - Parameters:
    ///   - expiry: When the entry expires; `nil` takes each tier's default expiry.
    ///   - tiers: Where to store; defaults to the configuration's default tiers.
    /// - Throws: ``StorageError/encoding(underlying:)`` when the transformer refuses the value,
    ///   disk errors, or ``StorageError/invalidInput(_:)`` for tiers the storage does not have.
    public func setValue(_ value: Value, forKey key: Key, expiry: Expiry? = nil, tiers: StorageTiers? = nil) throws {
        let tiers = try resolve(tiers)
        if let expiry, !expiry.isValid {
            throw StorageError.invalidInput("expiry \(expiry) is not a finite time")
        }
        // Caller code (the transformer) runs before the stripe lock is taken.
        let encoded: Data? = try tiers.contains(.disk) && disk != nil ? encode(value) : nil
        let compressible = encoded != nil && transformer.isCompressible(value)
        let lock = stripe(for: key)
        lock.lock()
        defer { lock.unlock() }
        if let encoded, let disk {
            try disk.setValue(
                encoded, forKey: key.cacheKey, expiry: expiry, isCompressible: compressible)
        } else if tiers == .memory, let disk {
            // A memory-only write must not leave an older disk value to resurface later.
            try disk.removeValue(forKey: key.cacheKey)
        }
        if tiers.contains(.memory) {
            memory.setValue(value, forKey: key, expiry: expiry)
        } else {
            // A disk-only write replaces what memory held, so no read sees the old value.
            memory.removeValue(forKey: key)
        }
        counters.writes.add(1, ordering: .relaxed)
    }

    private func encode(_ value: Value) throws -> Data {
        do {
            return try transformer.encode(value)
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError.wrappingEncoding(error)
        }
    }

    /// Removes the value for `key` from `tiers`.
    ///
    /// - Returns: Whether any tier held a value.
    @discardableResult
    public func removeValue(forKey key: Key, tiers: StorageTiers? = nil) throws -> Bool {
        let tiers = try resolve(tiers)
        let lock = stripe(for: key)
        lock.lock()
        defer { lock.unlock() }
        var removed = false
        if tiers.contains(.disk), let disk {
            removed = try disk.removeValue(forKey: key.cacheKey)
        }
        if tiers.contains(.memory) {
            removed = memory.removeValue(forKey: key) || removed
        }
        return removed
    }

    /// Removes every value from `tiers`.
    public func removeAll(tiers: StorageTiers? = nil) throws {
        let tiers = try resolve(tiers)
        // Hold every stripe so no promotion in flight lands after the clear.
        for lock in stripes { lock.lock() }
        defer { for lock in stripes { lock.unlock() } }
        if tiers.contains(.disk), let disk { try disk.removeAll() }
        if tiers.contains(.memory) { memory.removeAll() }
    }

    /// Removes expired entries from every tier.
    ///
    /// - Returns: The number of entries removed.
    @discardableResult
    public func removeExpired() throws -> Int {
        try (disk?.removeExpired() ?? 0) + memory.removeExpired()
    }

    // MARK: - Statistics

    /// Counters since the storage was created, with the tiers' current totals.
    public var statistics: StorageStatistics {
        var statistics = StorageStatistics()
        statistics.memoryHits = counters.memoryHits.load(ordering: .relaxed)
        statistics.memoryMisses = counters.memoryMisses.load(ordering: .relaxed)
        statistics.diskHits = counters.diskHits.load(ordering: .relaxed)
        statistics.diskMisses = counters.diskMisses.load(ordering: .relaxed)
        statistics.misses = counters.misses.load(ordering: .relaxed)
        statistics.promotions = counters.promotions.load(ordering: .relaxed)
        statistics.writes = counters.writes.load(ordering: .relaxed)
        statistics.decodingFailures = counters.decodingFailures.load(ordering: .relaxed)
        let memoryStatistics = memory.statistics
        statistics.memoryEvictions = memoryStatistics.evictions
        statistics.memoryExpirations = memoryStatistics.expirations
        statistics.memoryCount = memoryStatistics.totalCount
        statistics.memoryCost = memoryStatistics.totalCost
        if let diskStatistics = disk?.statistics {
            statistics.diskEvictions = diskStatistics.evictions
            statistics.diskExpirations = diskStatistics.expirations
            statistics.diskCorruptEntriesDropped = diskStatistics.corruptEntriesDropped
            statistics.diskCount = diskStatistics.totalCount
            statistics.diskSize = diskStatistics.totalSize
        }
        return statistics
    }

    // MARK: - Helpers

    /// The requested tiers narrowed to the ones this storage has; naming only missing tiers is
    /// an error rather than a silent no-op.
    @inlinable
    func resolve(_ tiers: StorageTiers?) throws -> StorageTiers {
        let requested = tiers ?? configuration.defaultTiers
        let resolved = disk == nil ? (requested.contains(.memory) ? StorageTiers.memory : []) : requested
        guard resolved.contains(.memory) || resolved.contains(.disk) else {
            throw StorageError(code: .invalidInput, message: "tiers \(requested) name no tier of this storage (it has \(availableTiers))")
        }
        return resolved
    }

    private func stripe(for key: Key) -> NSLock {
        stripes[Int(UInt(bitPattern: key.hashValue) % UInt(stripes.count))]
    }
}

/// Lock-free counters; relaxed ordering is enough for statistics.
@usableFromInline
final class Counters: Sendable {
    @usableFromInline let memoryHits = Atomic<Int>(0)
    @usableFromInline let memoryMisses = Atomic<Int>(0)
    let diskHits = Atomic<Int>(0)
    let diskMisses = Atomic<Int>(0)
    @usableFromInline let misses = Atomic<Int>(0)
    let promotions = Atomic<Int>(0)
    let writes = Atomic<Int>(0)
    let decodingFailures = Atomic<Int>(0)
}
