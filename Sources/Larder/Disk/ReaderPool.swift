import CSQLite
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The disk tier's read-only SQLite connections: a read borrows one with ``withReader(_:reportsContents:recover:)``,
/// so reads on different threads wait neither for each other nor for the writer (WAL mode).
///
/// Invariants: a reader is handed out only if it belongs to the current *generation* (a
/// ``retire()`` moves the generation on, so readers checked out before close on their return);
/// a reader is never opened in a vanished directory, and one whose directory was deleted never
/// answers with contents; at most ``idleLimit`` readers wait idle, besides one *parked* in each
/// *lane*; while lingering is paused (``withLingeringPaused(_:)``) no reader keeps a snapshot.
///
/// A reader may *linger*: keep its read transaction after a read, so the next read on it skips
/// `BEGIN` (see ``DiskIndexReader/startRead(lingering:now:)``); a *linger sweep* ends the
/// snapshots of idle readers ``lingerLimit`` after one came back lingering, and
/// ``endLingering()`` ends them before a write. Each thread parks its reader in a lane of its
/// own (one lock per lane, on cache lines of its own), so most reads take no lock in common.
///
/// Lock order: the writer's lock may be held while taking the pool's lock, the pool's lock
/// while taking a lane's lock, never the reverse.
final class ReaderPool: Sendable {
    /// Idle read connections kept besides the one parked in each lane; more are opened while
    /// more threads read at once.
    static let idleLimit = 4
    /// The longest a reader keeps one snapshot (seconds), and the delay after which idle
    /// readers end theirs.
    static let lingerLimit = 0.010
    /// How often a read looks at the directory, in nanoseconds: a read of a value stored inline
    /// would otherwise go on answering from a deleted index.
    static let directoryCheckInterval: UInt64 = 50_000_000

    /// What a read asks its caller to repair before it reads again.
    enum Recovery {
        /// The directory vanished, or `index.sqlite` is no longer the file the index was opened
        /// from: open the index again (creating the directory), then call ``indexOpened(_:)``.
        case directoryChanged
        /// SQLite found the index corrupt: reset it unless ``isRetired(since:)`` says another
        /// thread already did (ask under the writer's lock).
        case corruption(StorageError, generation: Int)
    }

    private let directoryPath: String
    private let indexPath: String
    private let busyTimeout: Duration
    private let countsLookups: Bool
    private let state: Locked<State>
    private let lanes: [Locked<Lane>]
    /// The generation, whether the pool is closed and whether lingering is paused
    /// (``Status``): written under the pool's lock, read by the lanes without it.
    private let status = Atomic<Int>(0)
    /// Whether a linger sweep is queued: a lingering reader is parked in a lane only then.
    private let isSweepScheduled = Atomic<Bool>(false)
    /// The lanes a reader was parked in, one bit each.
    private let usedLanes = Atomic<Int>(0)
    /// When a read last looked at the directory (``monotonicNanoseconds()``).
    private let lastDirectoryCheck = Atomic<UInt64>(0)
    /// The device and inode of the index file the readers open.
    private let indexIdentity: Locked<FileIdentity?>

    init(directory: String, indexPath: String, busyTimeout: Duration, countsLookups: Bool, indexIdentity: FileIdentity?) {
        directoryPath = directory
        self.indexPath = indexPath
        self.busyTimeout = busyTimeout
        self.countsLookups = countsLookups
        self.indexIdentity = Locked(indexIdentity)
        state = Locked(State(), spinsBeforeSleeping: true)
        lanes = (0..<laneCount).map { _ in Locked(Lane(), ownsCacheLines: true) }
    }

    /// Idle readers and the pool's generation. A retirement bumps `generation` (or sets
    /// `isClosed`), so a reader checked out before closes on its return.
    struct State {
        var idle: [PooledReader] = []
        var generation = 0
        /// Retirements under way (``retire(during:)``): a read that fails meanwhile may have
        /// seen the index emptied but not yet rebuilt.
        var retirementsInProgress = 0
        var isClosed = false
        /// Pauses under way: no reader keeps a snapshot meanwhile.
        var lingerPauses = 0
        /// How long after a reader came back lingering the sweep runs (seconds).
        var sweepDelay = ReaderPool.lingerLimit
    }

    /// One thread's parked reader.
    private struct Lane {
        var parked: PooledReader?
        var isUsed = false
    }

    /// The pool's status word.
    private struct Status {
        var generation: Int
        var isClosed: Bool
        var isLingeringPaused: Bool

        init(_ word: Int) {
            generation = word >> 2
            isClosed = word & 2 != 0
            isLingeringPaused = word & 1 != 0
        }

        init(_ state: State) {
            generation = state.generation
            isClosed = state.isClosed
            isLingeringPaused = state.lingerPauses > 0
        }

        var word: Int { generation << 2 | (isClosed ? 2 : 0) | (isLingeringPaused ? 1 : 0) }
    }

    // MARK: - Reading

    /// Runs `body` on a reader, outside the writer's lock.
    ///
    /// A result for which `reportsContents` is true is returned only if the reader's directory
    /// still exists. When the directory vanished, or SQLite finds the index corrupt, the pool
    /// asks `recover` to repair it and reads again on a fresh reader; an error from a read that
    /// a retirement overtook is not the caller's either: `body` runs again.
    func withReader<T>(
        _ body: (DiskIndexReader) throws -> T, reportsContents: (T) -> Bool, recover: (Recovery) throws -> Void
    ) throws -> T {
        try checkDirectoryIfDue(recover)
        let lane = currentLaneNumber()
        var attempt = 0
        var recreations = 0
        while true {
            var (idle, status) = takeParked(lane: lane)
            if idle == nil {
                let thread = currentThreadIdentity()
                (idle, status) = state.withLock { state in (state.takeIdle(for: thread), Status(state)) }
            }
            let generation = status.generation
            guard !status.isClosed else { throw StorageError.closed }
            do {
                guard let pooled = try idle ?? openReader(generation: generation) else {
                    try recreateDirectory(&recreations, recover)
                    continue
                }
                pooled.reader.startRead(lingering: !status.isLingeringPaused, now: CoarseClock.now())
                let result: T
                do {
                    result = try body(pooled.reader)
                } catch {
                    // A failed read leaves no snapshot behind.
                    pooled.reader.endLingering()
                    checkIn(pooled, lane: lane)
                    throw error
                }
                // A reader whose directory was deleted still reads the unlinked index. A miss
                // needs no look (a vanished directory reads as empty).
                if reportsContents(result), pooled.isDirectoryGone {
                    pooled.reader.endLingering()  // Dropped, not checked in: it closes here.
                    try recreateDirectory(&recreations, recover)
                    continue
                }
                checkIn(pooled, lane: lane)
                return result
            } catch let error as StorageError where attempt < 2 {
                attempt += 1
                let isRetired = hasRetiredSince(generation)
                if error.isDatabaseCorruption && attempt == 1 {
                    try recover(.corruption(error, generation: generation))
                } else if !isRetired {
                    throw error
                } // Else the index was reset under this read: read again on a new reader.
            }
        }
    }

    /// Whether the pool was retired since `generation` (call under the writer's lock).
    func isRetired(since generation: Int) -> Bool {
        state.withLock { $0.generation } != generation
    }

    /// Records the identity of the index file just opened, the one readers open from now on.
    func indexOpened(_ identity: FileIdentity?) {
        indexIdentity.withLock { $0 = identity }
        lastDirectoryCheck.store(Self.monotonicNanoseconds(), ordering: .relaxed)
    }

    /// Looks at the directory when the last look is older than ``directoryCheckInterval``.
    private func checkDirectoryIfDue(_ recover: (Recovery) throws -> Void) throws {
        let now = Self.monotonicNanoseconds()
        let last = lastDirectoryCheck.load(ordering: .relaxed)
        guard now &- last >= Self.directoryCheckInterval else { return }
        // One thread looks; the others go on.
        guard lastDirectoryCheck.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        let identity = indexIdentity.withLock { $0 }
        guard FileIdentity(path: indexPath) != identity else { return }
        try recover(.directoryChanged)
    }

    /// Asks for the directory to be created again. `recreations` counts the calls of one read:
    /// a directory deleted again and again under it ends in an error rather than a loop.
    private func recreateDirectory(_ recreations: inout Int, _ recover: (Recovery) throws -> Void) throws {
        recreations += 1
        guard recreations <= 4 else {
            throw StorageError.io(
                operation: "reading", path: directoryPath, reason: "the directory was deleted again at every try",
                cause: POSIXError(.ENOENT))
        }
        try recover(.directoryChanged)
    }

    /// A new reader of `generation`, or `nil` when the directory vanished or `index.sqlite` is
    /// no longer the file the index was opened from: a reader is never opened (and so never
    /// creates an index) in a directory deleted or replaced under the pool.
    private func openReader(generation: Int) throws -> PooledReader? {
        let descriptor = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            throw StorageError.io(
                operation: "opening directory", path: directoryPath, reason: String(cString: strerror(code)),
                cause: POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
        }
        guard FileIdentity(path: indexPath) == indexIdentity.withLock({ $0 }) else {
            closeDescriptor(descriptor)
            return nil
        }
        do {
            let reader = try DiskIndexReader(path: indexPath, busyTimeout: busyTimeout, countsLookups: countsLookups)
            return PooledReader(
                reader: reader, generation: generation, thread: currentThreadIdentity(), directoryDescriptor: descriptor)
        } catch let error as StorageError where error.sqliteResultCode.map({ $0 & 0xFF == SQLITE_CANTOPEN }) ?? false {
            // The directory went between the look above and SQLite's open.
            closeDescriptor(descriptor)
            return nil
        } catch {
            closeDescriptor(descriptor)
            throw error
        }
    }

    /// Whether the pool was retired since `generation`, waiting for a retirement under way
    /// to finish first. Only a failed read asks, so the wait costs nothing on the read path.
    private func hasRetiredSince(_ generation: Int) -> Bool {
        while true {
            let (current, retiring) = state.withLock { ($0.generation, $0.retirementsInProgress > 0) }
            if current != generation { return true }
            if !retiring { return false }
            usleep(1_000)
        }
    }

    // MARK: - Lanes

    /// Takes the reader parked in lane `lane`, if it belongs to the current generation.
    private func takeParked(lane: Int) -> (PooledReader?, Status) {
        let parked = lanes[lane].withLock { lane in
            let parked = lane.parked
            lane.parked = nil
            return parked
        }
        let status = Status(status.load(ordering: .acquiring))
        guard let parked, parked.generation == status.generation else { return (nil, status) }
        return (parked, status)
    }

    /// Parks `pooled` in lane `number` when it may stay there; returns whether it did.
    private func park(_ pooled: PooledReader, lane number: Int) -> Bool {
        lanes[number].withLock { lane in
            if !lane.isUsed {
                lane.isUsed = true
                usedLanes.bitwiseOr(1 << number, ordering: .sequentiallyConsistent)
            }
            // Read under the lane's lock, after the lane is marked used: a pause of lingering
            // sets the status, then ends the snapshots of the readers parked in each used lane
            // under its lock (each side's write comes before its read, so one sees the other's).
            let status = Status(status.load(ordering: .sequentiallyConsistent))
            guard lane.parked == nil, !status.isClosed, status.generation == pooled.generation,
                  !pooled.reader.isLingering
                    || (!status.isLingeringPaused && isSweepScheduled.load(ordering: .sequentiallyConsistent))
            else { return false }
            lane.parked = pooled
            return true
        }
    }

    /// Puts `pooled` back: in the lane, else in the pool unless the pool moved on or is full.
    private func checkIn(_ pooled: PooledReader, lane: Int) {
        if park(pooled, lane: lane) { return }
        switch state.withLock({ $0.checkIn(pooled) }) {
        case .none:
            break
        case .sweep(let delay):
            if !isSweepScheduled.exchange(true, ordering: .acquiringAndReleasing) { scheduleLingerSweep(after: delay) }
        case .endThenReturn:
            // Lingering is paused: end this snapshot before the reader goes back.
            pooled.reader.endLingering()
            if !park(pooled, lane: lane) { state.withLock { _ = $0.checkIn(pooled) } }
        }
    }

    private func forEachUsedLane(_ body: (inout Lane) -> Void) {
        var used = usedLanes.load(ordering: .sequentiallyConsistent)
        while used != 0 {
            let lane = used.trailingZeroBitCount
            used &= used - 1
            lanes[lane].withLock { body(&$0) }
        }
    }

    // MARK: - Lingering

    /// Queues a linger sweep on ``lingerSweepQueue`` to run after `delay` seconds. The queued
    /// sweep holds the pool until it ran, then lets it go on Larder's I/O queue: the last
    /// reference to a pool can be the last to readers of a closed store, and closing those
    /// must not hold up other pools' sweeps.
    private func scheduleLingerSweep(after delay: Double) {
        let held = HeldPool(self)
        lingerSweepQueue.asyncAfter(deadline: .now() + delay) {
            held.pool?.sweepLingering()
            larderIOQueue.async { held.pool = nil }
        }
    }

    /// The linger sweep: ends the snapshots of idle and parked readers.
    func sweepLingering() {
        state.withLockUnchecked { state in
            isSweepScheduled.store(false, ordering: .sequentiallyConsistent)
            endIdleLingering(&state)
        }
    }

    /// Ends the snapshots of idle and parked readers, so that they (stale once the writer
    /// commits) do not keep SQLite from starting the log over. Call before a write.
    func endLingering() {
        state.withLockUnchecked { endIdleLingering(&$0) }
    }

    private func endIdleLingering(_ state: inout State) {
        state.endIdleLingering()
        forEachUsedLane { lane in
            if let parked = lane.parked, parked.reader.isLingering { parked.reader.endLingering() }
        }
    }

    /// Runs `body` (a checkpoint that waits for readers) while no reader keeps a snapshot:
    /// idle readers end theirs now, readers in use when they come back, and none begins one
    /// meanwhile.
    func withLingeringPaused<T>(_ body: () throws -> T) rethrows -> T {
        state.withLockUnchecked { state in
            state.lingerPauses += 1
            publishStatus(state)
            endIdleLingering(&state)
        }
        defer {
            state.withLockUnchecked { state in
                state.lingerPauses -= 1
                publishStatus(state)
            }
        }
        return try body()
    }

    /// Runs a `TRUNCATE` checkpoint on the writer's `connection` while no reader of this pool
    /// keeps a snapshot (a checkpoint that starts the log over waits for readers). Best effort:
    /// a failure leaves the log as it is.
    func truncateLog(of connection: SQLiteConnection) {
        _ = withLingeringPaused { connection.checkpointTruncating() }
    }

    /// How long after a reader came back lingering the sweep runs (seconds; tests lengthen it).
    var sweepDelay: Double {
        get { state.withLock { $0.sweepDelay } }
        set { state.withLock { $0.sweepDelay = newValue } }
    }

    /// How many idle or parked readers keep a snapshot now.
    var lingeringReaderCount: Int {
        var count = state.withLock { state in state.idle.count { $0.reader.isLingering } }
        forEachUsedLane { lane in if lane.parked?.reader.isLingering == true { count += 1 } }
        return count
    }

    /// Idle and parked readers, and whether the pool is closed.
    var census: (idle: Int, parked: Int, isClosed: Bool) {
        var parked = 0
        let (idle, isClosed) = state.withLock { ($0.idle.count, $0.isClosed) }
        forEachUsedLane { lane in if lane.parked != nil { parked += 1 } }
        return (idle, parked, isClosed)
    }

    // MARK: - Retiring

    /// Empties the pool and makes every checked-out reader close on its return (the index was
    /// replaced); with `closing`, for good.
    func retire(closing: Bool = false) {
        let retired = state.withLockUnchecked { state in
            state.generation += 1
            if closing { state.isClosed = true }
            publishStatus(state)
            var retired = state.idle
            state.idle = []
            forEachUsedLane { lane in
                if let parked = lane.parked { retired.append(parked) }
                lane.parked = nil
            }
            return retired
        }
        _ = retired  // Released here, outside the pool's lock.
    }

    /// Retires the pool, runs `body` (a reset of the index), and moves the generation on again
    /// once it is done: readers that open a connection meanwhile can find the index emptied and
    /// not yet rebuilt, and read again.
    func retire<T>(during body: () throws -> T) rethrows -> T {
        retire()
        state.withLock { $0.retirementsInProgress += 1 }
        defer {
            state.withLockUnchecked { state in
                state.retirementsInProgress -= 1
                state.generation += 1
                publishStatus(state)
            }
        }
        return try body()
    }

    private func publishStatus(_ state: State) {
        status.store(Status(state).word, ordering: .sequentiallyConsistent)
    }

    static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}

extension ReaderPool.State {
    /// An idle reader for `thread`: the one it used last if that one is idle, else the one
    /// returned last. A connection that stays with one thread frees the pages it cached on the
    /// thread that allocated them (SQLite frees its whole cache after every commit the
    /// connection sees): moved between threads, those frees wait on the other thread's
    /// allocator lock.
    mutating func takeIdle(for thread: UInt) -> PooledReader? {
        var position = idle.count - 1
        while position >= 0, idle[position].lastThread != thread { position -= 1 }
        // The usual case, one thread reading, finds its reader last: no elements move.
        let pooled = position >= 0 && position < idle.count - 1 ? idle.remove(at: position) : idle.popLast()
        pooled?.lastThread = thread
        return pooled
    }

    /// Puts `pooled` back unless the pool moved on or is full (a reader not kept closes when
    /// the caller releases it, outside the lock), or asks for its snapshot to end first.
    mutating func checkIn(_ pooled: PooledReader) -> LingerFollowUp {
        guard !isClosed, generation == pooled.generation, idle.count < ReaderPool.idleLimit else { return .none }
        guard pooled.reader.isLingering else {
            idle.append(pooled)
            return .none
        }
        if lingerPauses > 0 { return .endThenReturn }
        idle.append(pooled)
        return .sweep(after: sweepDelay)
    }

    /// Ends the snapshots of the idle readers.
    mutating func endIdleLingering() {
        for pooled in idle where pooled.reader.isLingering { pooled.reader.endLingering() }
    }
}

/// What a reader's return asks for beyond it (see ``ReaderPool/State/checkIn(_:)``).
enum LingerFollowUp: Equatable {
    case none
    /// Queue a linger sweep to run after this many seconds, unless one is queued.
    case sweep(after: Double)
    /// End the reader's snapshot, then return it again: lingering is paused.
    case endThenReturn
}

/// A read connection of a ``ReaderPool``.
///
/// `@unchecked Sendable`: it moves between threads only through the pool's locks, and one
/// thread at a time uses it (the one that checked it out).
final class PooledReader: @unchecked Sendable {
    let reader: DiskIndexReader
    /// The pool generation it was opened in; a reader of an older one is never reused.
    let generation: Int
    /// The thread that last checked it out; read and written under the pool's lock.
    @exclusivity(unchecked) var lastThread: UInt
    /// A descriptor of the directory, opened just before the connection: once the directory
    /// is deleted its link count is 0 (``isDirectoryGone``), while the connection would go on
    /// answering from the deleted index it still has open. A descriptor of the directory, not
    /// of `index.sqlite`: closing a descriptor of the database would drop the POSIX locks
    /// SQLite holds on it through its own.
    private let directoryDescriptor: Int32

    init(reader: DiskIndexReader, generation: Int, thread: UInt, directoryDescriptor: Int32) {
        self.reader = reader
        self.generation = generation
        self.lastThread = thread
        self.directoryDescriptor = directoryDescriptor
    }

    deinit {
        closeDescriptor(directoryDescriptor)
    }

    /// Whether the directory this reader's index was in has been deleted (one `fstat`).
    var isDirectoryGone: Bool {
        var info = stat()
        return fstat(directoryDescriptor, &info) != 0 || info.st_nlink == 0
    }
}

/// Where idle readers' snapshots are ended: a serial queue of its own, which gets a thread even
/// while Larder's I/O queue is backed up with drains of access logs (a late sweep would keep
/// other processes' checkpoints waiting).
let lingerSweepQueue = DispatchQueue(label: "larder.linger-sweep", qos: .userInitiated)

/// A pool held by a queued sweep, so that the sweep can choose the queue its reference ends
/// on. Touched by the sweep's block, then by the block it queues, one after the other.
private final class HeldPool: @unchecked Sendable {
    var pool: ReaderPool?
    init(_ pool: ReaderPool) { self.pool = pool }
}

/// The calling thread, as a number (``ReaderPool/State/takeIdle(for:)``).
func currentThreadIdentity() -> UInt {
    #if canImport(Darwin)
    UInt(bitPattern: pthread_self())
    #else
    UInt(pthread_self())
    #endif
}

private let laneKey: pthread_key_t = {
    var key = pthread_key_t()
    // Fails only when the process ran out of keys: `pthread_getspecific` then returns nil and
    // each call takes the next lane in turn (correct, only slower).
    _ = pthread_key_create(&key, nil)
    return key
}()
private let nextLaneNumber = Atomic<Int>(0)

/// Lanes per ``ReaderPool`` and per ``AccessLog`` (a power of two).
let laneCount = 8

/// The calling thread's lane number, for ``ReaderPool`` and ``AccessLog``: threads take numbers
/// in turn as they first read, so the first ``laneCount`` threads of a process read in lanes of
/// their own.
func currentLaneNumber() -> Int {
    if let value = pthread_getspecific(laneKey) { return Int(bitPattern: value) - 1 }
    let number = nextLaneNumber.wrappingAdd(1, ordering: .relaxed).oldValue & (laneCount - 1)
    _ = pthread_setspecific(laneKey, UnsafeRawPointer(bitPattern: number + 1))
    return number
}

/// Closes a file descriptor (from where `close` would name another method).
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
