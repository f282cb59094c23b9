/// The popularity estimate of W-TinyLFU (``EvictionPolicy/wTinyLFU``): a count-min sketch of
/// 4-bit counters behind a doorkeeper bloom filter, halved periodically so that old popularity
/// fades.
///
/// - Counters: 4 rows of 4-bit counters (saturating at 15), packed 16 to a `UInt64`. A key's
///   four counters and its doorkeeper bits all lie in one 64-byte block of 8 words (one cache
///   line), chosen by the key's hash: rows 0-2 pick one of two words each (words 0-5), row 3
///   has word 6, and each row picks one of the word's 16 counters.
/// - Doorkeeper: a bloom filter of two bits per key in the block's last word. The first
///   increment of a key only sets its doorkeeper bits; later ones go to the counters. The
///   estimate is the minimum of the four counters, plus one when the doorkeeper holds the key.
///   Keys seen once (most of a long tail) so never occupy the counters.
/// - Aging: after ``samplePeriod`` recorded uses (``recordUse(_:)``) every counter is halved and
///   the doorkeeper cleared.
///
/// The table is sized for a number of keys (``capacity``): about 16 counters (8 bytes) per key,
/// 112 counters and 64 doorkeeper bits per block, the blocks rounded up to a power of two (with
/// 8 counters per key, collisions raised the miss ratio 2-3% above libCacheSim's at 1% cache
/// sizes). ``grow(toFit:limit:)`` doubles it (forgetting the counts) as a
/// store without a count limit fills.
///
/// - Complexity: ``increment(_:)`` and ``estimate(_:)`` are O(1) and never allocate. Halving is
///   O(capacity) once every ``samplePeriod`` uses, so amortized O(1).
@usableFromInline
struct FrequencySketch {
    /// Counters saturate here.
    @inlinable static var maxCount: UInt64 { 15 }
    /// Halve after this many uses per key of capacity: 16, what a counter and its doorkeeper bit
    /// count to (15 + 1). By TinyLFU's small-counter rule a key used more than sample ÷ capacity
    /// times in one sample is in the cache's top share whatever its exact count, so counters
    /// need count no further than that; here the counters' width sets the sample. libCacheSim's
    /// WTinyLFU halves after 32 per key, with 32-bit counters; with 4-bit ones that period left
    /// the hottest keys saturated, tied in every admission contest (Benchmarks/policies/README.md).
    @inlinable static var sampleFactor: Int { 16 }
    /// The smallest table, in keys.
    @inlinable static var minimumCapacity: Int { 16 }

    /// 8 words per block (7 of counters, 1 of doorkeeper bits); a power-of-two number of blocks.
    @usableFromInline var table: SketchTable
    /// `table.words`, kept here so that a hit loads no class field to reach its block.
    @usableFromInline var words: UnsafeMutablePointer<UInt64>
    @usableFromInline var blockMask: Int
    /// The number of keys the table is sized for.
    @usableFromInline var capacity: Int
    /// Uses recorded since the last halving.
    @usableFromInline var uses = 0
    @usableFromInline var samplePeriod: Int

    /// Creates a sketch for `capacity` keys.
    init(capacity: Int) {
        self.capacity = Swift.max(capacity, Self.minimumCapacity)
        table = SketchTable(count: 0)
        words = table.words
        blockMask = 0
        samplePeriod = 0
        allocate()
    }

    /// The number of 64-byte blocks for `capacity` keys: 16 counters per key, 112 per block.
    static func blockCount(forCapacity capacity: Int) -> Int {
        let counters = 16 * Swift.max(capacity, minimumCapacity)
        var blocks = 1
        while blocks * 112 < counters { blocks <<= 1 }
        return blocks
    }

    /// (Re)allocates empty storage for ``capacity``.
    mutating func allocate() {
        let blocks = Self.blockCount(forCapacity: capacity)
        table = SketchTable(count: 8 * blocks)
        words = table.words
        blockMask = blocks - 1
        samplePeriod = Self.sampleFactor * capacity
        uses = 0
    }

    /// Resizes for `capacity` keys if it differs from the current one, forgetting every count.
    mutating func resize(capacity newCapacity: Int) {
        let newCapacity = Swift.max(newCapacity, Self.minimumCapacity)
        guard newCapacity != capacity else { return }
        capacity = newCapacity
        allocate()
    }

    /// Doubles the capacity (up to `limit`) while `count` keys exceed it.
    @usableFromInline
    mutating func grow(toFit count: Int, limit: Int) {
        guard count > capacity, capacity < limit else { return }
        var newCapacity = capacity
        while newCapacity < count, newCapacity < limit { newCapacity = Swift.min(2 * newCapacity, limit) }
        resize(capacity: newCapacity)
    }

    // MARK: Positions

    /// Where a key's counters and doorkeeper bits are. Shared with the tests' reference model,
    /// which stores the counters its own way.
    @usableFromInline
    struct Positions {
        /// The word index (into the table) and the bit offset of each row's counter.
        @usableFromInline var words: (Int, Int, Int, Int)
        @usableFromInline var shifts: (UInt64, UInt64, UInt64, UInt64)
        @usableFromInline var doorkeeperWord: Int
        @usableFromInline var doorkeeperBits: UInt64

        @inlinable
        init(words: (Int, Int, Int, Int), shifts: (UInt64, UInt64, UInt64, UInt64), doorkeeperWord: Int, doorkeeperBits: UInt64) {
            self.words = words
            self.shifts = shifts
            self.doorkeeperWord = doorkeeperWord
            self.doorkeeperBits = doorkeeperBits
        }
    }

    /// The positions of the key whose hash is `hash` in a table of `blockMask + 1` blocks.
    @inlinable @inline(__always)
    static func positions(of hash: Int, blockMask: Int) -> Positions {
        // Two independent 64-bit mixes of the key's hash (SplitMix64's finalizer).
        var a = UInt64(bitPattern: Int64(hash)) &+ 0x9E37_79B9_7F4A_7C15
        a = (a ^ (a >> 30)) &* 0xBF58_476D_1CE4_E5B9
        a = (a ^ (a >> 27)) &* 0x94D0_49BB_1331_11EB
        a ^= a >> 31
        var b = a &+ 0x9E37_79B9_7F4A_7C15
        b = (b ^ (b >> 30)) &* 0xBF58_476D_1CE4_E5B9
        b = (b ^ (b >> 27)) &* 0x94D0_49BB_1331_11EB
        b ^= b >> 31
        let block = Int(truncatingIfNeeded: a) & blockMask &* 8
        // Rows 0-2: word block + 2r + one bit of b; row 3: word block + 6. Each row's counter:
        // 4 bits of b. Doorkeeper: two of word block + 7's bits.
        @inline(__always) func word(_ row: Int) -> Int { block &+ 2 &* row &+ Int(truncatingIfNeeded: (b >> UInt64(5 &* row)) & 1) }
        @inline(__always) func shift(_ row: Int) -> UInt64 { ((b >> UInt64(5 &* row &+ 1)) & 15) &* 4 }
        let doorkeeperBits = (1 as UInt64) << ((b >> 40) & 63) | (1 as UInt64) << ((b >> 46) & 63)
        return Positions(
            words: (word(0), word(1), word(2), block &+ 6), shifts: (shift(0), shift(1), shift(2), shift(3)),
            doorkeeperWord: block &+ 7, doorkeeperBits: doorkeeperBits
        )
    }

    // MARK: Counting

    /// Counts one occurrence of the key whose hash is `hash`: into the doorkeeper the first
    /// time, then into each of its four counters that is not saturated.
    @inlinable @inline(__always)
    mutating func increment(_ hash: Int) {
        let at = Self.positions(of: hash, blockMask: blockMask)
        do {
            let table = words
            let doorkeeper = table[at.doorkeeperWord]
            if doorkeeper & at.doorkeeperBits != at.doorkeeperBits {
                table[at.doorkeeperWord] = doorkeeper | at.doorkeeperBits
                return
            }
            // Branch-free: adds 1 unless the counter is at 15 ((15 + 1) >> 4 == 1), so a hit
            // never mispredicts on a counter's value.
            @inline(__always) func bump(_ word: Int, _ shift: UInt64) {
                let counter = (table[word] >> shift) & 15
                table[word] &+= (((counter &+ 1) >> 4) ^ 1) << shift
            }
            bump(at.words.0, at.shifts.0)
            bump(at.words.1, at.shifts.1)
            bump(at.words.2, at.shifts.2)
            bump(at.words.3, at.shifts.3)
        }
    }

    /// Counts one use towards the aging period; halves every count when the period is over.
    @inlinable @inline(__always)
    mutating func recordUse() {
        uses &+= 1
        if uses >= samplePeriod { halve() }
    }

    /// The estimated number of occurrences of the key whose hash is `hash` (at most 16).
    @inlinable
    func estimate(_ hash: Int) -> Int {
        let at = Self.positions(of: hash, blockMask: blockMask)
        do {
            let table = UnsafePointer(words)
            var minimum = (table[at.words.0] >> at.shifts.0) & 15
            minimum = Swift.min(minimum, (table[at.words.1] >> at.shifts.1) & 15)
            minimum = Swift.min(minimum, (table[at.words.2] >> at.shifts.2) & 15)
            minimum = Swift.min(minimum, (table[at.words.3] >> at.shifts.3) & 15)
            let seen = table[at.doorkeeperWord] & at.doorkeeperBits == at.doorkeeperBits
            return Int(minimum) + (seen ? 1 : 0)
        }
    }

    /// Halves every counter and clears the doorkeeper (the aging step of TinyLFU).
    @usableFromInline
    mutating func halve() {
        uses = 0
        let table = words
        for index in 0..<self.table.count {
            table[index] = index & 7 == 7 ? 0 : (table[index] >> 1) & 0x7777_7777_7777_7777
        }
    }

    /// Forgets every count, keeping the size.
    mutating func clear() {
        uses = 0
        words.update(repeating: 0, count: table.count)
    }
}

/// The words of a ``FrequencySketch``: memory of its own rather than a `ContiguousArray`, so
/// that an increment on a hit is plain loads and stores (the array cost a uniqueness check and,
/// as the optimizer left it, an out-of-line closure call per increment).
///
/// Not copy-on-write: copies of a sketch share it. Only the store's one sketch, behind the
/// store's lock, is ever mutated; copies (the invariant checks) only read.
@usableFromInline
final class SketchTable {
    @usableFromInline let words: UnsafeMutablePointer<UInt64>
    @usableFromInline let count: Int

    /// The alignment of the words: a block of 8 words is one 64-byte cache line only if the
    /// table starts on a line (`malloc` aligns to 16 bytes, so three blocks in four would
    /// straddle two lines and an increment would touch both).
    @usableFromInline static var alignment: Int { 64 }

    /// `count` zeroed words, the first at a multiple of 64 bytes.
    init(count: Int) {
        let raw = UnsafeMutableRawPointer.allocate(
            byteCount: Swift.max(count, 1) * MemoryLayout<UInt64>.stride, alignment: Self.alignment)
        words = raw.initializeMemory(as: UInt64.self, repeating: 0, count: Swift.max(count, 1))
        self.count = count
    }

    deinit {
        UnsafeMutableRawPointer(words).deallocate()
    }
}
