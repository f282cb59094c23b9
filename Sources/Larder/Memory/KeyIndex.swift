/// The hash table from keys to slots of a ``MemoryStore``: open addressing with linear probing
/// over `(hash bits, slot)` pairs, without the keys themselves.
///
/// The store keeps each key's hash in the key's slot, so the table never hashes a key again:
/// removing an evicted entry finds its bucket from the stored hash and the slot number (no key
/// hashing, no key comparison), and deletion shifts the following entries of the probe run back
/// using the hash bits kept in each bucket (no rehashing of neighbours, which `Dictionary`'s
/// deletion does). Looking a key up compares the stored hash bits first and the key itself only
/// on a match, through the caller's `matches` closure, so the table needs no generic key type.
///
/// The load factor stays at or below one half; the table never shrinks except in
/// ``removeAll()``.
///
/// - Complexity: Expected O(1) for every operation; growing is amortized O(1).
@usableFromInline
struct KeyIndex {
    /// One bucket: the low 32 bits of the key's hash (its home bucket is `hashBits & mask`)
    /// and the slot, or ``empty``.
    @usableFromInline
    struct Bucket {
        @usableFromInline var hashBits: UInt32
        @usableFromInline var slot: Int32

        @inlinable
        init(hashBits: UInt32, slot: Int32) {
            self.hashBits = hashBits
            self.slot = slot
        }
    }

    @inlinable static var empty: Bucket { Bucket(hashBits: 0, slot: -1) }

    /// A power of two, at least 16 once anything is stored.
    @usableFromInline var buckets: ContiguousArray<Bucket> = []
    @usableFromInline var count = 0

    @inlinable
    init() {}

    /// The slot whose key has `hash` and satisfies `matches`, if any.
    @inlinable @inline(__always)
    func find(hash: Int, matches: (Int) -> Bool) -> Int? {
        guard count > 0 else { return nil }
        return buckets.withUnsafeBufferPointer { buckets in
            let mask = buckets.count &- 1
            let bits = UInt32(truncatingIfNeeded: hash)
            var index = Int(bits) & mask
            while true {
                let bucket = buckets[index]
                if bucket.slot < 0 { return nil }
                if bucket.hashBits == bits && matches(Int(bucket.slot)) { return Int(bucket.slot) }
                index = (index &+ 1) & mask
            }
        }
    }

    /// Makes room for one more entry, so that a ``probe(hash:matches:)`` position stays valid
    /// for ``insert(slot:hash:at:)``.
    @inlinable @inline(__always)
    mutating func reserveOneMore() {
        if 2 * (count &+ 1) > buckets.count { grow() }
    }

    /// The slot whose key has `hash` and satisfies `matches` (`>= 0`), or else `~position` of
    /// the empty bucket where that key goes. Call ``reserveOneMore()`` first.
    @inlinable @inline(__always)
    func probe(hash: Int, matches: (Int) -> Bool) -> Int {
        buckets.withUnsafeBufferPointer { buckets in
            let mask = buckets.count &- 1
            let bits = UInt32(truncatingIfNeeded: hash)
            var index = Int(bits) & mask
            while true {
                let bucket = buckets[index]
                if bucket.slot < 0 { return ~index }
                if bucket.hashBits == bits && matches(Int(bucket.slot)) { return Int(bucket.slot) }
                index = (index &+ 1) & mask
            }
        }
    }

    /// Stores `slot` for `hash` in the empty bucket `position` that ``probe(hash:matches:)``
    /// returned, with no change to the table in between.
    @inlinable @inline(__always)
    mutating func insert(slot: Int, hash: Int, at position: Int) {
        buckets.withUnsafeMutableBufferPointer { buckets in
            buckets[position] = Bucket(hashBits: UInt32(truncatingIfNeeded: hash), slot: Int32(truncatingIfNeeded: slot))
        }
        count &+= 1
    }

    /// Removes `slot`, stored for `hash`; it must be present.
    @inlinable @inline(__always)
    mutating func remove(slot: Int, hash: Int) {
        buckets.withUnsafeMutableBufferPointer { buckets in
            let mask = buckets.count &- 1
            let target = Int32(truncatingIfNeeded: slot)
            var hole = Int(UInt32(truncatingIfNeeded: hash)) & mask
            while buckets[hole].slot != target { hole = (hole &+ 1) & mask }
            // Shift back every later entry of the run whose probe passes through the hole.
            var next = (hole &+ 1) & mask
            while buckets[next].slot >= 0 {
                let home = Int(buckets[next].hashBits) & mask
                if (next &- home) & mask >= (next &- hole) & mask {
                    buckets[hole] = buckets[next]
                    hole = next
                }
                next = (next &+ 1) & mask
            }
            buckets[hole] = Self.empty
        }
        count &-= 1
    }

    /// Forgets every key and frees the storage.
    mutating func removeAll() {
        buckets = []
        count = 0
    }

    /// Doubles the table (16 buckets at first), re-placing every entry by its stored bits.
    @usableFromInline
    mutating func grow() {
        let old = buckets
        let capacity = Swift.max(16, 2 * old.count)
        precondition(capacity <= Int(UInt32.max), "MemoryStore: too many entries for the key index")
        buckets = ContiguousArray(repeating: Self.empty, count: capacity)
        buckets.withUnsafeMutableBufferPointer { buckets in
            let mask = capacity - 1
            for bucket in old where bucket.slot >= 0 {
                var index = Int(bucket.hashBits) & mask
                while buckets[index].slot >= 0 { index = (index &+ 1) & mask }
                buckets[index] = bucket
            }
        }
    }

    /// Every stored slot (for diagnostics; O(capacity)).
    func allSlots() -> [Int] {
        buckets.filter { $0.slot >= 0 }.map { Int($0.slot) }
    }

    /// Descriptions of broken invariants: the count, and every entry reachable from its home.
    func invariantViolations() -> [String] {
        var problems: [String] = []
        let stored = buckets.filter { $0.slot >= 0 }.count
        if stored != count { problems.append("key index holds \(stored) entries, count \(count)") }
        if !buckets.isEmpty, 2 * count > buckets.count { problems.append("key index over half full") }
        let mask = buckets.count - 1
        for (position, bucket) in buckets.enumerated() where bucket.slot >= 0 {
            var index = Int(bucket.hashBits) & mask
            while index != position {
                if buckets[index].slot < 0 {
                    problems.append("slot \(bucket.slot) unreachable from its home bucket")
                    break
                }
                index = (index + 1) & mask
            }
        }
        return problems
    }
}
