public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The durable tier: an SQLite index plus blob files in one directory.
///
/// Values below ``Configuration/inlineThreshold`` live in their index row; larger ones in
/// `blobs/<digest>-<n>` files named after a digest of the key, so no key is ever used as a
/// path. Every value carries a CRC-32C of its key and stored bytes (hardware-computed where the
/// CPU can); a read that finds damaged or missing bytes returns `nil` and drops the entry, so
/// corrupt bytes are never returned.
///
/// A read writes nothing to the entry's row: it is appended to an in-memory log, in order, and
/// the log is ranked into the narrow `access` table in batches, so least-recently-used order
/// follows the order of reads even within one millisecond. A write ranks after the reads logged
/// before it without ranking them itself: they are given the sequence numbers below its own
/// (an eviction, and every trim, ranks the log first). While another store, in this
/// process or another, has the directory open, a write ranks the log first instead, so that
/// store sees the reads from then on. Reads run
/// on a small pool of read-only connections (SQLite's WAL mode lets them proceed in parallel
/// with each other and with the one writer connection).
///
/// ```swift
/// let store = try DiskStore(directory: cacheURL) { $0.sizeLimit = 100 << 20 }
/// try store.setValue(Data("hello".utf8), forKey: "greeting", expiry: .seconds(3_600))
/// let data = try store.value(forKey: "greeting") // "hello"
/// ```
///
/// Eviction follows ``Configuration/policy``: least recently used (the default), or S3-FIFO,
/// whose queues are sized in the limits' own measures and whose reads only bump a 2-bit counter
/// in the access row (never a move). Expired entries go first under both. The policy may change
/// between openings of a directory, keeping each entry's place: from LRU, every entry is in
/// S3-FIFO's main queue in recency order (least recently used first out) with its counter at 0;
/// from S3-FIFO, the order in which entries entered their queues becomes recency (the entry
/// that entered longest ago goes first), and the counters are ignored until S3-FIFO is chosen
/// again. Stores with different policies may share a directory: each evicts by its own.
///
/// Directory layout: `index.sqlite` (WAL mode), `blobs/<digest>-<n>` (earlier versions wrote
/// `blobs/ab/<digest>-<n>`, still read), `tmp/` for in-flight writes.
/// Several stores — threads or processes — may open the same directory; SQLite's locking keeps
/// them consistent, and totals live in the index so every store sees the same numbers.
///
/// - Important: Every method does disk I/O on the calling thread. Hashing, compression, the
///   checksum and blob file I/O run outside the store's locks; only index writes hold the
///   writer's lock, and a read holds only its own pooled connection.
public final class DiskStore: Sendable {
    /// The configuration the store was opened with.
    public let configuration: Configuration

    // Internal rather than private so the `DiskStore+…` files can reach them.
    /// The directory, its index file, and this store's place among the process's open stores.
    let place: StorePlace
    let files: BlobFiles
    /// The writer: the one read-write connection and what changes with it. A pthread mutex rather
    /// than `Mutex`, so ThreadSanitizer sees it (see ``Locked``); held across SQLite's I/O, so
    /// it does not spin. Every write transaction goes through ``withWriteTransaction(_:ranking:_:)``.
    ///
    /// Lock order: `state` may be held while taking the reader pool's or the access log's locks,
    /// never the reverse.
    let state: Locked<State>
    /// Read-only connections, one borrowed per read, outside the writer's lock.
    let readers: ReaderPool
    /// Hits and misses, and the reads waiting to be written into the index.
    let accessLog: AccessLog
    /// What this store has added to the directory's counts in the index.
    let directoryCounts = DirectoryCounts()
    /// Where the storage that created the store hears of evictions and expirations.
    let removals: RemovalReporter<String>?
    /// The limits in force: the configuration's until ``setLimits(countLimit:sizeLimit:)``
    /// changes them (stored under the writer's lock, read without it).
    let limits: Limits

    /// The id of this store's writes in the index's change rows (random, never 0), by which
    /// its own ``ChangeWatch`` skips them.
    let writerID = Int64.random(in: 1...Int64.max)

    /// How often the store opened its index again since it opened (a recreated directory, an
    /// index moved aside or reset): a ``ChangeWatch`` then follows the new one.
    let indexOpenings = Atomic<UInt64>(0)

    /// The directory the store owns.
    public var directory: URL { place.url }

    /// The writer's state. `index` is `nil` once the store is closed.
    struct State {
        var index: DiskIndex?
        /// The device and inode of `index.sqlite` when it was opened: a path that no longer
        /// names that file means the directory was deleted or replaced under the store.
        var indexIdentity: FileIdentity?
        /// Set when the index must be opened again (the directory vanished and could not be
        /// created yet); cleared by `close()`.
        var needsReopen = false
        /// Whether this hold of the lock keeps the keys it evicts or finds expired, for the
        /// events of the storage that created the store (set when the lock is taken).
        var recordsRemovals = false
        var removalEvents: [(key: String, kind: StorageEvent.Kind)] = []

        /// Keeps `key`'s removal for the storage's events, if it listens.
        mutating func recordRemoval(_ key: String, _ kind: StorageEvent.Kind) {
            if recordsRemovals { removalEvents.append((key, kind)) }
        }
        var writesSinceCheckpoint = 0
        /// Every counter but hits and misses (those are in ``AccessLog``).
        var statistics = Statistics()
    }

    /// The count and size limits in force.
    final class Limits: Sendable {
        let count: Atomic<Int>
        let size: Atomic<Int>

        init(count: Int, size: Int) {
            self.count = Atomic(count)
            self.size = Atomic(size)
        }
    }

    /// Where a store lives: its directory, `index.sqlite` in it, and the directory's canonical
    /// path, under which the process counts its open stores (``isAloneOnDirectory(_:)``).
    final class StorePlace: Sendable {
        let url: URL
        let indexPath: String
        /// ``url`` with symbolic links resolved: the key of ``DiskStore/openStores``.
        let canonicalPath: String
        /// Whether this store counts in ``DiskStore/openStores`` (from its opening to `close()`).
        let isCounted = Atomic<Bool>(true)

        init(_ url: URL) {
            self.url = url
            indexPath = url.appendingPathComponent("index.sqlite").path
            canonicalPath = DiskStore.canonicalPath(url.path)
        }
    }

    /// Open stores of this process per directory (by ``StorePlace/canonicalPath``): a write
    /// leaves the reads before it unranked only while its store is alone on its directory.
    static let openStores = Locked<[String: Int]>([:])

    /// The directory with symbolic links resolved.
    var canonicalDirectory: String { place.canonicalPath }
    /// `index.sqlite` in ``directory``.
    var indexPath: String { place.indexPath }

    /// How long two reads of an S3-FIFO entry may be apart for the second to count for nothing
    /// (milliseconds): the access log's own delay, within which its reads are written anyway.
    static let accessFlushDelay = AccessLog.flushDelay
    /// Rows deleted per statement when expiring or evicting.
    static let batchSize = 256
    /// Every this many write transactions, a log still a quarter past its bound (see
    /// ``SQLiteLogMonitor/isOverBound``) gets a `wal_checkpoint(TRUNCATE)`, which waits for readers.
    static let checkpointInterval = 1_000
    /// Files in `tmp/` and unreferenced blobs younger than this are left alone by the sweep:
    /// another store may be between writing them and committing their row.
    public static let sweepGracePeriod: TimeInterval = 60
    /// The largest metadata blob accepted.
    public static let metadataLimit = 64 * 1024

    /// Opens the store in `directory`, creating the directory when missing.
    ///
    /// A corrupt or foreign `index.sqlite` is moved aside (as `index.sqlite.corrupt-<time>`)
    /// and the store starts empty; a busy database is never treated as corrupt.
    ///
    /// - Throws: ``StorageError/invalidConfiguration(field:value:reason:)`` for a bad
    ///   configuration; ``StorageError/io(operation:path:underlying:)`` when the directory
    ///   cannot be created or is not a directory; ``StorageError/sqlite(code:message:sql:)``
    ///   when the index cannot be opened.
    public convenience init(directory: URL, configuration: Configuration = .init()) throws {
        try self.init(directory: directory, configuration: configuration, removals: nil)
    }

    /// A store that reports its evictions and expirations to `removals`.
    init(directory: URL, configuration: Configuration, removals: RemovalReporter<String>?) throws {
        self.removals = removals
        try configuration.validate()
        limits = Limits(count: configuration.countLimit, size: configuration.sizeLimit)
        let url = directory.standardizedFileURL
        self.configuration = configuration
        self.files = BlobFiles(root: url, durable: configuration.durability == .durable)

        try Self.makeDirectories(url)
        let directoriesAreNew = try files.createDirectories()

        place = StorePlace(url)
        let (index, needsSweep) = try Self.openIndex(
            in: url, configuration: configuration, directoriesAreNew: directoriesAreNew, writer: writerID)
        let identity = FileIdentity(path: place.indexPath)
        state = Locked(State(index: index, indexIdentity: identity))
        readers = ReaderPool(
            directory: url.path, indexPath: place.indexPath, busyTimeout: configuration.busyTimeout,
            countsLookups: Self.policy(for: configuration.policy).countsLookups, indexIdentity: identity)
        accessLog = AccessLog(ranksInBackground: configuration.ranksReadsInBackground)
        Self.openStores.withLock { $0[place.canonicalPath, default: 0] += 1 }
        if needsSweep {
            // Holds the store until the sweep is done. Not `[weak self]`: a weak reference gives
            // the store a side table for good, and every later retain and release of it (one
            // per `Storage` call that reaches the disk tier) takes the runtime's slow path.
            DispatchQueue.global(qos: .utility).async { [self] in sweepInBackground() }
        }
    }

    deinit {
        close()
    }

    /// `path` with symbolic links resolved (as given when it cannot be resolved).
    static func canonicalPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// A watch of the changes other stores make to this store's directory, for a storage's
    /// memory tier (see ``ChangeWatch``).
    func makeChangeWatch() throws -> ChangeWatch {
        try ChangeWatch(store: self)
    }

    /// Whether no other store — of this process (``openStores``) or another (SQLite's view of
    /// the index) — has the directory open. Call inside a transaction of `index`.
    func isAloneOnDirectory(_ index: DiskIndex) -> Bool {
        guard Self.openStores.withLock({ $0[canonicalDirectory] ?? 0 }) <= 1 else { return false }
        return !index.connection.hasExternalConnection()
    }

    // MARK: - Locked helpers

    /// Runs `body` with the live index under the lock.
    ///
    /// When SQLite finds the index corrupt (a damaged page, a missing totals row), the index is
    /// emptied in place and `body` runs once more against the empty index: the entries are lost
    /// — a cache may lose entries, never return wrong ones — and the store keeps working. Their
    /// blob files become orphans for the sweep of the next open (the reset clears `last_sweep`).
    func withIndex<T>(_ body: (inout State) throws -> sending T) throws -> sending T {
        guard let removals, removals.isActive() else { return try withIndexLocked(body) }
        let (result, events) = try withIndexLocked { state in
            state.recordsRemovals = true
            state.removalEvents = []
            defer { state.recordsRemovals = false }
            let result = try body(&state)
            let events = state.removalEvents
            state.removalEvents = []
            return (result, events)
        }
        for event in events { removals.report(event.key, event.kind) }
        return result
    }

    private func withIndexLocked<T>(_ body: (inout State) throws -> sending T) throws -> sending T {
        try state.withLock { state in
            readers.endLingering()
            try reopenIfDirectoryChanged(&state)
            do {
                return try body(&state)
            } catch let error as StorageError where error.isDatabaseCorruption {
                try resetCorruptIndex(&state, error: error)
                return try body(&state)
            }
        }
    }

    /// Runs `body` under the lock with the live index (``withIndex(_:)``'s corruption
    /// recovery included); throws ``StorageError/closed`` once the store is closed.
    func withLiveIndex<T>(_ body: (inout State, DiskIndex) throws -> sending T) throws -> sending T {
        try withIndex { state in
            let index = try Self.liveIndex(state)
            return try body(&state, index)
        }
    }

    static func liveIndex(_ state: State) throws -> DiskIndex {
        guard let index = state.index else { throw StorageError.closed }
        return index
    }
}
