public import Foundation

extension Storage {
    /// The settings of a ``Storage``: its memory tier, an optional disk tier, and the tiers a
    /// call uses when it names none.
    ///
    /// ```swift
    /// var configuration = Storage<String, Data>.Configuration(directory: cachesURL)
    /// configuration.memory.costLimit = 50 << 20
    /// configuration.disk.sizeLimit = 500 << 20
    /// let storage = try Storage(configuration: configuration, transformer: .data)
    /// ```
    public struct Configuration: Sendable {
        /// The memory tier's configuration. Defaults to `MemoryStore.Configuration()`.
        public var memory: MemoryStore<Key, Value>.Configuration
        /// The directory of the disk tier; `nil` makes a memory-only storage that never touches
        /// the file system. Defaults to `nil`.
        public var directory: URL?
        /// The disk tier's configuration, used when ``directory`` is set. Defaults to
        /// `DiskStore.Configuration()`.
        public var disk: DiskStore.Configuration
        /// The tiers a call uses when it names none. Defaults to ``StorageTiers/all``.
        public var defaultTiers: StorageTiers

        /// Creates a configuration; every parameter has the documented default.
        public init(
            memory: MemoryStore<Key, Value>.Configuration = .init(),
            directory: URL? = nil,
            disk: DiskStore.Configuration = .init(),
            defaultTiers: StorageTiers = .all
        ) {
            self.memory = memory
            self.directory = directory
            self.disk = disk
            self.defaultTiers = defaultTiers
        }
    }

    /// A value with the tier that answered and its expiration.
    public struct Entry {
        /// The value.
        public var value: Value
        /// The tier the value came from.
        public var tier: StorageTier
        /// When the entry expires, or `nil` if it never does.
        public var expirationDate: Date?

        @usableFromInline
        init(value: Value, tier: StorageTier, expirationDate: Date?) {
            self.value = value
            self.tier = tier
            self.expirationDate = expirationDate
        }
    }
}

extension Storage.Entry: Sendable where Value: Sendable {}

/// Counters of a ``Storage`` since it was created, with its tiers' totals.
///
/// Every read through the storage is exactly one of: a memory hit, a disk hit, or a miss.
public struct StorageStatistics: Sendable, Hashable {
    /// Reads answered by the memory tier.
    public var memoryHits = 0
    /// Reads that looked in memory and found nothing there.
    public var memoryMisses = 0
    /// Reads answered by the disk tier.
    public var diskHits = 0
    /// Reads that looked on disk and found nothing there.
    public var diskMisses = 0
    /// Reads that found nothing in any tier they looked at.
    public var misses = 0
    /// Disk hits copied into memory.
    public var promotions = 0
    /// Completed `setValue` calls.
    public var writes = 0
    /// Disk entries whose bytes the transformer could not decode (each was removed).
    public var decodingFailures = 0
    /// Entries evicted from memory by its limits.
    public var memoryEvictions = 0
    /// Entries evicted from disk by its limits.
    public var diskEvictions = 0
    /// Expired entries removed from memory.
    public var memoryExpirations = 0
    /// Expired entries removed from disk.
    public var diskExpirations = 0
    /// Damaged disk entries dropped.
    public var diskCorruptEntriesDropped = 0
    /// Entries in memory now.
    public var memoryCount = 0
    /// Total cost of the entries in memory now.
    public var memoryCost = 0
    /// Entries on disk now (0 for a memory-only storage).
    public var diskCount = 0
    /// Stored bytes on disk now (0 for a memory-only storage).
    public var diskSize = 0

    /// Creates statistics with every counter at zero.
    public init() {}
}
