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
/// before it without ranking them itself: it reserves the sequence numbers below its own for
/// them (an eviction, and every trim, ranks the log first). While another store, in this
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
    /// The directory the store owns.
    public let directory: URL
    /// The configuration the store was opened with.
    public let configuration: Configuration

    // Internal rather than private so the `DiskStore+…` files can reach them.
    let files: BlobFiles
    /// The writer: the one read-write connection and what changes with it. A pthread mutex rather
    /// than `Mutex`, so ThreadSanitizer sees it (see ``Locked``); held across SQLite's I/O, so
    /// it does not spin.
    let state: Locked<State>
    /// Read-only connections, checked out one per read so reads on different threads do not
    /// wait for each other or for the writer, with the log of reads. Most reads take only
    /// their thread's lane (``lanes``); a read whose lane has no reader for it, or whose lane
    /// is full, takes this lock too. It spins before it sleeps (``Locked``): its holders never
    /// wait on anything.
    ///
    /// Lock order: `readers` may be held while taking a lane's lock, never the reverse.
    let readers: Locked<ReaderPool>
    /// Each thread's reader and reads (see ``ReadLane``), by ``currentLaneNumber()``.
    let lanes: [Locked<ReadLane>]
    /// The pool's generation, whether it is closed and whether lingering is paused, for the
    /// lanes (``PoolStatus``): written under the pool's lock, read without it.
    let poolStatus = Atomic<Int>(0)
    /// Whether ``sweepLingeringReads()`` is queued: a lingering reader is parked in a lane only
    /// then (else the pool queues one).
    let isSweepScheduled = Atomic<Bool>(false)
    /// The next read's ticket: the order of the reads logged in different lanes.
    let readTickets = Atomic<UInt64>(0)
    /// The lanes a read has used, one bit each (``forEachUsedLane(_:)``): a process with one
    /// reading thread has one lane to look at, not ``ReadLane/count``.
    let usedLanes = Atomic<Int>(0)
    /// The time of the oldest read waiting in a lane or in the log, or later (never earlier):
    /// a read that finds it ``accessFlushDelay`` old gathers the lanes.
    let oldestUnranked = Atomic<Int64>(.max)
    /// `index.sqlite` in ``directory``.
    let indexPath: String
    /// ``directory`` with symbolic links resolved: the key of ``openStores``.
    let canonicalDirectory: String
    /// Open stores of this process per directory (by ``canonicalDirectory``): a write leaves
    /// the reads before it unranked only while its store is alone on its directory.
    static let openStores = Locked<[String: Int]>([:])
    /// Whether this store counts in ``openStores`` (from its opening to ``close()``).
    let isCounted = Atomic<Bool>(true)
    /// When a read last looked at the directory (``monotonicNanoseconds()``).
    let lastDirectoryCheck = Atomic<UInt64>(0)
    /// A copy of ``State/indexIdentity`` behind a lock of its own, for the read path's look at
    /// the directory: the writer's lock can be held for milliseconds (a ranking of logged reads).
    let indexIdentityCopy: Locked<FileIdentity?>
    /// Where the storage that created the store hears of evictions and expirations.
    let removals: RemovalReporter<String>?
    /// The limits in force: the configuration's until ``setLimits(countLimit:sizeLimit:)``
    /// changes them (stored under the writer's lock, read without it).
    let countLimitValue: Atomic<Int>
    let sizeLimitValue: Atomic<Int>

    /// The writer's state. `index` is `nil` once the store is closed.
    ///
    /// Lock order: `state` may be held while taking `readers`, never the reverse.
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
        /// Every counter but hits and misses (those are in ``ReadLog``).
        var statistics = Statistics()
    }

    /// Idle read connections. A reset of a corrupt index or `close()` bumps `generation` or
    /// sets `isClosed`, so a connection checked out before is closed on its return instead of
    /// going back into the pool.
    ///
    /// Invariants: every reader in `idle` (or parked in a lane) is of the current `generation`
    /// or is dropped when taken; at most ``DiskStore/idleReaderLimit`` are idle; while
    /// `lingerPauses` is above 0 no reader goes back keeping a snapshot; and a reader answers
    /// with contents only while its directory exists (``PooledReader/isDirectoryGone``).
    struct ReaderPool {
        var idle: [PooledReader] = []
        var generation = 0
        /// Resets of the index under way (see ``resetCorruptIndex(_:error:)``): a read that
        /// fails meanwhile may have seen the index emptied but not yet rebuilt.
        var resetsInProgress = 0
        var isClosed = false
        /// Checkpoints under way that wait for readers: no reader keeps a snapshot meanwhile
        /// (see ``DiskStore/withLingeringPaused(_:)``).
        var lingerPauses = 0
        /// How long after a reader came back lingering ``DiskStore/sweepLingeringReads()``
        /// runs (seconds; tests lengthen it).
        var sweepDelay = DiskStore.lingerLimit
        /// Hit and miss counts and the reads waiting to be ranked in `access`.
        var log = ReadLog()
        /// The ticket counter (``DiskStore/readTickets``) at the last gathering of the lanes
        /// (``DiskStore/gatherLanes(_:)``): the reads still in lanes have tickets from here on.
        var gatheredTickets: UInt64 = 0
    }

    /// Reads since the last flush, in the order they happened: their order (not their
    /// millisecond) decides least-recently-used order once they are ranked.
    ///
    /// Invariants: `pending` is in read order (the lanes are gathered in ticket order);
    /// `reservedSequences` numbers a prefix of `pending`, one each; `pendingRows` holds every
    /// row id of `pending` (or is full); `oldestPending` is no later than the oldest pending
    /// read. Reads leave it only under the writer's lock (ranked, or forgotten by a reset).
    struct ReadLog {
        var hits = 0
        var misses = 0
        var pending: [DiskIndex.Access] = []
        /// The distinct rows of `pending`, counted up to ``DiskStore/accessFlushCount``.
        var pendingRows = PendingRows()
        /// The sequence numbers that writes reserved for the first `reservedSequences.count`
        /// pending reads (one per read, in order): a write of this process ranks after the
        /// reads logged before it without ranking them itself (see
        /// ``DiskStore/reserveSequence(index:)``).
        var reservedSequences: [Int64] = []
        /// Sliding lifetimes renewed by logged reads, written with their ranking.
        var extensions: [DiskIndex.Extension] = []
        var oldestPending: Int64?
        /// Whether a ranking of the log is queued or running on Larder's I/O queue.
        var isRankingInBackground = false
    }

    /// Recorded reads wait in memory until they name this many distinct rows… (A ranking
    /// rewrites the pages of `access` its reads touch: 4,096 reads of a 15,000-entry index share
    /// most pages, which made a ranked read cost about half what it did at 512. And each ranking
    /// commits, which makes every pooled reader drop its page cache and fetch its pages again:
    /// at 16,384 rather than 4,096, one thread read a 40,000-entry index 1.95x as fast, two
    /// threads 1.41x.)
    static let accessFlushCount = 16_384
    /// …or this many reads are pending (a ranking writes each row once, at its last read, so
    /// reads of a hot set cost it little: four reads of each row cost a quarter of what four
    /// rankings of one read each would)…
    static let accessFlushReads = 4 * accessFlushCount
    /// …or the oldest has waited this long (milliseconds), or an eviction or trim needs them
    /// (or a write, while another store has the directory open).
    static let accessFlushDelay: Int64 = 2_000
    /// A reader that finds this many reads waiting while a background ranking runs ranks them
    /// itself, so the log cannot outgrow the ranking.
    static let accessInlineBacklog = 2 * accessFlushReads
    /// At most this many unranked reads are kept when flushing them keeps failing (another
    /// process holding the write lock); older ones are dropped.
    static let accessBacklogLimit = 4 * accessFlushReads
    /// The longest a pooled reader keeps one snapshot (seconds; see
    /// ``DiskIndexReader/startRead(lingering:now:)``), and the delay after which idle readers
    /// end theirs.
    static let lingerLimit = 0.010
    /// Idle read connections kept in the pool, besides the one parked in each lane
    /// (``ReadLane``); more are opened while more threads read at once.
    static let idleReaderLimit = 4
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
        countLimitValue = Atomic(configuration.countLimit)
        sizeLimitValue = Atomic(configuration.sizeLimit)
        self.directory = directory.standardizedFileURL
        self.configuration = configuration
        self.files = BlobFiles(root: self.directory, durable: configuration.durability == .durable)

        try Self.makeDirectories(self.directory)
        let directoriesAreNew = try files.createDirectories()

        indexPath = self.directory.appendingPathComponent("index.sqlite").path
        canonicalDirectory = Self.canonicalPath(self.directory.path)
        let (index, needsSweep) = try Self.openIndex(
            in: self.directory, configuration: configuration, directoriesAreNew: directoriesAreNew)
        let identity = FileIdentity(path: indexPath)
        state = Locked(State(index: index, indexIdentity: identity))
        indexIdentityCopy = Locked(identity)
        readers = Locked(ReaderPool(), spinsBeforeSleeping: true)
        lanes = (0..<ReadLane.count).map { _ in Locked(ReadLane(), ownsCacheLines: true) }
        Self.openStores.withLock { $0[canonicalDirectory, default: 0] += 1 }
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
            endIdleLingeringReads()
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
