import Foundation

// Memory that follows the directory (Configuration.followsDirectory): before memory answers, the
// copies of keys other stores changed since the last look are dropped (see ChangeWatch).
extension Storage {
    /// Drops the memory copies of the keys other stores changed in the disk tier's directory
    /// since the last look; a few memory loads when nothing committed since.
    @usableFromInline
    func followDirectory() {
        guard let changeWatch, !changeWatch.isCurrent() else { return }
        changeWatch.catchUp { dropCopies(changedElsewhere: $0) }
    }

    /// ``memory`` after following the directory, for a call about to ask it.
    var currentMemory: MemoryStore<Key, Value> {
        if followsDirectory { followDirectory() }
        return memory
    }

    /// Drops memory's (and the stale copies') values of the keys `changes` names. A promotion
    /// that read them before is skipped; a turn held on one of them drops the copy again
    /// before it ends (its holder may write an older value).
    private func dropCopies(changedElsewhere changes: TierInvalidation) {
        switch changes {
        case .all:
            turns.invalidateAll()
            memory.removeAll()
            staleCopies?.removeAll()
        case .keys(let cacheKeys):
            for key in keys(named: cacheKeys) {
                turns.invalidate(key)
                memory.removeValue(forKey: key)
                dropStaleCopyInMemory(forKey: key)
            }
        }
    }

    /// The keys whose ``CacheKey/cacheKey`` is one of `cacheKeys`: the strings themselves when
    /// keys are strings; otherwise those memory, the stale copies or a held turn has.
    private func keys(named cacheKeys: [String]) -> [Key] {
        if let keys = cacheKeys as? [Key] { return keys }
        let wanted = Set(cacheKeys)
        var found = Set(memory.keys().filter { wanted.contains($0.cacheKey) })
        if let staleCopies { found.formUnion(staleCopies.keys().filter { wanted.contains($0.cacheKey) }) }
        found.formUnion(turns.heldKeys().filter { wanted.contains($0.cacheKey) })
        return Array(found)
    }
}
