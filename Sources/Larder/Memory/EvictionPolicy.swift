/// How a ``MemoryStore`` chooses which entry to evict when a limit is exceeded.
///
/// The policy only decides *which* entry goes; *whether* and *how many* go is decided by the
/// limits (``MemoryStore/Configuration/countLimit``, ``MemoryStore/Configuration/costLimit``,
/// the size buckets and ``MemoryStore/Configuration/overflowTrimRatio``), which mean the same
/// under every policy.
///
/// - ``lru`` evicts the least recently used entry. Every hit moves the entry to the front of a
///   recency list.
/// - ``s3fifo`` is S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
///   SOSP 2023): a small FIFO queue that new entries enter, a main FIFO queue for entries read
///   again while in the small one, 2-bit frequency counters, and a ghost queue that remembers
///   the keys recently evicted from the small queue. A hit only bumps a counter, so reads never
///   move list nodes. It keeps more of a skewed (Zipf-like) working set than LRU at the same
///   size, and quickly drops keys that are read once and never again (scans, one-hit wonders).
/// - ``wTinyLFU`` is W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient
///   Cache Admission Policy", 2017): a 1% LRU window in front of a segmented LRU main cache,
///   and a frequency sketch that admits a window entry into main only if it was used more
///   often than main's victim. It keeps the most of a skewed working set of the three.
///
/// ```swift
/// let store = try MemoryStore<URL, Data> {
///     $0.countLimit = 10_000
///     $0.policy = .s3fifo
/// }
/// ```
///
/// New policies may be added in later versions, so this is a struct with static members rather
/// than an enum that a `switch` would have to cover exhaustively.
public struct EvictionPolicy: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    enum Kind: Sendable, Hashable {
        case lru, s3fifo, wTinyLFU
    }

    @usableFromInline let kind: Kind

    @inlinable
    init(_ kind: Kind) {
        self.kind = kind
    }

    /// Least recently used: evict the entry that was read or written longest ago.
    ///
    /// The default. A hit moves the entry to the front of a doubly-linked recency list.
    public static let lru = EvictionPolicy(.lru)

    /// S3-FIFO: a small FIFO (10% of each limit), a main FIFO with 2-bit frequency counters,
    /// and a ghost queue of recently evicted keys.
    ///
    /// A new entry enters the small queue, or the main queue when its key is in the ghost queue.
    /// When the small queue must give up an entry, its oldest entry moves to the main queue if
    /// it was read at least twice, otherwise it is evicted and its key remembered in the ghost
    /// queue. When the main queue must give up an entry, its oldest entry is evicted unless its
    /// counter is non-zero, in which case the counter drops by one and the entry goes back to
    /// the front of the main queue (CLOCK). A hit only increments the counter, saturating at 3.
    ///
    /// The parameters are those of the paper and of libCacheSim's `S3FIFO`: small-queue ratio
    /// 0.1, move-to-main threshold 2, and a ghost queue as large as the main queue.
    ///
    /// Related paper: <https://dl.acm.org/doi/10.1145/3600006.3613147>
    public static let s3fifo = EvictionPolicy(.s3fifo)

    /// W-TinyLFU: a small LRU window (1% of each limit) in front of a segmented LRU main cache
    /// (probation 20%, protected 80%), with admission by estimated popularity.
    ///
    /// A new entry enters the window. When room is needed, the window's least recently used
    /// entry (the candidate) moves to main while main has room; otherwise it competes with
    /// main's victim (probation's least recently used entry): the one a frequency sketch has
    /// seen more often stays, the other is evicted, and a tie keeps main's. A hit in probation
    /// moves the entry to protected; protected's least recently used entries fall back to
    /// probation when it is over its share. The sketch is a count-min sketch of 4-bit counters
    /// with a doorkeeper bloom filter in front, halved after 16 uses per entry so that old
    /// popularity fades; it costs about 9 bytes per entry.
    ///
    /// It keeps the most of a skewed (Zipf-like) working set of Larder's policies, and resists
    /// scans and one-hit wonders like S3-FIFO. A hit costs a list move plus a sketch update.
    /// The rules follow libCacheSim's `WTinyLFU` (window 0.01, SLRU main), which replays within
    /// 2% of it (Benchmarks/policies).
    ///
    /// Related paper: Einziger, Friedman, Manes, "TinyLFU: A Highly Efficient Cache Admission
    /// Policy", ACM Transactions on Storage 2017, <https://doi.org/10.1145/3149371>
    public static let wTinyLFU = EvictionPolicy(.wTinyLFU)

    public var description: String {
        switch kind {
        case .lru: "lru"
        case .s3fifo: "s3fifo"
        case .wTinyLFU: "wTinyLFU"
        }
    }
}
