public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Opening, closing, and recovery from a corrupt index.
extension DiskStore {
    /// Opens the store in `directory` with a configuration edited by `configure`.
    public convenience init(directory: URL, _ configure: (inout Configuration) -> Void) throws {
        var configuration = Configuration()
        configure(&configuration)
        try self.init(directory: directory, configuration: configuration)
    }

    /// Opens (creating, or moving aside when damaged) the index in `directory`; returns it and
    /// whether the directory needs the orphan sweep. `directoriesAreNew`: `blobs/` and `tmp/`
    /// were created just now, so no file can be an orphan: the sweep is recorded as done.
    static func openIndex(
        in directory: URL, configuration: Configuration, directoriesAreNew: Bool, writer: Int64
    ) throws -> (DiskIndex, Bool) {
        let path = directory.appendingPathComponent("index.sqlite").path
        var recovered = false
        // A directory (or anything but a regular file) where the index or its WAL belongs is
        // damage like a corrupt file: SQLite could never open it.
        for suffix in ["", "-wal", "-shm"] {
            var info = stat()
            if lstat(path + suffix, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
                try Self.moveAside(path, reason: "\(path + suffix) is not a regular file", configuration: configuration)
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
            let index = try DiskIndex(
                path: path, durability: configuration.durability, busyTimeout: configuration.busyTimeout,
                walLimit: DiskIndex.walLimit(forSizeLimit: configuration.sizeLimit), writer: writer,
                retainedChanges: DiskIndex.retainedChanges(forSizeLimit: configuration.sizeLimit))
            let wasDirty = try index.meta("dirty") ?? 0 != 0
            let lastSweep = try index.meta("last_sweep") ?? 0
            _ = try index.totals()
            try index.connection.transaction {
                // After an unclean shutdown, count the totals again from the rows: the triggers
                // keep them exact, but damage a crash or a bad disk left behind (a flipped size
                // column, a flipped totals row) would otherwise skew them for good. One scan,
                // only on this path.
                if wasDirty { try index.recountTotals() }
                try index.setMeta("dirty", 1)
                if directoriesAreNew { try index.setMeta("last_sweep", now) }
            }
            return (index, wasDirty, lastSweep)
        }
        var opened: (index: DiskIndex, wasDirty: Bool, lastSweep: Int64)
        do {
            opened = try openIndex()
        } catch let error as StorageError where error.isDatabaseCorruption {
            try Self.moveAside(path, reason: "\(error)", configuration: configuration)
            opened = try openIndex()
            recovered = true
        } catch let error as ForeignIndexError {
            try Self.moveAside(path, reason: error.reason, configuration: configuration)
            opened = try openIndex()
            recovered = true
        }

        // A store that was not closed cleanly (or not swept for a day) sweeps in the background.
        let needsSweep = !directoriesAreNew && (recovered || opened.wasDirty || now - opened.lastSweep > 86_400_000)
        return (opened.index, needsSweep)
    }

    static func moveAside(_ path: String, reason: String, configuration: Configuration) throws {
        let suffix = ".corrupt-\(configuration.now().milliseconds)"
        configuration.logHandler?("index \(path) is unusable (\(reason)); moving it aside as \(path + suffix) and starting empty")
        for extra in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + extra) {
            guard rename(path + extra, path + suffix + extra) == 0 else {
                throw BlobFiles.ioError("moving corrupt index aside", path + extra)
            }
        }
    }

    /// Ranks the logged reads, checkpoints the WAL and closes the index and every pooled read
    /// connection (one still in use closes when its read ends). Later calls throw
    /// ``StorageError/closed``. Calling `close()` again does nothing.
    public func close() {
        state.withLock { state in
            guard let index = state.index else { return }
            readers.retire(closing: true)
            _ = try? withWriteTransaction(index) { _ in }
            try? index.connection.transaction { try index.setMeta("dirty", 0) }
            // No background pass may hold the checkpoint lock now: SQLite does not wait for one.
            index.connection.logMonitor?.retire()
            try? index.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            index.connection.close()
            state.index = nil
            state.needsReopen = false
        }
        if place.isCounted.exchange(false, ordering: .relaxed) {
            Self.openStores.withLock { stores in
                stores[canonicalDirectory, default: 1] -= 1
                if stores[canonicalDirectory] == 0 { stores[canonicalDirectory] = nil }
            }
        }
    }

    /// Replaces a corrupt index by an empty one, in place when SQLite can reset the file (so
    /// other processes on the directory see the same empty index), else by moving it aside.
    ///
    /// Whichever connection found the damage — the writer's or a pooled reader's — the pool is
    /// emptied and the logged reads are forgotten. Call with the writer's lock held.
    func resetCorruptIndex(_ state: inout State, error: StorageError) throws {
        let configuration = configuration
        let index = try Self.liveIndex(state)
        let path = index.connection.path
        configuration.logHandler?("index \(path) is corrupt (\(error)); emptying it and starting over")
        // Readers that open a connection during the reset can find the index emptied and not
        // yet rebuilt: they read again once it is done.
        try replacingIndex { try replaceCorruptIndex(&state, index: index) }
    }

    private func replaceCorruptIndex(_ state: inout State, index: DiskIndex) throws {
        let configuration = configuration
        let path = index.connection.path
        index.connection.close()
        state.index = nil
        state.statistics.indexResets += 1
        let open = { [writerID] in try DiskIndex(
                path: path, durability: configuration.durability, busyTimeout: configuration.busyTimeout,
                walLimit: DiskIndex.walLimit(forSizeLimit: configuration.sizeLimit), writer: writerID,
                retainedChanges: DiskIndex.retainedChanges(forSizeLimit: configuration.sizeLimit)) }
        var fresh: DiskIndex
        do {
            let connection = try SQLiteConnection(path: path, busyTimeout: configuration.busyTimeout)
            defer { connection.close() }
            try connection.resetDatabase()
            fresh = try open()
        } catch {
            try Self.moveAside(path, reason: "\(error)", configuration: configuration)
            fresh = try open()
        }
        try fresh.connection.transaction { try fresh.setMeta("dirty", 1) }
        state.index = fresh
        setIndexIdentity(FileIdentity(path: path), in: &state)
    }
}
