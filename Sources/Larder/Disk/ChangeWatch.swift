import CSQLite
import Foundation
import Synchronization

/// Follows the changes that other stores — in this process or another — make to a directory's
/// index, so that a ``Storage`` drops the memory copies they replaced or removed before it
/// serves them (``Storage/Configuration/followsDirectory``).
///
/// Every change to an entry row (a write, an overwrite, a removal, an eviction, an expiry pass,
/// an earlier expiry, a clear) adds a *change row* to the index's `changes` table, in the same
/// transaction, by schema 5's triggers: its *change sequence* (`seq`, one more than the last),
/// the key, and the *writer id* of the store whose connection made it. The watch keeps a
/// read-only connection of its own and the *change word* of the wal-index header (which every
/// commit to the index rewrites) as it was when it last read the table. ``isCurrent()``
/// compares the two: a few loads and a compare on a memory hit. When they differ,
/// ``catchUp(_:)`` reads the change rows after the last one it applied, in order and in
/// batches, leaves out its own store's (its storage changed memory itself), and hands the keys
/// to the caller, all under the watch's lock, before it publishes the word it read first. A
/// change row gone before it was read (the table keeps the last
/// ``DiskIndex/retainedChanges(forSizeLimit:)``; a clear keeps one) makes the catch-up report
/// ``TierInvalidation/all``, and so does a store that opened its index again (a recreated
/// directory, an index moved aside): the watch then follows the new index.
///
/// - Invariant: ``savedWord`` is a change word (plus the store's index openings) read before a
///   query that saw every change row up to ``State/lastSequence``, and those rows were handed
///   to the caller before it was stored.
///
/// Lock order: the watch's lock is held while the caller takes memory's and the key turns'
/// locks, never the reverse.
final class ChangeWatch: Sendable {
    /// Rows one query of the catch-up reads.
    static let batchSize = 1_024
    /// A catch-up that would hand over more keys than this reports ``TierInvalidation/all``.
    static let keyLimit = 16_384

    private struct State {
        var connection: SQLiteConnection
        /// The sequence of the last change row handed over (0: none yet, in an empty table).
        var lastSequence: Int64
        /// The store's ``DiskStore/indexOpenings`` when ``connection`` was opened.
        var opening: UInt64
        /// Connections to indexes the store replaced since (a moved-aside or recreated
        /// directory's): kept open until `deinit`, since a check may still read their wal-index.
        var replaced: [SQLiteConnection] = []
    }

    private let state: Locked<State>
    /// The address of the watch connection's wal-index (0 when it has none: every check then
    /// catches up). Mapped while the connection is open, which it is until `deinit`.
    private let walIndexAddress: Atomic<UInt>
    /// The change word plus the store's index openings as of the last catch-up: a store that
    /// opened its index again (another file) changes the sum, though the old file's word no
    /// longer moves.
    private let savedWord: Atomic<UInt64>
    /// The watched store: its writer id (its own change rows are skipped), its index path, and
    /// how often it opened its index.
    private let store: DiskStore

    /// Opens a watch on `store`'s index, starting after the last change row there now.
    init(store: DiskStore) throws {
        self.store = store
        let opening = store.indexOpenings.load(ordering: .acquiring)
        let opened = try Self.open(store)
        walIndexAddress = Atomic(opened.address)
        savedWord = Atomic((opened.word ?? 0) &+ opening)
        state = Locked(State(connection: opened.connection, lastSequence: opened.last, opening: opening))
    }

    /// A read-only connection to `store`'s index, its wal-index address, the change word, and
    /// the last change sequence.
    private static func open(_ store: DiskStore) throws
        -> (connection: SQLiteConnection, address: UInt, word: UInt64?, last: Int64)
    {
        let connection = try SQLiteConnection(path: store.indexPath, busyTimeout: store.configuration.busyTimeout)
        try connection.execute("PRAGMA query_only = 1")
        // A first read maps the wal-index; the word is read before the query that says where
        // the changes stand, so a commit between the two only makes the first check catch up.
        _ = try connection.scalarInt64("SELECT count(*) FROM changes WHERE seq < 0")
        let address = csqlite_wal_index(connection.handle).map { UInt(bitPattern: UnsafeRawPointer($0)) } ?? 0
        let word = changeWord(at: address)
        let last = try connection.scalarInt64("SELECT coalesce(max(seq), 0) FROM changes") ?? 0
        return (connection, address, word, last)
    }

    /// Whether nothing has committed to the index since the last catch-up (always `false`
    /// without a wal-index). A memory hit's whole cost of following the directory.
    @inline(__always)
    func isCurrent() -> Bool {
        guard let word = Self.changeWord(at: walIndexAddress.load(ordering: .relaxed)) else { return false }
        return word &+ store.indexOpenings.load(ordering: .relaxed) == savedWord.load(ordering: .acquiring)
    }

    @inline(__always)
    private static func changeWord(at address: UInt) -> UInt64? {
        guard let index = UnsafeRawPointer(bitPattern: address) else { return nil }
        return csqlite_wal_index_change_word(index)
    }

    /// Hands `apply` the keys other stores changed since the last catch-up (or
    /// ``TierInvalidation/all`` when some are no longer known), under the watch's lock, and
    /// then marks the watch current. Does nothing when another thread caught up meanwhile.
    /// When the table cannot be read, `apply` gets ``TierInvalidation/all`` and the watch
    /// stays behind, so the next check tries again.
    func catchUp(_ apply: (TierInvalidation) -> Void) {
        state.withLock { state in
            let opening = store.indexOpenings.load(ordering: .acquiring)
            guard opening == state.opening else {
                // The store opened its index again, from another file: follow that one.
                apply(.all)
                guard let opened = try? Self.open(store) else { return }
                state.replaced.append(state.connection)
                state = State(
                    connection: opened.connection, lastSequence: opened.last, opening: opening, replaced: state.replaced)
                walIndexAddress.store(opened.address, ordering: .releasing)
                if let word = opened.word { savedWord.store(word &+ opening, ordering: .releasing) }
                return
            }
            let word = Self.changeWord(at: walIndexAddress.load(ordering: .relaxed)).map { $0 &+ opening }
            if let word, word == savedWord.load(ordering: .relaxed) { return }
            guard let changes = try? Self.read(&state, skipping: store.writerID) else {
                apply(.all)
                return
            }
            if changes != .keys([]) { apply(changes) }
            if let word { savedWord.store(word, ordering: .releasing) }
        }
    }

    /// The keys changed by other writers after `state.lastSequence`, advancing it.
    private static func read(_ state: inout State, skipping writer: Int64) throws -> TierInvalidation {
        let connection = state.connection
        let statement = try connection.statement("SELECT seq, key, writer FROM changes WHERE seq >= ?1 ORDER BY seq LIMIT ?2")
        var keys: [String] = []
        while true {
            let from = state.lastSequence
            var rows = 0
            var last = from
            var isComplete = true
            try statement.withReset { statement in
                try statement.bind(from, at: 1)
                try statement.bind(Int64(batchSize), at: 2)
                while try statement.step() {
                    let sequence = statement.int64(0)
                    rows += 1
                    // The first row must be the last one handed over (or the table's first):
                    // otherwise rows between were pruned, or the index was emptied and refilled.
                    if rows == 1, sequence != from, !(from == 0 && sequence == 1) { isComplete = false }
                    last = sequence
                    if sequence != from, statement.int64(2) != writer { keys.append(statement.string(1)) }
                }
            }
            if rows == 0 {
                guard from > 0 else { break }
                // An emptied table (an index reset): every copy is suspect.
                isComplete = false
            }
            guard isComplete, keys.count <= keyLimit else {
                state.lastSequence = try connection.scalarInt64("SELECT coalesce(max(seq), 0) FROM changes") ?? 0
                return .all
            }
            state.lastSequence = last
            if rows < batchSize { break }
        }
        return .keys(keys)
    }
}
