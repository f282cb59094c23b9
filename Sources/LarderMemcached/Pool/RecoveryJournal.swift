#if Memcached
import Foundation
import Larder
import Synchronization

/// The keys whose write or removal could not reach one server: each may still hold a value
/// older than this process's last write there, so it is deleted on that server before this
/// process reads it there again.
///
/// A key enters when a write, fill, removal or invalidation sent to the server fails (a timeout
/// too: the command may or may not have been applied) and leaves when a later write reaches the
/// server or its delete does. At most `limit` keys are kept; past that the journal *overflows*:
/// the server cannot say which of its keys are stale, so every read of it is a miss until the
/// longest lifetime this store has given a remote value has passed (``overflowedUntil``).
///
/// Invariant: `hasWork` is true whenever `keys` is non-empty or the journal has overflowed, so
/// a read of a healthy server checks one atomic and takes no lock.
final class RecoveryJournal: Sendable {
    private struct State {
        var keys: Set<[UInt8]> = []
        var overflowedUntil: Date?
        var isReplaying = false
        /// After a replay that failed (the server still down), none starts before this.
        var nextReplay: ContinuousClock.Instant?
    }

    /// How long after a failed replay the next may start: a read of an owed key while the
    /// server is down starts no more than one attempt per pause.
    static let replayPause = Duration.milliseconds(50)

    let limit: Int
    private let state = Mutex(State())
    private let hasWork = Atomic<Bool>(false)

    init(limit: Int) {
        self.limit = limit
    }

    /// Whether the journal holds nothing (one atomic load).
    var isEmpty: Bool { !hasWork.load(ordering: .acquiring) }

    /// The number of keys waiting for their delete.
    var count: Int { state.withLock { $0.keys.count } }

    /// Until when every read of the server is a miss, after an overflow.
    var overflowedUntil: Date? { state.withLock { $0.overflowedUntil } }

    /// Remembers that `key`'s last write or removal did not reach the server. `staleUntil` is
    /// when the oldest value the server might still hold has surely expired (used on overflow).
    func record(_ key: [UInt8], staleUntil: Date) {
        state.withLock { state in
            if state.keys.count < limit || state.keys.contains(key) {
                state.keys.insert(key)
            } else {
                state.overflowedUntil = max(state.overflowedUntil ?? staleUntil, staleUntil)
            }
            hasWork.store(true, ordering: .releasing)
        }
    }

    /// Whether a read of `key` on the server must be a miss (its delete is still owed, or the
    /// journal overflowed and has not aged out by `now`).
    func blocks(_ key: [UInt8], now: Date) -> Bool {
        if isEmpty { return false }
        return state.withLock { state in
            if let until = state.overflowedUntil {
                if now < until { return true }
                state.overflowedUntil = nil
                if state.keys.isEmpty { hasWork.store(false, ordering: .releasing) }
            }
            return state.keys.contains(key)
        }
    }

    /// A write of `key` reached the server: its value there is current again.
    func settle(_ key: [UInt8]) {
        if isEmpty { return }
        state.withLock { state in
            state.keys.remove(key)
            if state.keys.isEmpty, state.overflowedUntil == nil { hasWork.store(false, ordering: .releasing) }
        }
    }

    /// The keys to delete now, or `nil` when there are none or another caller is replaying.
    /// The caller must call ``finishReplay()`` afterwards.
    func beginReplay() -> [[UInt8]]? {
        if isEmpty { return nil }
        return state.withLock { state in
            guard !state.isReplaying, !state.keys.isEmpty else { return nil }
            if let next = state.nextReplay, ContinuousClock.now < next { return nil }
            state.isReplaying = true
            return Array(state.keys)
        }
    }

    func finishReplay(failed: Bool) {
        state.withLock { state in
            state.isReplaying = false
            state.nextReplay = failed ? ContinuousClock.now + Self.replayPause : nil
        }
    }
}
#endif
