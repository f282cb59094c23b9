public import Foundation

extension DiskStore {
    /// How values are compressed before they reach the disk.
    public enum Compression: Sendable, Hashable {
        /// Values are stored as given.
        case none
        /// Values are gzip-compressed at `level` (0...9, or -1 for zlib's default); a value whose
        /// compressed form is not smaller is stored raw, and the index row says which.
        case gzip(level: Int)
    }

    /// How hard a write works to survive a crash of the machine.
    public enum Durability: Sendable, Hashable {
        /// No `fsync`; SQLite runs with `synchronous=NORMAL`. A completed write survives a crash
        /// of the process; the last writes may be lost if the machine loses power.
        case fast
        /// `fsync` of each blob file and its directory, and `synchronous=FULL`: a completed write
        /// survives a power loss.
        case durable
    }

    /// How a stored value is encoded.
    public enum Encoding: Int, Sendable, Hashable {
        /// The bytes as given.
        case raw = 0
        /// A gzip stream of the bytes.
        case gzip = 1
    }

    /// The settings of a ``DiskStore``, fixed when it opens.
    ///
    /// ```swift
    /// var configuration = DiskStore.Configuration()
    /// configuration.sizeLimit = 200 * 1024 * 1024
    /// configuration.compression = .gzip(level: 6)
    /// let store = try DiskStore(directory: cacheURL, configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The most bytes (stored size, after compression) the store keeps. 0 keeps nothing: every
        /// write is accepted and immediately evicted (see ``DiskStore/setValue(_:forKey:expiry:metadata:isCompressible:)``).
        /// Must not be negative. Defaults to 256 MiB.
        public var sizeLimit: Int
        /// The most entries the store keeps. 0 keeps nothing, like a ``sizeLimit`` of 0. Must not be
        /// negative. Defaults to `Int.max` (no count limit).
        public var countLimit: Int
        /// When a write takes a total over its limit, entries are removed until the total is at
        /// or below `(1 - overflowTrimRatio) × limit`. Must be in `0..<1`; 0 removes just
        /// enough. Defaults to 0.2.
        public var overflowTrimRatio: Double
        /// Which entries go when a limit is exceeded: ``EvictionPolicy/lru`` (the least recently
        /// used) or ``EvictionPolicy/s3fifo`` (S3-FIFO with queues sized in the limits' own
        /// measures: 10% of each limit for the small queue, a ghost of 90% holding no more key
        /// digests than there are entries; a read only bumps a counter, and a read of an entry
        /// whose counter is saturated and whose last use was recorded under 2 s ago writes
        /// nothing at all, so last-used times lag reads by up to 2 s). Expired entries always
        /// go first, and the limits and
        /// ``overflowTrimRatio`` mean the same under both. A store's policy may change from one
        /// opening to the next (see ``DiskStore`` for how the order carries over). Defaults to
        /// ``EvictionPolicy/lru``; ``EvictionPolicy/wTinyLFU`` is memory-only.
        public var policy: EvictionPolicy
        /// The digest that names blob files. Defaults to ``KeyHashing/sha1``.
        public var keyHashing: KeyHashing
        /// Compression of stored values. Defaults to ``Compression/none``.
        public var compression: Compression
        /// Values whose stored size is below this many bytes live inline in the index row;
        /// larger ones in blob files. 0 stores every value in a file. Defaults to 16 KiB.
        public var inlineThreshold: Int
        /// The expiry of a write that names none; `.seconds` must be positive and finite. Defaults
        /// to ``Expiry/never``.
        public var defaultExpiry: Expiry
        /// Whether writes are flushed to stable storage. Defaults to ``Durability/fast``.
        public var durability: Durability
        /// How long a call waits for another connection's write lock (another thread's or
        /// process's store on the same directory). Defaults to 10 seconds.
        public var busyTimeout: Duration
        /// Where a due batch of logged reads (reads of 16,384 distinct entries, 65,536 reads, or
        /// 2 seconds' worth) is written to the index: `true` on Larder's I/O queue, so that no
        /// read waits for it; `false` on the thread of the read that filled the batch. Either
        /// way writes, trims and `close()` rank every logged read first, so least-recently-used
        /// order stays exact, and a reader that finds 131,072 reads still waiting ranks them
        /// itself. Defaults to `true`.
        public var ranksReadsInBackground: Bool
        /// The clock used for expiry and access times. Defaults to the system clock.
        public var now: @Sendable () -> Date
        /// Receives the store's rare operational messages (a corrupt index moved aside, a
        /// sweep that failed). Defaults to printing them to standard error; `nil` silences them.
        public var logHandler: (@Sendable (String) -> Void)?

        /// Creates a configuration; every parameter has the documented default.
        public init(
            sizeLimit: Int = 256 * 1024 * 1024,
            countLimit: Int = .max,
            overflowTrimRatio: Double = 0.2,
            policy: EvictionPolicy = .lru,
            keyHashing: KeyHashing = .sha1,
            compression: Compression = .none,
            inlineThreshold: Int = 16 * 1024,
            defaultExpiry: Expiry = .never,
            durability: Durability = .fast,
            busyTimeout: Duration = .seconds(10),
            ranksReadsInBackground: Bool = true,
            now: @escaping @Sendable () -> Date = { Date() },
            logHandler: (@Sendable (String) -> Void)? = { message in
                FileHandle.standardError.write(Data("larder: \(message)\n".utf8))
            }
        ) {
            self.sizeLimit = sizeLimit
            self.countLimit = countLimit
            self.overflowTrimRatio = overflowTrimRatio
            self.policy = policy
            self.keyHashing = keyHashing
            self.compression = compression
            self.inlineThreshold = inlineThreshold
            self.defaultExpiry = defaultExpiry
            self.durability = durability
            self.busyTimeout = busyTimeout
            self.ranksReadsInBackground = ranksReadsInBackground
            self.now = now
            self.logHandler = logHandler
        }

        /// Throws ``StorageError/invalidConfiguration(field:value:reason:)`` naming the first
        /// field that holds an unusable value.
        func validate() throws {
            func invalid(_ field: String, _ value: Any, _ reason: String) -> StorageError {
                .invalidConfiguration(field: field, value: "\(value)", reason: reason)
            }
            // The same rules as `MemoryStore.Configuration`: a limit of 0 is a store that keeps
            // nothing, a negative one is a mistake.
            guard sizeLimit >= 0 else { throw invalid("sizeLimit", sizeLimit, "must not be negative") }
            guard countLimit >= 0 else { throw invalid("countLimit", countLimit, "must not be negative") }
            guard overflowTrimRatio >= 0, overflowTrimRatio < 1 else {
                throw invalid("overflowTrimRatio", overflowTrimRatio, "must be in 0..<1")
            }
            guard policy == .lru || policy == .s3fifo else {
                throw invalid("policy", policy, "a DiskStore evicts by .lru or .s3fifo")
            }
            if case .gzip(let level) = compression, !(-1...9).contains(level) {
                throw invalid("compression", "gzip(level: \(level))", "level must be in -1...9")
            }
            guard inlineThreshold >= 0 else {
                throw invalid("inlineThreshold", inlineThreshold, "must not be negative")
            }
            switch defaultExpiry {
            case .never:
                break
            case .seconds(let seconds), .sliding(let seconds):
                guard seconds.isFinite && seconds > 0 else {
                    throw invalid("defaultExpiry", defaultExpiry, "seconds must be positive and finite")
                }
            case .date:
                guard defaultExpiry.isValid else { throw invalid("defaultExpiry", defaultExpiry, "the date must be finite") }
            }
            guard busyTimeout >= .zero else { throw invalid("busyTimeout", busyTimeout, "must not be negative") }
        }
    }

    /// What the index knows about one entry, read without touching the value.
    public struct Attributes: Sendable, Hashable {
        /// The key as written.
        public var key: String
        /// Bytes on disk (after compression).
        public var size: Int
        /// Bytes of the value as written.
        public var originalSize: Int
        /// How the stored bytes are encoded.
        public var encoding: Encoding
        /// Whether the value lives in the index row rather than a blob file.
        public var isInline: Bool
        /// When the value was written.
        public var creationDate: Date
        /// When the value was last read or written (access times are flushed in batches).
        public var accessDate: Date
        /// When the entry expires, or `nil` if it never does.
        public var expirationDate: Date?
        /// The caller's metadata bytes, if any were written with the value.
        public var metadata: Data?
    }

    /// Counters since the store was opened, plus the current totals.
    public struct Statistics: Sendable, Hashable {
        /// Reads that returned a value.
        public var hits = 0
        /// Reads that found nothing, an expired entry or a damaged one.
        public var misses = 0
        /// Completed writes.
        public var writes = 0
        /// Entries removed by the size and count limits (including `trim`).
        public var evictions = 0
        /// Expired entries removed.
        public var expirations = 0
        /// Entries removed by ``DiskStore/removeValues(taggedWith:)``.
        public var removedByTag = 0
        /// Entries dropped because their bytes were damaged or missing.
        public var corruptEntriesDropped = 0
        /// Times a corrupt index was found while the store was open and emptied so the store
        /// could keep working.
        public var indexResets = 0
        /// Times the store found its directory (or its index) deleted or replaced while open,
        /// and created a new one where other stores on the path see it.
        public var directoryRecreations = 0
        /// Entries in the store now.
        public var totalCount = 0
        /// Stored bytes in the store now.
        public var totalSize = 0
    }
}
