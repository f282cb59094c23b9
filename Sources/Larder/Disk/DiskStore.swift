public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The durable tier: an SQLite index plus blob files in one directory.
///
/// Values below ``Configuration/inlineThreshold`` live in their index row; larger ones in
/// `blobs/xx/<digest>-<n>` files named after a digest of the key, so no key is ever used as a
/// path. Every value carries a CRC-32; a read that finds damaged or missing bytes returns `nil`
/// and drops the entry, so corrupt bytes are never returned.
///
/// ```swift
/// let store = try DiskStore(directory: cacheURL) { $0.sizeLimit = 100 << 20 }
/// try store.setValue(Data("hello".utf8), forKey: "greeting", expiry: .seconds(3_600))
/// let data = try store.value(forKey: "greeting") // "hello"
/// ```
///
/// Directory layout: `index.sqlite` (WAL mode), `blobs/ab/…`, `tmp/` for in-flight writes.
/// Several stores — threads or processes — may open the same directory; SQLite's locking keeps
/// them consistent, and totals live in the index so every store sees the same numbers.
///
/// - Important: Every method does disk I/O on the calling thread. Hashing, compression, the
///   checksum and blob file I/O run outside the store's lock; only index work holds it.
public final class DiskStore: Sendable {
    /// The directory the store owns.
    public let directory: URL
    /// The configuration the store was opened with.
    public let configuration: Configuration

    // Internal rather than private so `DiskStore+Verify.swift` can reach them.
    let files: BlobFiles
    /// An NSLock rather than `Mutex`, so ThreadSanitizer sees it (see ``Locked``).
    let state: Locked<State>

    /// Everything mutable, behind one lock. `index` is `nil` once the store is closed.
    struct State {
        var index: DiskIndex?
        var pendingAccesses: [String: Int64] = [:]
        var oldestPendingAccess: Int64?
        var sequence: Int64 = 0
        var writesSinceCheckpoint = 0
        var statistics = Statistics()
    }

    /// Access times wait in memory until this many are pending…
    private static let accessFlushCount = 512
    /// …or the oldest has waited this long (milliseconds), or a write transaction runs.
    private static let accessFlushDelay: Int64 = 2_000
    /// Rows deleted per statement when expiring or evicting.
    private static let batchSize = 256
    /// A `wal_checkpoint(TRUNCATE)` runs after this many write transactions.
    private static let checkpointInterval = 1_000
    /// Files in `tmp/` and unreferenced blobs younger than this are left alone by the sweep:
    /// another store may be between writing them and committing their row.
    public static let sweepGracePeriod: TimeInterval = 60
    /// The largest metadata blob accepted.
    public static let metadataLimit = 64 * 1024

    // MARK: - Opening and closing

    /// Opens the store in `directory`, creating the directory when missing.
    ///
    /// A corrupt or foreign `index.sqlite` is moved aside (as `index.sqlite.corrupt-<time>`)
    /// and the store starts empty; a busy database is never treated as corrupt.
    ///
    /// - Throws: ``StorageError/invalidConfiguration(field:value:reason:)`` for a bad
    ///   configuration; ``StorageError/io(operation:path:underlying:)`` when the directory
    ///   cannot be created or is not a directory; ``StorageError/sqlite(code:message:sql:)``
    ///   when the index cannot be opened.
    public init(directory: URL, configuration: Configuration = .init()) throws {
        try configuration.validate()
        self.directory = directory.standardizedFileURL
        self.configuration = configuration
        self.files = BlobFiles(root: self.directory, durable: configuration.durability == .durable)

        do {
            try FileManager.default.createDirectory(
                atPath: self.directory.path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            let reason = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? POSIXError)
                .map { String(cString: strerror($0.code.rawValue)) } ?? "\(error)"
            throw StorageError.io(operation: "creating directory", path: self.directory.path, reason: reason, cause: error)
        }
        try BlobFiles.makeDirectory(self.directory.path)
        try files.createDirectories()

        let (index, needsSweep) = try Self.openIndex(in: self.directory, configuration: configuration)
        state = Locked(State(index: index))
        if needsSweep {
            DispatchQueue.global(qos: .utility).async { [weak self] in
                self?.sweepInBackground()
            }
        }
    }

    /// Opens the store in `directory` with a configuration edited by `configure`.
    public convenience init(directory: URL, _ configure: (inout Configuration) -> Void) throws {
        var configuration = Configuration()
        configure(&configuration)
        try self.init(directory: directory, configuration: configuration)
    }

    deinit {
        close()
    }

    private static func openIndex(in directory: URL, configuration: Configuration) throws -> (DiskIndex, Bool) {
        let path = directory.appendingPathComponent("index.sqlite").path
        var recovered = false
        // A directory (or anything but a regular file) where the index or its WAL belongs is
        // damage like a corrupt file: SQLite could never open it.
        for suffix in ["", "-wal", "-shm"] {
            var info = stat()
            if lstat(path + suffix, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
                try moveAside(path, reason: "\(path + suffix) is not a regular file", configuration: configuration)
                recovered = true
                break
            }
        }
        // Create the database file owner-only; SQLite gives its WAL and shm files the same mode.
        let descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw BlobFiles.ioError("creating index", path) }
        Glibc.close(descriptor)

        // Opening reads the schema, the meta rows and the totals row, so damage to any of them
        // is found here and handled like a file that is not a database at all.
        let now = configuration.now().milliseconds
        let openIndex = { () throws -> (DiskIndex, wasDirty: Bool, lastSweep: Int64) in
            let index = try DiskIndex(path: path, durability: configuration.durability, busyTimeout: configuration.busyTimeout)
            let wasDirty = try index.meta("dirty") ?? 0 != 0
            let lastSweep = try index.meta("last_sweep") ?? 0
            _ = try index.totals()
            try index.connection.transaction { try index.setMeta("dirty", 1) }
            return (index, wasDirty, lastSweep)
        }
        var opened: (index: DiskIndex, wasDirty: Bool, lastSweep: Int64)
        do {
            opened = try openIndex()
        } catch let error as StorageError where error.isDatabaseCorruption {
            try moveAside(path, reason: "\(error)", configuration: configuration)
            opened = try openIndex()
            recovered = true
        } catch let error as ForeignIndexError {
            try moveAside(path, reason: error.reason, configuration: configuration)
            opened = try openIndex()
            recovered = true
        }

        // A store that was not closed cleanly (or not swept for a day) sweeps in the background.
        let needsSweep = recovered || opened.wasDirty || now - opened.lastSweep > 86_400_000
        return (opened.index, needsSweep)
    }

    private static func moveAside(_ path: String, reason: String, configuration: Configuration) throws {
        let suffix = ".corrupt-\(configuration.now().milliseconds)"
        configuration.logHandler?("index \(path) is unusable (\(reason)); moving it aside as \(path + suffix) and starting empty")
        for extra in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + extra) {
            guard rename(path + extra, path + suffix + extra) == 0 else {
                throw BlobFiles.ioError("moving corrupt index aside", path + extra)
            }
        }
    }

    /// Flushes pending access times, checkpoints the WAL and closes the index. Later calls
    /// throw ``StorageError/closed``. Calling `close()` again does nothing.
    public func close() {
        state.withLock { state in
            guard let index = state.index else { return }
            try? Self.flushAccesses(&state, index: index)
            try? index.connection.transaction { try index.setMeta("dirty", 0) }
            try? index.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            index.connection.close()
            state.index = nil
        }
    }

    // MARK: - Reading

    /// The value stored for `key`, or `nil` when there is none, it expired, or its bytes are
    /// damaged (the damaged entry is then removed).
    ///
    /// - Complexity: One indexed lookup, plus one file read for a value stored in a file.
    public func value(forKey key: String) throws -> Data? {
        try dataWithEntryLocation(forKey: key)?.data
    }

    /// The value for `key` together with its expiration date.
    ///
    /// - Returns: `nil` on a miss, like ``data(forKey:)``.
    public func entry(forKey key: String) throws -> TierEntry? {
        try dataWithEntryLocation(forKey: key).map {
            TierEntry(data: $0.data, expirationDate: $0.location.expires.map(Date.init(milliseconds:)), metadata: $0.location.metadata)
        }
    }

    private func dataWithEntryLocation(forKey key: String) throws -> (data: Data, location: DiskIndex.Location)? {
        // A concurrent overwrite can replace the file between the lookup and the read; the
        // row check in `drop` notices and the read is tried again with the new row.
        for _ in 0..<3 {
            let now = configuration.now().milliseconds
            let lookup: DiskIndex.Location? = try withIndex { state in
                let index = try Self.liveIndex(state)
                guard let location = try index.location(forKey: key) else {
                    state.statistics.misses += 1
                    return nil
                }
                if let expires = location.expires, expires <= now {
                    let removed = try index.connection.transaction {
                        try index.deleteIfUnchanged(key: key, location: location)
                    }
                    if removed {
                        state.statistics.expirations += 1
                        if let file = location.file { files.remove(name: file) }
                    }
                    state.statistics.misses += 1
                    return nil
                }
                try Self.recordAccess(&state, index: index, key: key, now: now)
                return location
            }
            guard let location = lookup else { return nil }
            if Self.row(location, belongsTo: key), let data = try decode(location) {
                state.withLock { $0.statistics.hits += 1 }
                return (data, location)
            }
            if try drop(key: key, location: location) { return nil }
        }
        state.withLock { $0.statistics.misses += 1 }
        return nil
    }

    /// Whether the row found for `key` was written for that key: its `hash` column must be the
    /// key's digest. A damaged key column (or key index) would otherwise hand one key's value
    /// to another; the CRC covers only the value. The digest is recognised by its length, so
    /// rows written under another ``Configuration/keyHashing`` still match.
    static func row(_ location: DiskIndex.Location, belongsTo key: String) -> Bool {
        guard let hashing = KeyHashing.allCases.first(where: { $0.digestLength * 2 == location.hash.utf8.count }) else {
            return false
        }
        return hashing.hexDigest(key) == location.hash
    }

    /// The stored bytes behind `location`, checked and decoded; `nil` when they are damaged.
    private func decode(_ location: DiskIndex.Location) throws -> Data? {
        guard case .intact(let data) = try inspect(location) else { return nil }
        return data
    }

    /// Removes a damaged entry if the row is still the one that was read. Returns `false` when
    /// the row changed meanwhile (the caller reads again).
    ///
    /// - Parameter isRead: `true` when a read found the damage: it counts as a miss and is
    ///   logged. `verify(repair:)` passes `false`; its report lists the entry instead.
    func drop(key: String, location: DiskIndex.Location, isRead: Bool = true) throws -> Bool {
        let removed = try withIndex { state in
            let index = try Self.liveIndex(state)
            let removed = try index.connection.transaction { try index.deleteIfUnchanged(key: key, location: location) }
            if removed {
                state.statistics.corruptEntriesDropped += 1
                if isRead { state.statistics.misses += 1 }
                state.pendingAccesses[key] = nil
            }
            return removed
        }
        if removed, let file = location.file { files.remove(name: file) }
        if removed && isRead {
            configuration.logHandler?("dropped damaged entry for key of \(key.utf8.count) bytes")
        }
        return removed
    }

    /// Whether a live (unexpired) entry exists for `key`. Does not read the value or count as
    /// an access.
    public func containsValue(forKey key: String) throws -> Bool {
        let now = configuration.now().milliseconds
        return try withIndex { state in
            let index = try Self.liveIndex(state)
            guard let location = try index.location(forKey: key) else { return false }
            return location.expires.map { $0 > now } ?? true
        }
    }

    /// The index's record of `key` — sizes, encoding, dates, metadata — without reading the
    /// value, or `nil` when there is no live entry. Not counted as an access.
    public func attributes(forKey key: String) throws -> Attributes? {
        let now = configuration.now().milliseconds
        return try withIndex { state in
            let index = try Self.liveIndex(state)
            guard let (attributes, expires) = try index.attributes(forKey: key) else { return nil }
            if let expires, expires <= now { return nil }
            return attributes
        }
    }

    /// Every live key, in ascending order.
    ///
    /// - Complexity: O(*n*) in the number of entries.
    public func keys() throws -> [String] {
        let now = configuration.now().milliseconds
        return try withIndex { try Self.liveIndex($0).keys(now: now) }
    }

    /// Every live key that starts with `prefix`, in ascending order (a range scan of the key
    /// index, not a full scan).
    public func keys(withPrefix prefix: String) throws -> [String] {
        let now = configuration.now().milliseconds
        return try withIndex { try Self.liveIndex($0).keys(withPrefix: prefix, now: now) }
    }

    /// Stored bytes of all entries (after compression), as recorded in the index.
    public var totalSize: Int {
        (try? withIndex { try Self.liveIndex($0).totals().size }) ?? 0
    }

    /// Number of entries, as recorded in the index (expired entries count until removed).
    public var totalCount: Int {
        (try? withIndex { try Self.liveIndex($0).totals().count }) ?? 0
    }

    /// Counters since this store was opened, with the current totals.
    public var statistics: Statistics {
        state.withLock { state in
            var statistics = state.statistics
            if let totals = try? state.index?.totals() {
                statistics.totalCount = totals.count
                statistics.totalSize = totals.size
            }
            return statistics
        }
    }

    // MARK: - Writing

    /// Stores `data` for `key`, replacing any previous value.
    ///
    /// Hashing, compression and the checksum run before the lock is taken; a value that goes to
    /// a file is written to `tmp/` and renamed into place before its row is committed, so a
    /// crash at any point leaves either the old entry or the new one.
    ///
    /// - Parameters:
    ///   - data: The value; empty values are allowed.
    ///   - key: Any string, including empty, very long or path-like ones.
    ///   - expiry: When the entry expires; `nil` takes ``Configuration/defaultExpiry``.
    ///   - metadata: Small caller bytes kept in the index row (at most ``metadataLimit``).
    ///   - isCompressible: Pass `false` for already-compressed data (JPEG, PNG…) to skip gzip.
    /// - Throws: ``StorageError/invalidInput(_:)`` for a value larger than the size limit, an
    ///   invalid expiry or oversized metadata (the previous value stays); I/O or SQLite errors
    ///   (the store stays consistent and the previous value stays).
    public func setValue(
        _ data: Data, forKey key: String, expiry: Expiry? = nil, metadata: Data? = nil, isCompressible: Bool = true
    ) throws {
        let expiry = expiry ?? configuration.defaultExpiry
        guard expiry.isValid else { throw StorageError.invalidInput("expiry \(expiry) is not a finite time") }
        if let metadata, metadata.count > Self.metadataLimit {
            throw StorageError.invalidInput("metadata of \(metadata.count) bytes exceeds \(Self.metadataLimit) bytes")
        }

        // Work that needs no lock: encode, checksum, hash, write the blob.
        var stored = data
        var encoding = Encoding.raw
        if case .gzip(let level) = configuration.compression, isCompressible, !data.isEmpty {
            let packed = try Gzip.compress(data, level: level)
            if packed.count < data.count {
                stored = packed
                encoding = .gzip
            }
        }
        guard stored.count <= configuration.sizeLimit else {
            throw StorageError.invalidInput(
                "value of \(stored.count) stored bytes exceeds sizeLimit \(configuration.sizeLimit)")
        }
        let now = configuration.now()
        let nowMilliseconds = now.milliseconds
        let hash = configuration.keyHashing.hexDigest(key)
        let inline = stored.count < configuration.inlineThreshold
        let file = inline ? nil : BlobFiles.makeName(hash: hash)
        if let file { try files.write(stored, name: file) }

        var row = DiskIndex.Row(
            key: key, hash: hash, file: file, size: stored.count, originalSize: data.count, encoding: encoding,
            crc: CRC32.checksum(stored), created: nowMilliseconds, accessed: nowMilliseconds, sequence: 0,
            expires: expiry.expirationDate(from: now)?.milliseconds,
            inlineData: inline ? stored : nil, metadata: metadata)

        let obsolete: [String]
        do {
            obsolete = try withIndex { state in
                let index = try Self.liveIndex(state)
                state.sequence += 1
                row.sequence = state.sequence
                let obsolete = try index.connection.transaction {
                    try Self.flushAccesses(&state, index: index, inTransaction: true)
                    var obsolete: [String] = []
                    if case let previous?? = try index.file(forKey: key) { obsolete.append(previous) }
                    try index.write(row)
                    obsolete += try Self.evictIfNeeded(
                        &state, index: index, configuration: configuration, now: nowMilliseconds, keeping: key)
                    return obsolete
                }
                state.statistics.writes += 1
                state.pendingAccesses[key] = nil
                Self.checkpointIfDue(&state, index: index)
                return obsolete
            }
        } catch {
            if let file { files.remove(name: file) }
            throw error
        }
        for name in obsolete { files.remove(name: name) }
    }

    /// Removes the entry for `key`.
    ///
    /// - Returns: Whether an entry was removed.
    @discardableResult
    public func removeValue(forKey key: String) throws -> Bool {
        let removed: (existed: Bool, file: String?) = try withIndex { state in
            let index = try Self.liveIndex(state)
            state.pendingAccesses[key] = nil
            return try index.connection.transaction { try index.delete(key: key) }
        }
        if let file = removed.file { files.remove(name: file) }
        return removed.existed
    }

    /// Removes every entry.
    public func removeAll() throws {
        let removed: [String] = try withIndex { state in
            let index = try Self.liveIndex(state)
            state.pendingAccesses.removeAll()
            state.oldestPendingAccess = nil
            return try index.connection.transaction { try index.deleteAll().files }
        }
        for name in removed { files.remove(name: name) }
    }

    /// Removes every expired entry, in batches.
    ///
    /// - Returns: The number of entries removed.
    @discardableResult
    public func removeExpired() throws -> Int {
        let now = configuration.now().milliseconds
        var total = 0
        while true {
            let batch: (count: Int, files: [String]) = try withIndex { state in
                let index = try Self.liveIndex(state)
                let batch = try index.connection.transaction { try index.deleteExpired(now: now, limit: Self.batchSize) }
                state.statistics.expirations += batch.count
                return batch
            }
            for name in batch.files { files.remove(name: name) }
            total += batch.count
            if batch.count < Self.batchSize { return total }
        }
    }

    /// Removes expired entries, then least recently used ones, until the stored size is at or
    /// below `size` bytes.
    public func trim(toSize size: Int) throws {
        try trim(count: .max, size: max(0, size))
    }

    /// Removes expired entries, then least recently used ones, until at most `count` remain.
    public func trim(toCount count: Int) throws {
        try trim(count: max(0, count), size: .max)
    }

    private func trim(count: Int, size: Int) throws {
        let now = configuration.now().milliseconds
        let removed: [String] = try withIndex { state in
            let index = try Self.liveIndex(state)
            return try index.connection.transaction {
                try Self.flushAccesses(&state, index: index, inTransaction: true)
                return try Self.shrink(&state, index: index, now: now, toCount: count, toSize: size, keeping: nil)
            }
        }
        for name in removed { files.remove(name: name) }
    }

    // MARK: - Orphan sweep

    /// Deletes files in `tmp/` and unreferenced blobs older than `gracePeriod` seconds: what a
    /// crash between writing a file and committing (or after deleting) its row leaves behind.
    ///
    /// Runs by itself in the background after an unclean shutdown, at most daily otherwise.
    ///
    /// - Returns: The number of files removed.
    @discardableResult
    public func removeOrphanedFiles(olderThan gracePeriod: TimeInterval = DiskStore.sweepGracePeriod) throws -> Int {
        let cutoff = Date().addingTimeInterval(-gracePeriod)
        let manager = FileManager.default
        var removed = 0
        func isOld(_ path: String) -> Bool {
            guard let date = (try? manager.attributesOfItem(atPath: path))?[.modificationDate] as? Date else { return false }
            return date < cutoff
        }
        for name in (try? manager.contentsOfDirectory(atPath: files.tmpPath)) ?? [] {
            let path = files.tmpPath + "/" + name
            if isOld(path), (try? manager.removeItem(atPath: path)) != nil { removed += 1 }
        }
        let referenced = try withIndex { try Self.liveIndex($0).allFiles() }
        for shard in (try? manager.contentsOfDirectory(atPath: files.blobsPath)) ?? [] {
            let shardPath = files.blobsPath + "/" + shard
            for name in (try? manager.contentsOfDirectory(atPath: shardPath)) ?? [] {
                let relative = shard + "/" + name
                if !referenced.contains(relative), isOld(shardPath + "/" + name),
                   (try? manager.removeItem(atPath: shardPath + "/" + name)) != nil {
                    removed += 1
                }
            }
        }
        let now = configuration.now().milliseconds
        try withIndex { state in
            let index = try Self.liveIndex(state)
            try index.connection.transaction { try index.setMeta("last_sweep", now) }
        }
        return removed
    }

    private func sweepInBackground() {
        do {
            try removeOrphanedFiles()
        } catch let error as StorageError where error.code == .closed {
            return
        } catch {
            configuration.logHandler?("background sweep of \(directory.path) failed: \(error)")
        }
    }

    // MARK: - Locked helpers

    /// Runs `body` with the live index under the lock.
    ///
    /// When SQLite finds the index corrupt (a damaged page, a missing totals row), the index is
    /// emptied in place and `body` runs once more against the empty index: the entries are lost
    /// — a cache may lose entries, never return wrong ones — and the store keeps working. Their
    /// blob files become orphans for the sweep of the next open (the reset clears `last_sweep`).
    func withIndex<T>(_ body: (inout State) throws -> sending T) throws -> sending T {
        let configuration = configuration
        return try state.withLock { state in
            do {
                return try body(&state)
            } catch let error as StorageError where error.isDatabaseCorruption {
                try Self.resetCorruptIndex(&state, error: error, configuration: configuration)
                return try body(&state)
            }
        }
    }

    /// Replaces a corrupt index by an empty one, in place when SQLite can reset the file (so
    /// other processes on the directory see the same empty index), else by moving it aside.
    private static func resetCorruptIndex(
        _ state: inout State, error: StorageError, configuration: Configuration
    ) throws {
        let index = try liveIndex(state)
        let path = index.connection.path
        configuration.logHandler?("index \(path) is corrupt (\(error)); emptying it and starting over")
        index.connection.close()
        state.index = nil
        state.pendingAccesses.removeAll()
        state.oldestPendingAccess = nil
        state.statistics.indexResets += 1
        let open = { try DiskIndex(path: path, durability: configuration.durability, busyTimeout: configuration.busyTimeout) }
        var fresh: DiskIndex
        do {
            let connection = try SQLiteConnection(path: path, busyTimeout: configuration.busyTimeout)
            defer { connection.close() }
            try connection.resetDatabase()
            fresh = try open()
        } catch {
            try moveAside(path, reason: "\(error)", configuration: configuration)
            fresh = try open()
        }
        try fresh.connection.transaction { try fresh.setMeta("dirty", 1) }
        state.index = fresh
    }

    static func liveIndex(_ state: State) throws -> DiskIndex {
        guard let index = state.index else { throw StorageError.closed }
        return index
    }

    private static func recordAccess(_ state: inout State, index: DiskIndex, key: String, now: Int64) throws {
        state.pendingAccesses[key] = now
        if state.oldestPendingAccess == nil { state.oldestPendingAccess = now }
        let due = state.pendingAccesses.count >= accessFlushCount
            || now - (state.oldestPendingAccess ?? now) >= accessFlushDelay
        if due {
            // Best effort: if another process holds the write lock, keep the times for later.
            try? index.connection.transaction { try flushAccesses(&state, index: index, inTransaction: true) }
        }
    }

    /// Writes the buffered access times; inside the caller's transaction when `inTransaction`.
    private static func flushAccesses(_ state: inout State, index: DiskIndex, inTransaction: Bool = false) throws {
        guard !state.pendingAccesses.isEmpty else { return }
        let pending = state.pendingAccesses.sorted { $0.value < $1.value }
        let start = state.sequence
        let write = {
            var sequence = start
            for (key, accessed) in pending {
                sequence += 1
                try index.touch(key: key, accessed: accessed, sequence: sequence)
            }
            return sequence
        }
        state.sequence = inTransaction ? try write() : try index.connection.transaction(write)
        state.pendingAccesses.removeAll(keepingCapacity: true)
        state.oldestPendingAccess = nil
    }

    private static func evictIfNeeded(
        _ state: inout State, index: DiskIndex, configuration: Configuration, now: Int64, keeping key: String
    ) throws -> [String] {
        let totals = try index.totals()
        guard totals.count > configuration.countLimit || totals.size > configuration.sizeLimit else { return [] }
        let ratio = configuration.overflowTrimRatio
        let targetCount = totals.count > configuration.countLimit
            ? trimTarget(limit: configuration.countLimit, ratio: ratio) : configuration.countLimit
        let targetSize = totals.size > configuration.sizeLimit
            ? trimTarget(limit: configuration.sizeLimit, ratio: ratio) : configuration.sizeLimit
        return try shrink(&state, index: index, now: now, toCount: targetCount, toSize: targetSize, keeping: key)
    }

    /// Removes expired rows, then least recently used ones, until both totals are at or below
    /// their targets; returns the blob files to delete after the transaction commits.
    private static func shrink(
        _ state: inout State, index: DiskIndex, now: Int64, toCount targetCount: Int, toSize targetSize: Int,
        keeping key: String?
    ) throws -> [String] {
        var totals = try index.totals()
        var obsolete: [String] = []
        while totals.count > targetCount || totals.size > targetSize {
            let batch = try index.deleteExpired(now: now, limit: batchSize)
            state.statistics.expirations += batch.count
            obsolete += batch.files
            totals = try index.totals()
            if batch.count < batchSize { break }
        }
        while totals.count > targetCount || totals.size > targetSize {
            let rows = try index.leastRecentlyUsed(limit: batchSize, excluding: key ?? "")
            let candidates = key == nil ? rows : rows.filter { $0.key != key }
            guard !candidates.isEmpty else { break }
            for row in candidates {
                guard totals.count > targetCount || totals.size > targetSize else { break }
                let deleted = try index.delete(key: row.key)
                guard deleted.existed else { continue }
                if let file = deleted.file { obsolete.append(file) }
                state.pendingAccesses[row.key] = nil
                state.statistics.evictions += 1
                totals.count -= 1
                totals.size -= row.size
            }
        }
        return obsolete
    }

    private static func checkpointIfDue(_ state: inout State, index: DiskIndex) {
        state.writesSinceCheckpoint += 1
        guard state.writesSinceCheckpoint >= checkpointInterval else { return }
        state.writesSinceCheckpoint = 0
        // Readers in other connections may keep part of the WAL alive; that is not an error.
        try? index.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
