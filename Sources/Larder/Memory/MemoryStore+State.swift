extension MemoryStore {
    /// Why an entry is evicted, for the statistics.
    @usableFromInline
    enum EvictionReason {
        case count, cost, bucket, expiry
    }

    /// One stored entry.
    @usableFromInline
    struct Slot {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var cost: Int
        /// Seconds since the reference date; `.infinity` for an entry that never expires.
        @usableFromInline var expiration: Double
        @usableFromInline var bucket: Int?
        /// `key.hashValue`, kept so that removing the entry never hashes the key again.
        @usableFromInline var hash: Int
        /// When the entry was written, and last written or read (seconds since the reference
        /// date, on the store's stamp clock), for ``MemoryStore/trim(toDate:by:)``.
        @usableFromInline var written: Double
        @usableFromInline var used: Double
        /// The lifetime each read renews (``Expiry/sliding(_:)``), in seconds; `0` for a fixed
        /// expiry.
        @usableFromInline var sliding: Double

        @inlinable
        init(
            key: Key, hash: Int, value: Value, cost: Int, expiration: Double, sliding: Double, bucket: Int?, stamp: Double
        ) {
            self.key = key
            self.hash = hash
            self.value = value
            self.cost = cost
            self.expiration = expiration
            self.bucket = bucket
            self.written = stamp
            self.used = stamp
            self.sliding = sliding
        }
    }

    /// What ``State/removeSlot(_:isEviction:)`` hands back of a removed entry.
    @usableFromInline
    struct Removed {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var expiration: Double

        @inlinable
        init(key: Key, value: Value, expiration: Double) {
            self.key = key
            self.value = value
            self.expiration = expiration
        }
    }

    @usableFromInline
    enum ReadResult {
        case hit(Value, cost: Int, expiration: Double, sliding: Double)
        case miss
        case expired(Value)
        case needsClock
    }

    @usableFromInline
    enum ContainsResult {
        case present
        case absent
        case expired(Value)
        case needsClock
    }

    /// Everything mutable in a store; only ever touched with the store's lock held.
    @usableFromInline
    struct State {
        @usableFromInline var limits: Limits
        @usableFromInline var index = KeyIndex()
        @usableFromInline var slots: ContiguousArray<Slot?> = []
        /// A stack of the free slots: its first `freeCount` elements (never shrinks, so that
        /// freeing and reusing a slot on every evicting write never reallocates).
        @usableFromInline var freeSlots: ContiguousArray<Int> = []
        @usableFromInline var freeCount = 0
        /// The entries that can expire, earliest first, so that overflow drops them first.
        @usableFromInline var expiry = ExpiryHeap()
        @usableFromInline var policy: PolicyBookkeeping
        @usableFromInline var usage: Usage
        @usableFromInline var statistics = Statistics()
        /// The reads and writes made for the ``Storage`` that owns the store (counted here,
        /// under the lock they take anyway, rather than in atomics of the storage's own).
        @usableFromInline var ownerCounts = OwnerCounts()

        init(limits: Limits, policy: EvictionPolicy) {
            self.limits = limits
            self.policy = PolicyBookkeeping(
                policy, countLimit: limits.countLimit, costLimit: limits.costLimit,
                bucketCountLimits: limits.bucketCountLimits
            )
            usage = Usage(bucketCount: limits.bucketMaxCosts.count)
        }

        // MARK: Reads

        /// Looks `key` up as a read. `now` is `nil` when the caller has not read the clock.
        @inlinable @inline(__always)
        mutating func read(_ key: Key, hash: Int, now: Double?, stamp: Double, forOwner: Bool) -> ReadResult {
            guard let slot = slot(of: key, hash: hash) else {
                statistics.misses += 1
                if forOwner { ownerCounts.misses += 1 }
                return .miss
            }
            var expiration = slots[slot].unsafelyUnwrapped.expiration
            let sliding = slots[slot].unsafelyUnwrapped.sliding
            if expiration != .infinity {
                guard let now else { return .needsClock }
                if expiration <= now {
                    statistics.misses += 1
                    statistics.expirations += 1
                    if forOwner { ownerCounts.misses += 1 }
                    return .expired(removeSlot(slot).value)
                }
                if sliding > 0, now + sliding > expiration {
                    // A sliding lifetime starts again at each read.
                    expiration = now + sliding
                    slots[slot]!.expiration = expiration
                    expiry.update(slot, expiration: expiration)
                }
            }
            statistics.hits += 1
            if forOwner { ownerCounts.hits += 1 }
            slots[slot]!.used = stamp
            policy.didAccess(
                slot, bucket: slots[slot].unsafelyUnwrapped.bucket, keyHash: hash, cost: slots[slot].unsafelyUnwrapped.cost)
            return .hit(
                slots[slot].unsafelyUnwrapped.value, cost: slots[slot].unsafelyUnwrapped.cost, expiration: expiration,
                sliding: sliding)
        }

        @inlinable
        mutating func contains(_ key: Key, hash: Int, now: Double?) -> ContainsResult {
            guard let slot = slot(of: key, hash: hash) else { return .absent }
            let expiration = slots[slot].unsafelyUnwrapped.expiration
            if expiration != .infinity {
                guard let now else { return .needsClock }
                if expiration <= now {
                    statistics.expirations += 1
                    return .expired(removeSlot(slot).value)
                }
            }
            return .present
        }

        // MARK: Writes

        /// Stores an entry, evicting as the limits require: when the write takes a total over
        /// its limit, every expired entry goes first, then the policy's victims until each
        /// total that was over its limit is at or below its target.
        ///
        /// `now` is set whenever `expiration` is finite. Returns whether the entry was stored,
        /// or `nil`, having changed nothing, when the write may overflow while entries that can
        /// expire are held and `now` is `nil`: the caller reads the clock and calls again.
        @inlinable
        mutating func insert(
            _ value: Value, forKey key: Key, hash: Int, cost: Int, expiration: Double, sliding: Double = 0,
            now: Double?, stamp: Double, into graveyard: inout Graveyard
        ) -> Bool? {
            guard
                limits.countLimit > 0,
                cost <= limits.entryCostLimit,
                let bucket = limits.bucket(forCost: cost),
                expiration == .infinity || expiration > now!
            else {
                statistics.rejections += 1
                if let existing = slot(of: key, hash: hash) { graveyard.bury(removeSlot(existing).value) }
                return false
            }
            if now == nil, !expiry.isEmpty, mayOverflow(cost: cost, bucket: bucket) { return nil }
            statistics.writes += 1

            // Keep the total representable: only reachable with costs near `Int.max`.
            while usage.cost > Int.max - cost, let victim = policy.victim() {
                evict(victim, reason: .cost, into: &graveyard)
            }

            // One probe run finds an existing entry or the bucket for a new one.
            index.reserveOneMore()
            let probe = index.probe(hash: hash) { slots[$0].unsafelyUnwrapped.key == key }
            let slot: Int
            if probe >= 0 {
                slot = probe
                let oldBucket = slots[slot].unsafelyUnwrapped.bucket
                let oldExpiration = slots[slot].unsafelyUnwrapped.expiration
                usage.subtract(cost: slots[slot].unsafelyUnwrapped.cost, bucket: oldBucket)
                let old = slots[slot].unsafelyUnwrapped.value
                slots[slot]!.value = value
                slots[slot]!.cost = cost
                slots[slot]!.expiration = expiration
                slots[slot]!.bucket = bucket
                slots[slot]!.written = stamp
                slots[slot]!.used = stamp
                slots[slot]!.sliding = sliding
                graveyard.bury(old)
                if oldExpiration != expiration {
                    if oldExpiration == .infinity {
                        expiry.insert(slot, expiration: expiration)
                    } else if expiration == .infinity {
                        expiry.remove(slot)
                    } else {
                        expiry.update(slot, expiration: expiration)
                    }
                }
                policy.didUpdate(slot, from: oldBucket, to: bucket, cost: cost)
            } else {
                if freeCount == 0 {
                    slot = slots.count
                    slots.append(Slot(
                        key: key, hash: hash, value: value, cost: cost, expiration: expiration, sliding: sliding,
                        bucket: bucket, stamp: stamp))
                } else {
                    freeCount &-= 1
                    slot = freeSlots[freeCount]
                    // A free slot holds `nil`, which owns nothing: initialize over it in place
                    // rather than assign (a copy of the new entry, then value-witness destroys
                    // of both the temporary and the old `nil`).
                    slots.withUnsafeMutableBufferPointer { slots in
                        (slots.baseAddress.unsafelyUnwrapped + slot).initialize(
                            to: Slot(
                                key: key, hash: hash, value: value, cost: cost, expiration: expiration, sliding: sliding,
                                bucket: bucket, stamp: stamp))
                    }
                }
                index.insert(slot: slot, hash: hash, at: ~probe)
                if expiration != .infinity { expiry.insert(slot, expiration: expiration) }
                policy.didInsert(slot, bucket: bucket, cost: cost, keyHash: hash)
            }
            usage.add(cost: cost, bucket: bucket)

            // Only the new entry's bucket and the store-wide totals can have grown.
            let bucketIsOver = bucket.map { usage.bucketCounts[$0] > limits.bucketCountLimits[$0] } ?? false
            let countIsOver = usage.count > limits.countLimit
            let costIsOver = usage.cost > limits.costLimit
            if bucketIsOver || countIsOver || costIsOver {
                // The written entry has not expired, so this never drops it; `now` is set
                // whenever `expiry` holds anything (checked above).
                if let now { removeExpired(now: now, into: &graveyard) }
                if bucketIsOver, let bucket {
                    let target = limits.bucketCountTargets[bucket]
                    while usage.bucketCounts[bucket] > target,
                          let victim = policy.victim(inBucket: bucket), victim != slot {
                        evict(victim, reason: .bucket, into: &graveyard)
                    }
                }
                if countIsOver {
                    while usage.count > limits.countTarget, let victim = policy.victim(), victim != slot {
                        evict(victim, reason: .count, into: &graveyard)
                    }
                }
                if costIsOver {
                    while usage.cost > limits.costTarget, let victim = policy.victim(), victim != slot {
                        evict(victim, reason: .cost, into: &graveyard)
                    }
                }
            }
            // S3-FIFO places the written entry only now, so that its own write cannot evict it.
            policy.didFinishWrite(slot)
            return true
        }

        /// Whether a write of `cost` into `bucket` could take a total over its limit.
        @inlinable
        func mayOverflow(cost: Int, bucket: Int?) -> Bool {
            if usage.count >= limits.countLimit || usage.cost > limits.costLimit - cost { return true }
            guard let bucket else { return false }
            return usage.bucketCounts[bucket] >= limits.bucketCountLimits[bucket]
        }

        /// The slot holding `key`, whose hash is `hash`.
        @inlinable @inline(__always)
        func slot(of key: Key, hash: Int) -> Int? {
            index.find(hash: hash) { slots[$0].unsafelyUnwrapped.key == key }
        }

        /// Removes the entry for `key`, returning it.
        @inlinable
        mutating func remove(_ key: Key, hash: Int) -> Removed? {
            guard let slot = slot(of: key, hash: hash) else { return nil }
            return removeSlot(slot)
        }

        /// Removes every entry expired at `now`, earliest first; returns how many.
        ///
        /// - Complexity: O(k log n) for k expired entries of n that can expire.
        @discardableResult @usableFromInline
        mutating func removeExpired(now: Double, into graveyard: inout Graveyard) -> Int {
            var removed = 0
            while let earliest = expiry.earliest, earliest.expiration <= now {
                evict(earliest.slot, reason: .expiry, into: &graveyard)
                removed += 1
            }
            return removed
        }

        /// Expired entries first, then the policy's victims, until at most `count` remain.
        mutating func trim(toCount count: Int, now: Double, into graveyard: inout Graveyard) {
            guard usage.count > count else { return }
            removeExpired(now: now, into: &graveyard)
            while usage.count > count, let victim = policy.victim() {
                evict(victim, reason: .count, into: &graveyard)
            }
        }

        /// Expired entries first, then the policy's victims, until the total cost is at most
        /// `cost`.
        mutating func trim(toCost cost: Int, now: Double, into graveyard: inout Graveyard) {
            guard usage.cost > cost else { return }
            removeExpired(now: now, into: &graveyard)
            while usage.cost > cost, let victim = policy.victim() {
                evict(victim, reason: .cost, into: &graveyard)
            }
        }

        /// Removes every entry written (or last used) before `cutoff`; returns how many.
        ///
        /// - Complexity: O(n) over the slots, plus O(log k) per removed entry that can expire.
        mutating func remove(olderThan cutoff: Double, by age: EntryAge, into graveyard: inout Graveyard) -> Int {
            var removed = 0
            for slot in slots.indices {
                guard let entry = slots[slot] else { continue }
                let time = age == .written ? entry.written : entry.used
                guard time < cutoff else { continue }
                let gone = removeSlot(slot)
                if graveyard.departed != nil { graveyard.departed!.append((gone.key, .removed)) }
                graveyard.bury(gone.value)
                removed += 1
            }
            return removed
        }

        /// The keys of entries used at or after `cutoff`.
        func keys(usedSince cutoff: Double) -> Set<Key> {
            var keys = Set<Key>()
            for case let entry? in slots where entry.used >= cutoff { keys.insert(entry.key) }
            return keys
        }

        /// Empties the store, returning the old storage so the caller releases it unlocked.
        mutating func removeAll() -> ContiguousArray<Slot?> {
            let old = slots
            index.removeAll()
            slots = []
            freeSlots = []
            freeCount = 0
            expiry.removeAll()
            policy.removeAll()
            usage = Usage(bucketCount: limits.bucketMaxCosts.count)
            return old
        }

        // MARK: Removal primitives

        @inlinable @inline(__always)
        mutating func evict(_ slot: Int, reason: EvictionReason, into graveyard: inout Graveyard) {
            switch reason {
            case .count: statistics.countEvictions += 1
            case .cost: statistics.costEvictions += 1
            case .bucket: statistics.bucketEvictions += 1
            case .expiry: statistics.expirations += 1
            }
            let entry = removeSlot(slot, isEviction: reason != .expiry)
            if graveyard.departed != nil { graveyard.departed!.append((entry.key, reason == .expiry ? .expired : .evicted)) }
            graveyard.bury(entry.value)
        }

        /// Unlinks the entry in `slot` from every structure and frees the slot.
        ///
        /// `isEviction`: the policy chose the entry to meet a limit (S3-FIFO then remembers the
        /// key in its ghost queue); `false` for removals, refusals and expiry.
        @inlinable @inline(__always)
        mutating func removeSlot(_ slot: Int, isEviction: Bool = false) -> Removed {
            let (removed, hash, cost, bucket) = slots.withUnsafeMutableBufferPointer {
                slots -> (Removed, Int, Int, Int?) in
                let address = slots.baseAddress.unsafelyUnwrapped + slot
                // Move the key and the value out of the entry in place, read its plain fields,
                // then mark the slot free. Moving or copying the whole entry out instead (it is
                // large, so the compiler keeps it in memory) destroyed it through generic value
                // witnesses, plus a retain and release of the value: about 200 instructions of
                // an evicting insert's 1,600. The other fields are trivial, so once key and
                // value are moved out the payload owns nothing and `nil` is written over it.
                let taken = withUnsafeMutablePointer(to: &address.pointee!) { entry -> (Removed, Int, Int, Int?) in
                    let removed = Removed(
                        key: entry.pointer(to: \.key).unsafelyUnwrapped.move(),
                        value: entry.pointer(to: \.value).unsafelyUnwrapped.move(),
                        expiration: entry.pointee.expiration)
                    return (removed, entry.pointee.hash, entry.pointee.cost, entry.pointee.bucket)
                }
                // (`initialize`, not assignment: nothing is left to destroy.)
                address.initialize(to: nil)
                return taken
            }
            index.remove(slot: slot, hash: hash)
            if removed.expiration != .infinity { expiry.remove(slot) }
            policy.didRemove(slot, bucket: bucket, isEviction: isEviction)
            usage.subtract(cost: cost, bucket: bucket)
            if freeCount < freeSlots.count {
                freeSlots[freeCount] = slot
            } else {
                freeSlots.append(slot)
            }
            freeCount &+= 1
            return removed
        }

        /// Live keys in the order of ``keysByRecency()``.
        func liveKeysByRecency(now: Double) -> [Key] {
            policy.slotsInOrder().compactMap { slot in
                let entry = slots[slot]!
                return entry.expiration > now ? entry.key : nil
            }
        }
    }
}
