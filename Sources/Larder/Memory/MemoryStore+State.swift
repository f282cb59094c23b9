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

        @inlinable
        init(key: Key, hash: Int, value: Value, cost: Int, expiration: Double, bucket: Int?) {
            self.key = key
            self.hash = hash
            self.value = value
            self.cost = cost
            self.expiration = expiration
            self.bucket = bucket
        }
    }

    @usableFromInline
    enum ReadResult {
        case hit(Value, cost: Int, expiration: Double)
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
        @usableFromInline let limits: Limits
        @usableFromInline var index = KeyIndex()
        @usableFromInline var slots: ContiguousArray<Slot?> = []
        /// A stack of the free slots: its first `freeCount` elements (never shrinks, so that
        /// freeing and reusing a slot on every evicting write never reallocates).
        @usableFromInline var freeSlots: ContiguousArray<Int> = []
        @usableFromInline var freeCount = 0
        @usableFromInline var policy: PolicyBookkeeping
        @usableFromInline var usage: Usage
        @usableFromInline var statistics = Statistics()

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
        mutating func read(_ key: Key, hash: Int, now: Double?) -> ReadResult {
            guard let slot = slot(of: key, hash: hash) else {
                statistics.misses += 1
                return .miss
            }
            let expiration = slots[slot].unsafelyUnwrapped.expiration
            if expiration != .infinity {
                guard let now else { return .needsClock }
                if expiration <= now {
                    statistics.misses += 1
                    statistics.expirations += 1
                    return .expired(removeSlot(slot).value)
                }
            }
            statistics.hits += 1
            policy.didAccess(slot, bucket: slots[slot].unsafelyUnwrapped.bucket)
            return .hit(slots[slot].unsafelyUnwrapped.value, cost: slots[slot].unsafelyUnwrapped.cost, expiration: expiration)
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

        /// Stores an entry, evicting as the limits require. `now` is set whenever
        /// `expiration` is finite.
        @inlinable
        mutating func insert(
            _ value: Value, forKey key: Key, hash: Int, cost: Int, expiration: Double, now: Double?,
            into graveyard: inout Graveyard
        ) -> Bool {
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
                usage.subtract(cost: slots[slot].unsafelyUnwrapped.cost, bucket: oldBucket)
                let old = slots[slot].unsafelyUnwrapped.value
                slots[slot]!.value = value
                slots[slot]!.cost = cost
                slots[slot]!.expiration = expiration
                slots[slot]!.bucket = bucket
                graveyard.bury(old)
                policy.didUpdate(slot, from: oldBucket, to: bucket, cost: cost)
            } else {
                if freeCount == 0 {
                    slot = slots.count
                    slots.append(Slot(key: key, hash: hash, value: value, cost: cost, expiration: expiration, bucket: bucket))
                } else {
                    freeCount &-= 1
                    slot = freeSlots[freeCount]
                    // A free slot holds `nil`, which owns nothing: initialize over it in place
                    // rather than assign (a copy of the new entry, then value-witness destroys
                    // of both the temporary and the old `nil`).
                    slots.withUnsafeMutableBufferPointer { slots in
                        (slots.baseAddress.unsafelyUnwrapped + slot).initialize(
                            to: Slot(key: key, hash: hash, value: value, cost: cost, expiration: expiration, bucket: bucket))
                    }
                }
                index.insert(slot: slot, hash: hash, at: ~probe)
                policy.didInsert(slot, bucket: bucket, cost: cost, keyHash: hash)
            }
            usage.add(cost: cost, bucket: bucket)

            // Only the new entry's bucket and the store-wide totals can have grown.
            if let bucket, usage.bucketCounts[bucket] > limits.bucketCountLimits[bucket] {
                let target = limits.bucketCountTargets[bucket]
                while usage.bucketCounts[bucket] > target,
                      let victim = policy.victim(inBucket: bucket), victim != slot {
                    evict(victim, reason: .bucket, into: &graveyard)
                }
            }
            if usage.count > limits.countLimit {
                while usage.count > limits.countTarget, let victim = policy.victim(), victim != slot {
                    evict(victim, reason: .count, into: &graveyard)
                }
            }
            if usage.cost > limits.costLimit {
                while usage.cost > limits.costTarget, let victim = policy.victim(), victim != slot {
                    evict(victim, reason: .cost, into: &graveyard)
                }
            }
            // S3-FIFO places the written entry only now, so that its own write cannot evict it.
            policy.didFinishWrite(slot)
            return true
        }

        /// The slot holding `key`, whose hash is `hash`.
        @inlinable @inline(__always)
        func slot(of key: Key, hash: Int) -> Int? {
            index.find(hash: hash) { slots[$0].unsafelyUnwrapped.key == key }
        }

        /// Removes the entry for `key`, returning it.
        @inlinable
        mutating func remove(_ key: Key, hash: Int) -> Slot? {
            guard let slot = slot(of: key, hash: hash) else { return nil }
            return removeSlot(slot)
        }

        mutating func removeExpired(now: Double, into graveyard: inout Graveyard) -> Int {
            var removed = 0
            for slot in slots.indices {
                guard let expiration = slots[slot]?.expiration, expiration <= now else { continue }
                evict(slot, reason: .expiry, into: &graveyard)
                removed += 1
            }
            return removed
        }

        mutating func trim(toCount count: Int, into graveyard: inout Graveyard) {
            while usage.count > count, let victim = policy.victim() {
                evict(victim, reason: .count, into: &graveyard)
            }
        }

        mutating func trim(toCost cost: Int, into graveyard: inout Graveyard) {
            while usage.cost > cost, let victim = policy.victim() {
                evict(victim, reason: .cost, into: &graveyard)
            }
        }

        /// Empties the store, returning the old storage so the caller releases it unlocked.
        mutating func removeAll() -> ContiguousArray<Slot?> {
            let old = slots
            index.removeAll()
            slots = []
            freeSlots = []
            freeCount = 0
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
            graveyard.bury(removeSlot(slot, isEviction: reason != .expiry).value)
        }

        /// Unlinks the entry in `slot` from every structure and frees the slot.
        ///
        /// `isEviction`: the policy chose the entry to meet a limit (S3-FIFO then remembers the
        /// key in its ghost queue); `false` for removals, refusals and expiry.
        @inlinable @inline(__always)
        mutating func removeSlot(_ slot: Int, isEviction: Bool = false) -> Slot {
            let entry = slots.withUnsafeMutableBufferPointer { slots in
                let address = slots.baseAddress.unsafelyUnwrapped + slot
                let entry = address.move().unsafelyUnwrapped
                address.initialize(to: nil)
                return entry
            }
            index.remove(slot: slot, hash: entry.hash)
            policy.didRemove(slot, bucket: entry.bucket, isEviction: isEviction)
            usage.subtract(cost: entry.cost, bucket: entry.bucket)
            if freeCount < freeSlots.count {
                freeSlots[freeCount] = slot
            } else {
                freeSlots.append(slot)
            }
            freeCount &+= 1
            return entry
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
