/// The eviction policy's bookkeeping, whichever ``EvictionPolicy`` the store uses.
///
/// Holds both policies' structures and branches on a constant flag, rather than an enum with
/// payloads: mutating an enum payload in place would copy its arrays on every call. The unused
/// policy stays empty (no allocation). The branch is perfectly predictable on the hot path.
///
/// The store calls, for each write: `didInsert` (new key) or `didUpdate` (existing key), then
/// its eviction loops (`victim()`, `victim(inBucket:)`, `didRemove`), then `didFinishWrite`.
@usableFromInline
struct PolicyBookkeeping {
    @usableFromInline let isS3FIFO: Bool
    @usableFromInline var lru: LRUPolicy
    @usableFromInline var s3fifo: S3FIFOPolicy

    init(_ policy: EvictionPolicy, countLimit: Int, costLimit: Int, bucketCountLimits: [Int]) {
        isS3FIFO = policy.kind == .s3fifo
        lru = LRUPolicy(bucketCount: isS3FIFO ? 0 : bucketCountLimits.count)
        s3fifo = isS3FIFO
            ? S3FIFOPolicy(countLimit: countLimit, costLimit: costLimit, bucketCountLimits: bucketCountLimits)
            : S3FIFOPolicy(countLimit: 0, costLimit: 0, bucketCountLimits: [])
    }

    /// Whether ``didInsert(_:bucket:cost:keyHash:)`` needs the key's hash (for a ghost queue).
    @inlinable var needsKeyHash: Bool { isS3FIFO }

    @inlinable @inline(__always)
    mutating func didInsert(_ slot: Int, bucket: Int?, cost: Int, keyHash: Int) {
        if isS3FIFO {
            s3fifo.didInsert(slot, bucket: bucket, cost: cost, keyHash: keyHash)
        } else {
            lru.didInsert(slot, bucket: bucket)
        }
    }

    @inlinable @inline(__always)
    mutating func didUpdate(_ slot: Int, from oldBucket: Int?, to newBucket: Int?, cost: Int) {
        if isS3FIFO {
            s3fifo.didUpdate(slot, bucket: newBucket, cost: cost)
        } else if oldBucket == newBucket {
            lru.didAccess(slot, bucket: newBucket)
        } else {
            lru.didChangeBucket(slot, from: oldBucket, to: newBucket)
        }
    }

    @inlinable @inline(__always)
    mutating func didFinishWrite(_ slot: Int) {
        if isS3FIFO { s3fifo.didFinishWrite(slot) }
    }

    @inlinable @inline(__always)
    mutating func didAccess(_ slot: Int, bucket: Int?) {
        if isS3FIFO {
            s3fifo.didAccess(slot)
        } else {
            lru.didAccess(slot, bucket: bucket)
        }
    }

    /// `isEviction`: the policy chose this entry (not a removal, replacement or expiry).
    @inlinable @inline(__always)
    mutating func didRemove(_ slot: Int, bucket: Int?, isEviction: Bool) {
        if isS3FIFO {
            s3fifo.didRemove(slot, isEviction: isEviction)
        } else {
            lru.didRemove(slot, bucket: bucket)
        }
    }

    @inlinable
    mutating func victim() -> Int? {
        isS3FIFO ? s3fifo.victim() : lru.victim()
    }

    @inlinable
    mutating func victim(inBucket bucket: Int) -> Int? {
        isS3FIFO ? s3fifo.victim(inBucket: bucket) : lru.victim(inBucket: bucket)
    }

    mutating func removeAll() {
        if isS3FIFO { s3fifo.removeAll() } else { lru.removeAll() }
    }
}
