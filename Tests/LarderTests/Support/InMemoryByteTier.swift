import Foundation
@testable import Larder

/// A real byte tier kept in a dictionary: the third tier of the composition tests.
///
/// It keeps every promise of ``CacheTier`` (expiry by an injected clock, exact bytes) and can be
/// told to refuse writes or removals, so tests can see what `Storage` does when a tier fails.
final class InMemoryByteTier: LocalCacheTier, Sendable {
    struct Stored {
        var entry: TierEntry
        var expires: Date?
    }

    struct State {
        var entries: [String: Stored] = [:]
        var failsWrites = false
        var failsRemovals = false
        var statistics = TierStatistics()
        var isClosed = false
        /// The size of each ``setValues(_:)`` call, in order.
        var batchSizes: [Int] = []
    }

    let tierID: StorageTier
    private let now: @Sendable () -> Date
    private let state = Locked(State())

    init(_ id: StorageTier = StorageTier("bytes"), now: @escaping @Sendable () -> Date = { Date() }) {
        self.tierID = id
        self.now = now
    }

    /// Makes later writes (and removals) throw an I/O error, or stop throwing.
    func setFailing(writes: Bool, removals: Bool = false) {
        state.withLock {
            $0.failsWrites = writes
            $0.failsRemovals = removals
        }
    }

    /// The stored entry for `key` as it is, expired or not, without counting a read.
    func peek(_ key: String) -> TierEntry? {
        state.withLock { $0.entries[key]?.entry }
    }

    func entry(forKey key: String) throws -> TierEntry? {
        let now = now()
        return try state.withLock { state in
            guard !state.isClosed else { throw StorageError.closed }
            guard let stored = state.entries[key] else {
                state.statistics.misses += 1
                return nil
            }
            if let expires = stored.expires, expires <= now {
                state.entries[key] = nil
                state.statistics.expirations += 1
                state.statistics.misses += 1
                return nil
            }
            state.statistics.hits += 1
            return stored.entry
        }
    }

    func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) throws {
        let now = now()
        let expires = (expiry ?? .never).expirationDate(from: now)
        try state.withLock { state in
            guard !state.isClosed else { throw StorageError.closed }
            guard !state.failsWrites else {
                throw StorageError.io(operation: "writing", path: "bytes/\(key)", reason: "the test tier refuses writes")
            }
            state.entries[key] = Stored(
                entry: TierEntry(data: data, expirationDate: expires, metadata: metadata), expires: expires)
            state.statistics.writes += 1
        }
    }

    /// Every write at once, under one lock: all stored or (when refusing writes) none.
    func setValues(_ writes: [TierWrite]) throws {
        let now = now()
        try state.withLock { state in
            guard !state.isClosed else { throw StorageError.closed }
            guard !state.failsWrites else {
                throw StorageError.io(operation: "writing", path: "bytes/\(writes.count) keys", reason: "the test tier refuses writes")
            }
            state.batchSizes.append(writes.count)
            for write in writes {
                let expires = (write.expiry ?? .never).expirationDate(from: now)
                state.entries[write.key] = Stored(
                    entry: TierEntry(data: write.data, expirationDate: expires, metadata: write.metadata), expires: expires)
            }
            state.statistics.writes += writes.count
        }
    }

    /// The size of each ``setValues(_:)`` call so far, in order.
    var batchSizes: [Int] { state.withLock { $0.batchSizes } }

    func removeValue(forKey key: String) throws -> Bool {
        try state.withLock { state in
            guard !state.failsRemovals else {
                throw StorageError.io(operation: "removing", path: "bytes/\(key)", reason: "the test tier refuses removals")
            }
            return state.entries.removeValue(forKey: key) != nil
        }
    }

    func containsValue(forKey key: String) throws -> Bool {
        let now = now()
        return state.withLock { state in
            guard let stored = state.entries[key] else { return false }
            return stored.expires.map { $0 > now } ?? true
        }
    }

    func keys(withPrefix prefix: String) throws -> [String] {
        let now = now()
        return state.withLock { state in
            state.entries.filter { $0.key.hasPrefix(prefix) && ($0.value.expires.map { $0 > now } ?? true) }
                .keys.sorted()
        }
    }

    func removeAll() throws {
        state.withLock { $0.entries.removeAll() }
    }

    func removeExpired() throws -> Int {
        let now = now()
        return state.withLock { state in
            let expired = state.entries.filter { $0.value.expires.map { $0 <= now } ?? false }.keys
            for key in expired { state.entries[key] = nil }
            state.statistics.expirations += expired.count
            return expired.count
        }
    }

    var tierStatistics: TierStatistics {
        state.withLock { state in
            var statistics = state.statistics
            statistics.totalCount = state.entries.count
            statistics.totalSize = state.entries.values.reduce(0) { $0 + $1.entry.data.count }
            return statistics
        }
    }

    func close() {
        state.withLock { $0.isClosed = true }
    }
}
