public import Synchronization

/// The tags of a ``Storage``'s memory values (``MemoryStore`` keeps decoded values and no tags):
/// which keys ``Storage/removeValues(taggedWith:tiers:)-(_,_)`` drops from memory besides the
/// keys the byte tiers report.
///
/// Every write of a key to memory replaces its tags here (an untagged one drops them) and every
/// removal forgets them, so a tag never removes a newer untagged value. Keys memory evicted
/// linger until the index outgrows twice memory's count, when ``prune(keeping:)`` drops them.
/// A storage that never writes a tag pays one atomic load per write or removal.
@usableFromInline
final class MemoryTags<Key: Hashable & Sendable>: Sendable {
    private struct State {
        var keysByTag: [String: Set<Key>] = [:]
        /// Each tagged key's tags, with the number of the write that set them (see `prune`).
        var tagsByKey: [Key: (tags: Set<String>, write: UInt64)] = [:]
        var writes: UInt64 = 0

        mutating func forget(_ key: Key) {
            guard let old = tagsByKey.removeValue(forKey: key) else { return }
            for tag in old.tags {
                keysByTag[tag]?.remove(key)
                if keysByTag[tag]?.isEmpty == true { keysByTag[tag] = nil }
            }
        }
    }

    private let state = Locked(State())
    /// Set by the first tagged write; until then writes and removals skip the lock.
    @usableFromInline let inUse = Atomic<Bool>(false)

    /// Whether any write has tagged a key, so that an inlined write can skip ``forget(_:)``.
    @inlinable var isInUse: Bool { inUse.load(ordering: .acquiring) }

    /// Gives `key` exactly `tags` (none forgets it); returns the number of tagged keys.
    @discardableResult
    func set(_ tags: Set<String>, forKey key: Key) -> Int {
        if tags.isEmpty {
            forget(key)
            return 0
        }
        inUse.store(true, ordering: .releasing)
        return state.withLock { state in
            state.forget(key)
            state.writes += 1
            state.tagsByKey[key] = (tags, state.writes)
            for tag in tags { state.keysByTag[tag, default: []].insert(key) }
            return state.tagsByKey.count
        }
    }

    /// Drops `key`'s tags (its memory value was removed or replaced).
    func forget(_ key: Key) {
        guard inUse.load(ordering: .acquiring) else { return }
        state.withLock { $0.forget(key) }
    }

    /// Removes the keys tagged `tag` from the index and returns them.
    func take(taggedWith tag: String) -> Set<Key> {
        guard inUse.load(ordering: .acquiring) else { return [] }
        return state.withLock { state in
            let keys = state.keysByTag[tag] ?? []
            for key in keys { state.forget(key) }
            return keys
        }
    }

    /// The number of tagged keys.
    var count: Int {
        state.withLock { $0.tagsByKey.count }
    }

    /// Forgets every key.
    func removeAll() {
        guard inUse.load(ordering: .acquiring) else { return }
        state.withLock { $0 = State() }
    }

    /// Forgets the keys `keeping` says memory no longer holds; `keeping` runs outside the lock,
    /// and a key tagged again meanwhile stays.
    func prune(keeping: (Key) -> Bool) {
        let snapshot = state.withLock { state in state.tagsByKey.map { ($0.key, $0.value.write) } }
        let gone = snapshot.filter { !keeping($0.0) }
        guard !gone.isEmpty else { return }
        state.withLock { state in
            for (key, write) in gone where state.tagsByKey[key]?.write == write { state.forget(key) }
        }
    }
}
