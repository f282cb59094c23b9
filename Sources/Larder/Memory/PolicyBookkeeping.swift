/// The policy list: the eviction policy's bookkeeping, whichever ``EvictionPolicy`` the store uses.
///
/// Holds every policy's structure and switches on a constant kind, rather than an enum with
/// payloads (mutating an enum payload in place would copy its arrays on every call) or an
/// existential (a dynamic call on every hit). The unused policies stay empty (no allocation).
/// The branch is perfectly predictable on the hot path.
///
/// A new policy adds a stored property, an `init` line and a case in each `switch` here.
@usableFromInline
struct PolicyBookkeeping {
    @usableFromInline let kind: EvictionPolicy.Kind
    @usableFromInline var lru: LRUPolicy
    @usableFromInline var s3fifo: S3FIFOPolicy
    @usableFromInline var wTinyLFU: WTinyLFUPolicy

    init(_ policy: EvictionPolicy, countLimit: Int, costLimit: Int, bucketCountLimits: [Int]) {
        kind = policy.kind
        lru = LRUPolicy(bucketCount: kind == .lru ? bucketCountLimits.count : 0)
        s3fifo = kind == .s3fifo
            ? S3FIFOPolicy(countLimit: countLimit, costLimit: costLimit, bucketCountLimits: bucketCountLimits)
            : S3FIFOPolicy(countLimit: 0, costLimit: 0, bucketCountLimits: [])
        wTinyLFU = kind == .wTinyLFU
            ? WTinyLFUPolicy(countLimit: countLimit, costLimit: costLimit, bucketCountLimits: bucketCountLimits)
            : WTinyLFUPolicy(countLimit: 0, costLimit: 0, bucketCountLimits: [])
    }

    /// Sizes the policy for new store-wide limits.
    mutating func resize(countLimit: Int, costLimit: Int) {
        if kind == .s3fifo { s3fifo.resize(countLimit: countLimit, costLimit: costLimit) }
        if kind == .wTinyLFU { wTinyLFU.resize(countLimit: countLimit, costLimit: costLimit) }
    }

    @inlinable @inline(__always)
    mutating func didInsert(_ slot: Int, bucket: Int?, cost: Int, keyHash: Int) {
        switch kind {
        case .lru: lru.didInsert(slot, bucket: bucket, cost: cost, keyHash: keyHash)
        case .s3fifo: s3fifo.didInsert(slot, bucket: bucket, cost: cost, keyHash: keyHash)
        case .wTinyLFU: wTinyLFU.didInsert(slot, bucket: bucket, cost: cost, keyHash: keyHash)
        }
    }

    @inlinable @inline(__always)
    mutating func didUpdate(_ slot: Int, from oldBucket: Int?, to newBucket: Int?, cost: Int) {
        switch kind {
        case .lru: lru.didUpdate(slot, from: oldBucket, to: newBucket, cost: cost)
        case .s3fifo: s3fifo.didUpdate(slot, from: oldBucket, to: newBucket, cost: cost)
        case .wTinyLFU: wTinyLFU.didUpdate(slot, from: oldBucket, to: newBucket, cost: cost)
        }
    }

    @inlinable @inline(__always)
    mutating func didFinishWrite(_ slot: Int) {
        switch kind {
        case .lru: lru.didFinishWrite(slot)
        case .s3fifo: s3fifo.didFinishWrite(slot)
        case .wTinyLFU: wTinyLFU.didFinishWrite(slot)
        }
    }

    @inlinable @inline(__always)
    mutating func didAccess(_ slot: Int, bucket: Int?, keyHash: Int, cost: Int) {
        switch kind {
        case .lru: lru.didAccess(slot, bucket: bucket)
        case .s3fifo: s3fifo.didAccess(slot, bucket: bucket)
        case .wTinyLFU: wTinyLFU.didAccess(slot, bucket: bucket, keyHash: keyHash, cost: cost)
        }
    }

    @inlinable @inline(__always)
    mutating func didRemove(_ slot: Int, bucket: Int?, isEviction: Bool) {
        switch kind {
        case .lru: lru.didRemove(slot, bucket: bucket, isEviction: isEviction)
        case .s3fifo: s3fifo.didRemove(slot, bucket: bucket, isEviction: isEviction)
        case .wTinyLFU: wTinyLFU.didRemove(slot, bucket: bucket, isEviction: isEviction)
        }
    }

    @inlinable
    mutating func victim() -> Int? {
        switch kind {
        case .lru: lru.victim()
        case .s3fifo: s3fifo.victim()
        case .wTinyLFU: wTinyLFU.victim()
        }
    }

    @inlinable
    mutating func victim(inBucket bucket: Int) -> Int? {
        switch kind {
        case .lru: lru.victim(inBucket: bucket)
        case .s3fifo: s3fifo.victim(inBucket: bucket)
        case .wTinyLFU: wTinyLFU.victim(inBucket: bucket)
        }
    }

    mutating func removeAll() {
        switch kind {
        case .lru: lru.removeAll()
        case .s3fifo: s3fifo.removeAll()
        case .wTinyLFU: wTinyLFU.removeAll()
        }
    }

    func slotsInOrder() -> [Int] {
        switch kind {
        case .lru: lru.slotsInOrder()
        case .s3fifo: s3fifo.slotsInOrder()
        case .wTinyLFU: wTinyLFU.slotsInOrder()
        }
    }

    func invariantViolations(live: [Int], bucketOf: (Int) -> Int?, bucketCount: Int) -> [String] {
        switch kind {
        case .lru: lru.invariantViolations(live: live, bucketOf: bucketOf, bucketCount: bucketCount)
        case .s3fifo: s3fifo.invariantViolations(live: live, bucketOf: bucketOf, bucketCount: bucketCount)
        case .wTinyLFU: wTinyLFU.invariantViolations(live: live, bucketOf: bucketOf, bucketCount: bucketCount)
        }
    }
}
