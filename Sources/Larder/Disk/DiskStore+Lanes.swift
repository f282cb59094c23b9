import Foundation
import Synchronization

/// One thread's corner of a ``DiskStore``'s reader pool: the read connection the thread used
/// last, and the reads it logged since the lanes were last gathered into the pool's
/// ``DiskStore/ReadLog``. Each lane has a lock of its own, on cache lines of its own, so two
/// threads reading one store take no lock in common on most reads: a lock they both took on
/// every read would move its cache line between their cores, and a thread descheduled while
/// holding it would keep the other waiting.
struct ReadLane {
    /// The connection parked here between this lane's reads (of any pool generation: a
    /// reader of an older one is dropped when it is taken).
    var parked: PooledReader?
    /// Hits logged here, in the order they happened, each with its ticket
    /// (``DiskStore/readTickets``): the tickets of all lanes give their reads one order.
    var reads: [DiskIndex.Access] = []
    var tickets: [UInt64] = []
    /// Counted here, never moved (see ``DiskStore/hitAndMissCounts()``).
    var hits = 0
    var misses = 0
    /// Whether the lane's bit is set in ``DiskStore/usedLanes``.
    var isUsed = false

    /// Reads a lane holds before its thread gathers every lane into the log.
    static let limit = 256
    /// Lanes per store (a power of two); threads take them in turn (``currentLaneNumber()``).
    static let count = 8
}

/// What the pool's ``DiskStore/poolStatus`` word says, read without the pool's lock.
struct PoolStatus {
    var generation: Int
    var isClosed: Bool
    var isLingeringPaused: Bool

    init(_ word: Int) {
        generation = word >> 2
        isClosed = word & 2 != 0
        isLingeringPaused = word & 1 != 0
    }

    init(_ pool: DiskStore.ReaderPool) {
        generation = pool.generation
        isClosed = pool.isClosed
        isLingeringPaused = pool.lingerPauses > 0
    }

    var word: Int { generation << 2 | (isClosed ? 2 : 0) | (isLingeringPaused ? 1 : 0) }
}

private let laneKey: pthread_key_t = {
    var key = pthread_key_t()
    // Fails only when the process ran out of keys: `pthread_getspecific` then returns nil and
    // each read takes the next lane in turn (correct, only slower).
    _ = pthread_key_create(&key, nil)
    return key
}()
private let nextLaneNumber = Atomic<Int>(0)

/// The calling thread's lane number: threads take numbers in turn as they first read, so the
/// first ``ReadLane/count`` threads of a process read in lanes of their own.
func currentLaneNumber() -> Int {
    if let value = pthread_getspecific(laneKey) { return Int(bitPattern: value) - 1 }
    let number = nextLaneNumber.wrappingAdd(1, ordering: .relaxed).oldValue & (ReadLane.count - 1)
    _ = pthread_setspecific(laneKey, UnsafeRawPointer(bitPattern: number + 1))
    return number
}

extension DiskStore {
    /// Takes the reader parked in the calling thread's lane, if it belongs to the pool's
    /// current generation; with the pool's status.
    func takeParkedReader(lane: Int) -> (PooledReader?, PoolStatus) {
        let parked = lanes[lane].withLock { lane in
            let parked = lane.parked
            lane.parked = nil
            return parked
        }
        let status = PoolStatus(poolStatus.load(ordering: .acquiring))
        guard let parked, parked.generation == status.generation else { return (nil, status) }
        return (parked, status)
    }

    /// What ``checkInToLane(_:record:lane:)`` did.
    struct LaneCheckIn {
        /// Whether the reader was parked in the lane (else the pool decides what becomes of it).
        var isParked = false
        /// Whether the record was logged in the lane (else it goes to the pool's log).
        var isLogged = false
        /// Whether the logged reads are due to be gathered (the lane is full, or the oldest
        /// unranked read is old enough).
        var isDue = false
    }

    /// Parks `pooled` in lane `lane` when it may stay there, and logs `record` there when it
    /// is a plain hit or miss, under the lane's lock alone.
    func checkInToLane(_ pooled: PooledReader, record: ReadRecord, lane number: Int) -> LaneCheckIn {
        lanes[number].withLock { lane in
            var result = LaneCheckIn()
            if !lane.isUsed {
                lane.isUsed = true
                usedLanes.bitwiseOr(1 << number, ordering: .sequentiallyConsistent)
            }
            // Read under the lane's lock, after the lane is marked used: a checkpoint that
            // pauses lingering sets the status, then ends the snapshots of the readers parked
            // in each used lane under its lock (each side's write comes before its read, so
            // one of them sees the other's).
            let status = PoolStatus(poolStatus.load(ordering: .sequentiallyConsistent))
            if lane.parked == nil, !status.isClosed, status.generation == pooled.generation,
               !pooled.reader.isLingering || (!status.isLingeringPaused && isSweepScheduled.load(ordering: .sequentiallyConsistent)) {
                lane.parked = pooled
                result.isParked = true
            }
            switch record {
            case .none, .answer:
                break
            case .slidingHit:
                return result  // With its renewal, in the pool's log.
            case .miss:
                lane.misses += 1
            case .unloggedHit:
                lane.hits += 1
            case .hit(let access):
                lane.hits += 1
                if lane.reads.isEmpty {
                    lane.reads.reserveCapacity(ReadLane.limit)
                    lane.tickets.reserveCapacity(ReadLane.limit)
                    _ = oldestUnranked.min(access.time, ordering: .relaxed)
                }
                lane.reads.append(access)
                // Taken under the lane's lock (see ``gatherLanes(_:)``).
                lane.tickets.append(readTickets.wrappingAdd(1, ordering: .acquiringAndReleasing).oldValue)
                // Due when full, or when the oldest read here or anywhere (as far as
                // ``oldestUnranked`` knows) is old enough.
                let oldest = min(lane.reads[0].time, oldestUnranked.load(ordering: .relaxed))
                result.isDue = lane.reads.count >= ReadLane.limit || access.time - oldest >= Self.accessFlushDelay
            }
            result.isLogged = true
            return result
        }
    }

    /// The hits and misses counted since the store opened, in the pool's log and the lanes.
    func hitAndMissCounts() -> (hits: Int, misses: Int) {
        var (hits, misses) = readers.withLock { ($0.log.hits, $0.log.misses) }
        forEachUsedLane { lane in
            hits += lane.hits
            misses += lane.misses
        }
        return (hits, misses)
    }

    /// Runs `body` on the pool with every lane's reads gathered into its log first, so that
    /// the log holds every read logged before (see ``gatherLanes(_:)``).
    func withLog<T>(_ body: (inout ReaderPool) throws -> T) rethrows -> T {
        try readers.withLockUnchecked { pool in
            gatherLanes(&pool)
            defer { publishOldestPending(pool) }
            return try body(&pool)
        }
    }

    /// Moves the lanes' reads into the pool's log, in the order of their tickets. Call with the
    /// pool's lock held.
    ///
    /// Only reads whose ticket is below the counter's value at the start are moved: a read
    /// takes its ticket and joins its lane in one hold of the lane's lock, so every such read
    /// is in its lane by the time this takes that lock, while a read with a higher ticket was
    /// logged during the gathering and waits for the next. So the log always grows by a prefix
    /// of the tickets' order, and a read that finished before another began (on any thread) is
    /// ranked before it.
    ///
    /// When no read took a ticket since the last gathering, no lane holds a read: nothing to
    /// do (a write gathers several times, and most writes follow no read).
    func gatherLanes(_ pool: inout ReaderPool) {
        let cut = readTickets.load(ordering: .sequentiallyConsistent)
        guard cut != pool.gatheredTickets else { return }
        pool.gatheredTickets = cut
        oldestUnranked.store(.max, ordering: .relaxed)
        var batches: [(reads: ArraySlice<DiskIndex.Access>, tickets: ArraySlice<UInt64>)] = []
        forEachUsedLane { lane in
            guard !lane.reads.isEmpty else { return }
            let taken = lane.tickets.partitioningIndex { $0 >= cut }
            guard taken > 0 else {
                _ = oldestUnranked.min(lane.reads[0].time, ordering: .relaxed)
                return
            }
            batches.append((lane.reads[..<taken], lane.tickets[..<taken]))
            if taken == lane.reads.count {
                lane.reads.removeAll(keepingCapacity: true)
                lane.tickets.removeAll(keepingCapacity: true)
            } else {
                lane.reads.removeFirst(taken)
                lane.tickets.removeFirst(taken)
                _ = oldestUnranked.min(lane.reads[0].time, ordering: .relaxed)
            }
        }
        pool.log.append(merging: batches)
    }

    /// Runs `body` on each lane a read has used, under the lane's lock. The lanes used are
    /// read after the caller's own writes that the lanes read (``poolStatus``, the ticket cut):
    /// a lane marked used later sees them.
    func forEachUsedLane(_ body: (inout ReadLane) -> Void) {
        var used = usedLanes.load(ordering: .sequentiallyConsistent)
        while used != 0 {
            let lane = used.trailingZeroBitCount
            used &= used - 1
            lanes[lane].withLock { body(&$0) }
        }
    }
}

extension Collection {
    /// The first index whose element satisfies `belongs` (which must be false, then true, along
    /// the collection); `endIndex` if none does.
    func partitioningIndex(where belongs: (Element) -> Bool) -> Index {
        var low = startIndex, count = self.count
        while count > 0 {
            let half = count / 2
            let middle = index(low, offsetBy: half)
            if belongs(self[middle]) {
                count = half
            } else {
                low = index(after: middle)
                count -= half + 1
            }
        }
        return low
    }
}

extension DiskStore.ReadLog {
    /// Appends the reads of `batches` (each in ticket order) in the order of their tickets.
    mutating func append(merging batches: [(reads: ArraySlice<DiskIndex.Access>, tickets: ArraySlice<UInt64>)]) {
        switch batches.count {
        case 0:
            return
        case 1:
            for access in batches[0].reads { logAccess(access) }
        default:
            var heads = batches.map { $0.reads.startIndex }
            while true {
                var next: Int?
                for (batch, head) in heads.enumerated() where head < batches[batch].reads.endIndex {
                    if let chosen = next, batches[chosen].tickets[heads[chosen]] < batches[batch].tickets[head] { continue }
                    next = batch
                }
                guard let next else { return }
                logAccess(batches[next].reads[heads[next]])
                heads[next] += 1
            }
        }
    }
}
