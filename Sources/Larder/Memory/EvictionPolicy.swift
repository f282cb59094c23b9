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
        case lru, s3fifo
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

    public var description: String {
        switch kind {
        case .lru: "lru"
        case .s3fifo: "s3fifo"
        }
    }
}
