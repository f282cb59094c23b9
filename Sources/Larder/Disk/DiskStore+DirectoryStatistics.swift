import Foundation
import Synchronization

/// The counts every store on a directory adds to its index, so that another process (`larder
/// stats`) sees the directory's hits, misses and evictions, not only its own.
///
/// They live in the index's `meta` table (rows `hits`, `misses`, `evictions`, `size_limit`).
/// A store adds what its counters grew by when it writes its logged reads (see
/// ``DiskStore/withWriteTransaction(_:ranking:_:)``), inside that transaction, so a read pays
/// nothing for them; evictions are added by the transaction that evicts.
extension DiskStore {
    /// The counts the index holds for every store that has used the directory.
    public struct DirectoryStatistics: Sendable, Hashable {
        /// Reads that returned a value, by every store, up to each one's last write of its
        /// logged reads (at most a few seconds behind while a store reads).
        public var hits = 0
        /// Reads that found nothing, counted as ``hits`` are.
        public var misses = 0
        /// Entries removed by the size and count limits (including `trim`).
        public var evictions = 0
        /// The size limit of the last store with a finite one that wrote its reads, or `nil`.
        public var sizeLimit: Int?
        /// Entries in the index now (expired entries count until removed).
        public var totalCount = 0
        /// Stored bytes now.
        public var totalSize = 0

        public init() {}
    }

    /// The counts the index holds for every store that has used the directory, this one's
    /// included up to its last write transaction.
    ///
    /// - Throws: ``StorageError`` when the index cannot be read.
    public func directoryStatistics() throws -> DirectoryStatistics {
        try withLiveIndex { _, index in
            var statistics = DirectoryStatistics()
            statistics.hits = Int(try index.meta(MetaName.hits) ?? 0)
            statistics.misses = Int(try index.meta(MetaName.misses) ?? 0)
            statistics.evictions = Int(try index.meta(MetaName.evictions) ?? 0)
            statistics.sizeLimit = try index.meta(MetaName.sizeLimit).map { Int($0) }
            let totals = try index.totals()
            statistics.totalCount = totals.count
            statistics.totalSize = totals.size
            return statistics
        }
    }

    /// The `meta` rows of the directory's counts.
    enum MetaName {
        static let hits = "hits"
        static let misses = "misses"
        static let evictions = "evictions"
        static let sizeLimit = "size_limit"
    }
}

/// What one store has added to its directory's counts (see ``DiskStore/DirectoryStatistics``):
/// the hits and misses already written, so each write adds only the growth since.
///
/// Invariant: ``written`` changes only after the transaction that wrote the growth committed,
/// so a rolled-back write leaves the growth to the next one.
final class DirectoryCounts: Sendable {
    struct Written: Sendable, Equatable {
        var hits = 0
        var misses = 0
        var sizeLimit: Int?
    }

    private let written = Mutex(Written())

    /// Adds the growth of `hits` and `misses` since the last committed write (and the size
    /// limit, when it changed) to `index`; returns what to mark written once the transaction
    /// commits, or `nil` when nothing was due. Call inside a write transaction.
    func add(hits: Int, misses: Int, sizeLimit: Int, to index: DiskIndex) throws -> Written? {
        let before = written.withLock { $0 }
        let limit = sizeLimit == .max ? before.sizeLimit : sizeLimit
        let now = Written(hits: hits, misses: misses, sizeLimit: limit)
        guard now != before else { return nil }
        try Self.add(hits - before.hits, to: DiskStore.MetaName.hits, in: index)
        try Self.add(misses - before.misses, to: DiskStore.MetaName.misses, in: index)
        if let limit, limit != before.sizeLimit { try index.setMeta(DiskStore.MetaName.sizeLimit, Int64(limit)) }
        return now
    }

    /// Marks `counts` written (their transaction committed).
    func committed(_ counts: Written) {
        written.withLock { $0 = counts }
    }

    /// Adds `amount` to the `meta` row `name`. Call inside a write transaction.
    static func add(_ amount: Int, to name: String, in index: DiskIndex) throws {
        guard amount > 0 else { return }
        try index.setMeta(name, (try index.meta(name) ?? 0) + Int64(amount))
    }
}
