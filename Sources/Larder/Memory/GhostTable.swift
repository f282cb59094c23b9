/// A set of ghost hashes with their stamps: open addressing with linear probing, indexed
/// directly by the hash bits (a key's `hashValue` is already well mixed, so hashing it again
/// as a `Dictionary` key would only cost time). Deletion shifts the following entries back,
/// so there are no tombstones. The load factor stays at or below one half.
@usableFromInline
struct GhostTable {
    @usableFromInline var entries: ContiguousArray<GhostQueue.Entry> = []
    @usableFromInline var count = 0

    @inlinable
    init() {}

    @inlinable static var empty: GhostQueue.Entry { GhostQueue.Entry(hash: 0, stamp: -1) }

    /// The bucket holding `hash`, if any.
    @inlinable
    func find(_ hash: Int) -> Int? {
        guard count > 0 else { return nil }
        return entries.withUnsafeBufferPointer { entries in
            let mask = entries.count &- 1
            var index = hash & mask
            while true {
                let entry = entries[index]
                if entry.stamp < 0 { return nil }
                if entry.hash == hash { return index }
                index = (index &+ 1) & mask
            }
        }
    }

    /// Inserts `entry`, or replaces the entry with its hash.
    @inlinable
    mutating func upsert(_ entry: GhostQueue.Entry) {
        if 2 * (count + 1) > entries.count { grow() }
        let added: Bool = entries.withUnsafeMutableBufferPointer { entries in
            let mask = entries.count &- 1
            var index = entry.hash & mask
            while true {
                let existing = entries[index]
                if existing.stamp < 0 || existing.hash == entry.hash {
                    entries[index] = entry
                    return existing.stamp < 0
                }
                index = (index &+ 1) & mask
            }
        }
        if added { count += 1 }
    }

    /// Empties the bucket at `index`, moving back later entries of the same probe run.
    @inlinable
    mutating func remove(at index: Int) {
        entries.withUnsafeMutableBufferPointer { entries in
            let mask = entries.count &- 1
            var hole = index
            var next = (hole &+ 1) & mask
            while entries[next].stamp >= 0 {
                let home = entries[next].hash & mask
                // The entry at `next` may fill the hole if its probe run passes through the hole.
                if (next &- home) & mask >= (next &- hole) & mask {
                    entries[hole] = entries[next]
                    hole = next
                }
                next = (next &+ 1) & mask
            }
            entries[hole] = Self.empty
        }
        count -= 1
    }

    @usableFromInline
    mutating func grow() {
        let old = entries
        entries = ContiguousArray(repeating: Self.empty, count: Swift.max(16, 2 * old.count))
        count = 0
        for entry in old where entry.stamp >= 0 { upsert(entry) }
    }
}
