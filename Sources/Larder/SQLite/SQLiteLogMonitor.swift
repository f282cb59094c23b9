import CSQLite
import Dispatch
import Synchronization

/// Decides when a connection's write-ahead log is copied into the database, in place of
/// SQLite's `wal_autocheckpoint` (which, once the log holds `threshold` frames, copies all of
/// it on the committing thread: a write of every page the log holds and two `fdatasync`s, about
/// a third of the time of a run of small writes on this project's machines).
///
/// Installed with `sqlite3_wal_hook`, it sees the log's frame count after each commit:
/// - every `threshold / 8` frames past what is known to be copied, a passive checkpoint runs
///   on `queue`, on a connection of its own: writers and readers do not wait for it (for a
///   bound of at least ``smallestBackgroundThreshold`` frames; a smaller log is copied as
///   SQLite would);
/// - at `threshold` frames the committing thread checkpoints, as SQLite would, so the log keeps
///   its bound however far behind the background is. The background having copied most of the
///   log, what is left is short; then the next write starts the log over. Should a background
///   pass still be running when the log is a quarter past its bound, the committing thread
///   waits for it and then copies the rest.
///
/// `@unchecked Sendable`: its state is atomics and a lock.
final class SQLiteLogMonitor: @unchecked Sendable {
    /// Frames at which the committing thread checkpoints itself.
    let threshold: Atomic<Int>
    /// Frames known to be copied into the database (by the last background pass).
    let copied = Atomic<Int>(0)
    /// Whether a background pass is queued or running.
    let isPending = Atomic<Bool>(false)
    /// The log's frames after the last commit.
    let frames = Atomic<Int>(0)
    /// Background passes that ran (for tests).
    let backgroundPasses = Atomic<Int>(0)
    private let path: String
    private let queue: DispatchQueue
    /// The background connection, opened on first use; `nil` and retired once the monitored
    /// connection closed. Held for the whole of a background pass.
    private let background = Locked<(connection: SQLiteConnection?, isRetired: Bool)>((nil, false))

    /// The smallest bound (in frames) whose log is copied in the background.
    static let smallestBackgroundThreshold = 512

    init(threshold: Int, path: String, queue: DispatchQueue) {
        self.threshold = Atomic(threshold)
        self.path = path
        self.queue = queue
    }

    func setThreshold(_ frames: Int) {
        threshold.store(frames, ordering: .relaxed)
    }

    /// Whether the last commit left the log a quarter past its bound: checkpoints have not been
    /// able to start it over (readers keep old snapshots alive).
    var isOverBound: Bool {
        let threshold = threshold.load(ordering: .relaxed)
        return frames.load(ordering: .relaxed) >= threshold + threshold / 4
    }

    /// After a commit left `frames` frames in the log of `database` on `handle`.
    fileprivate func committed(frames: Int, handle: OpaquePointer?, database: UnsafePointer<CChar>?) {
        self.frames.store(frames, ordering: .relaxed)
        let threshold = threshold.load(ordering: .relaxed)
        if frames >= threshold {
            let code = sqlite3_wal_checkpoint_v2(handle, database, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            if code == SQLITE_BUSY, frames >= threshold + threshold / 4 {
                background.withLock { _ in }  // the end of a background pass under way
                sqlite3_wal_checkpoint_v2(handle, database, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            }
            return
        }
        var copied = copied.load(ordering: .relaxed)
        if frames < copied {  // the log started over
            copied = 0
            self.copied.store(0, ordering: .relaxed)
        }
        // Not for a small log (a bound under 512 frames, 1 MiB at 2 KiB pages): copying it
        // costs the writer little, and passes that often would add two `fdatasync`s every few
        // writes for every store on the machine.
        guard threshold >= Self.smallestBackgroundThreshold, frames >= copied + threshold / 8,
              !isPending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { self.checkpointInBackground() }
    }

    /// One passive checkpoint on the background connection.
    private func checkpointInBackground() {
        let frames: Int? = background.withLock { background in
            guard !background.isRetired else { return nil }
            do {
                let connection: SQLiteConnection
                if let open = background.connection {
                    connection = open
                } else {
                    connection = try SQLiteConnection(path: path, busyTimeout: .seconds(1))
                    // A connection finds the log on its first read (before that, SQLite 3.40's
                    // checkpoint call does nothing and reports success).
                    _ = try connection.scalarInt64("PRAGMA schema_version")
                    background.connection = connection
                }
                return try connection.checkpointPassively()
            } catch let error as StorageError where (error.sqliteResultCode ?? 0) & 0xFF == SQLITE_BUSY {
                return nil  // another checkpoint (this store's writer, another process) is under way
            } catch {
                // A database that went away: the next pass opens a new connection.
                background.connection?.close()
                background.connection = nil
                return nil
            }
        }
        if let frames { copied.store(frames, ordering: .relaxed) }
        backgroundPasses.add(1, ordering: .relaxed)
        isPending.store(false, ordering: .releasing)
    }

    /// Whether a background pass is queued or running.
    var hasPassPending: Bool { isPending.load(ordering: .acquiring) }

    /// Returns once a background pass under way (if any) has ended.
    func waitForPassUnderWay() {
        background.withLock { _ in }
    }

    /// Closes the background connection (waiting for a pass under way) and runs no more passes.
    func retire() {
        background.withLock { background in
            background.connection?.close()
            background.connection = nil
            background.isRetired = true
        }
    }
}

/// `sqlite3_wal_hook`'s callback: the context is the connection's monitor, which the
/// connection keeps alive for as long as the hook is installed.
private func logMonitorHook(
    context: UnsafeMutableRawPointer?, handle: OpaquePointer?, database: UnsafePointer<CChar>?, frames: Int32
) -> Int32 {
    guard let context else { return SQLITE_OK }
    Unmanaged<SQLiteLogMonitor>.fromOpaque(context).takeUnretainedValue()
        .committed(frames: Int(frames), handle: handle, database: database)
    return SQLITE_OK
}

extension SQLiteConnection {
    /// Installs `monitor` as this connection's log hook (replacing `wal_autocheckpoint`); the
    /// connection keeps it, and retires it when it closes.
    func installLogMonitor(_ monitor: SQLiteLogMonitor) {
        logMonitor = monitor
        sqlite3_wal_hook(handle, logMonitorHook, Unmanaged.passUnretained(monitor).toOpaque())
    }

    /// A `TRUNCATE` checkpoint: copies the whole log into the database and starts it over,
    /// waiting up to the busy timeout for readers of older snapshots. SQLite does not wait for
    /// another checkpoint holding the checkpoint lock (a background pass of ``logMonitor``, which
    /// a loaded machine can stall for seconds): it answers busy at once; then this waits for
    /// the pass and tries again. Best effort: returns whether the log was started over.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/wal_checkpoint_v2.html>
    @discardableResult
    func checkpointTruncating() -> Bool {
        for _ in 0..<3 {
            let code = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
            guard code == SQLITE_BUSY, let logMonitor, logMonitor.hasPassPending else { return code == SQLITE_OK }
            logMonitor.waitForPassUnderWay()
        }
        return false
    }

    /// A passive checkpoint of the log (copies what no reader still needs, waits for no one);
    /// returns how many of the log's frames are now copied into the database.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/wal_checkpoint_v2.html>
    func checkpointPassively() throws -> Int {
        var logFrames: Int32 = 0
        var copiedFrames: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &copiedFrames)
        guard code == SQLITE_OK else { throw error(code, sql: "checkpoint (passive)") }
        return Int(copiedFrames)
    }
}
