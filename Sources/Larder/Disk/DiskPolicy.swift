import Foundation

/// The disk tier's eviction policy as the read and write paths see it: how a value read asks
/// for the entry, how logged reads reach the index, how a write places its row, and what an
/// eviction needs to know. The read and write paths call these and never ask which policy is
/// in force; each policy's rules live in its own files (LRU here and in `DiskIndex.swift`,
/// S3-FIFO in `DiskStore+S3FIFO.swift` and `DiskIndex+S3FIFO.swift`), as ``MemoryPolicy`` does
/// for the memory tier.
///
/// Invariant: a policy holds no state of its own; everything it decides is in the index, so
/// stores with different policies can share a directory and a policy can change between
/// openings.
protocol DiskPolicy: Sendable {
    /// Whether a value read asks its lookup for the entry's read counter, so that a read that
    /// would change nothing in the index logs nothing (S3-FIFO's saturated counters).
    var countsLookups: Bool { get }

    /// Writes logged reads into the index, in a transaction of `index` with the writer's lock
    /// held, and reserves `reserving` sequence numbers; returns the last number used or reserved.
    func recordReads(
        _ accesses: [DiskIndex.Access], sequences: [Int64], index: DiskIndex, reserving: Int64
    ) throws -> Int64

    /// Writes `row` for `store` in `transaction` (the writer's lock held), after the reads
    /// logged before it as the policy orders them, evicting as the limits require; returns the
    /// blob files to delete once the transaction commits.
    func write(
        _ row: DiskIndex.Row, in store: DiskStore, state: inout DiskStore.State, transaction: WriteTransaction, now: Int64
    ) throws -> [String]

    /// What an eviction under the limits in force needs beyond them (`nil`: nothing).
    func evictionContext(of store: DiskStore, pending: DiskIndex.Measure) -> DiskIndex.S3FIFOContext?
}

extension DiskStore {
    /// The policy of ``Configuration/policy`` (validated at open: LRU or S3-FIFO).
    var policy: any DiskPolicy { Self.policy(for: configuration.policy) }

    static func policy(for policy: EvictionPolicy) -> any DiskPolicy {
        policy == .s3fifo ? S3FIFODiskPolicy() : LRUDiskPolicy()
    }
}

/// Least recently used: logged reads are ranked after everything ranked so far, a write after
/// the reads logged before it, and an eviction takes the lowest ranks first.
struct LRUDiskPolicy: DiskPolicy {
    var countsLookups: Bool { false }

    func recordReads(
        _ accesses: [DiskIndex.Access], sequences: [Int64], index: DiskIndex, reserving: Int64
    ) throws -> Int64 {
        try index.recordAccesses(accesses, sequences: sequences, reserving: reserving)
    }

    func write(
        _ row: DiskIndex.Row, in store: DiskStore, state: inout DiskStore.State, transaction: WriteTransaction, now: Int64
    ) throws -> [String] {
        // Reads logged before this write rank before it: they are given the numbers below its
        // own, and ranked later (before an eviction at the latest).
        let sequence = try transaction.sequenceAfterLoggedReads()
        let index = transaction.index
        var obsolete: [String] = []
        let existing = try index.existingRow(forKey: row.key)
        if let previous = existing?.file { obsolete.append(previous) }
        try index.write(row, sequence: sequence, existing: existing?.rowID)
        obsolete += try store.evictIfNeeded(&state, in: transaction, now: now, keeping: row.key)
        return obsolete
    }

    func evictionContext(of store: DiskStore, pending: DiskIndex.Measure) -> DiskIndex.S3FIFOContext? {
        nil
    }
}

/// S3-FIFO in byte-sized queues (see `DiskStore+S3FIFO.swift`): logged reads bump counters and
/// rank nothing, a write places its entry in a queue, an eviction follows the queues.
struct S3FIFODiskPolicy: DiskPolicy {
    var countsLookups: Bool { true }

    func recordReads(
        _ accesses: [DiskIndex.Access], sequences: [Int64], index: DiskIndex, reserving: Int64
    ) throws -> Int64 {
        try index.recordFrequencies(accesses)
        return try index.recordAccesses([], reserving: reserving)
    }

    func write(
        _ row: DiskIndex.Row, in store: DiskStore, state: inout DiskStore.State, transaction: WriteTransaction, now: Int64
    ) throws -> [String] {
        // Reads logged before this write count before it: their counters are bumped now, or
        // later (before an eviction at the latest).
        let sequence = try transaction.sequenceBesideLoggedReads()
        return try store.writeS3FIFO(row, sequence: sequence, state: &state, transaction: transaction, now: now)
    }

    func evictionContext(of store: DiskStore, pending: DiskIndex.Measure) -> DiskIndex.S3FIFOContext? {
        let sizeLimit = store.sizeLimit
        let shares = DiskIndex.S3FIFOShares(
            countLimit: store.countLimit, sizeLimit: sizeLimit, chargeLimit: DiskStore.chargeLimit(forSizeLimit: sizeLimit))
        return DiskIndex.S3FIFOContext(shares: shares, pending: pending)
    }
}
