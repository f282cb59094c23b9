import Foundation
import Synchronization

// Operations that look and change in one hold of the lock: insert-if-absent, remove-and-return
// and changing only an entry's expiry.
extension MemoryStore {
    /// Stores `value` for `key` only when no live value is stored for it, in one step: of
    /// several threads inserting one key at once, exactly one stores its value.
    ///
    /// - Parameters:
    ///   - cost: The entry's cost; defaults to the value's measured cost.
    ///   - expiry: When the entry stops being returned; defaults to
    ///     ``Configuration/defaultExpiry``.
    /// - Returns: `true` when the value was stored; `false` when a live value was already
    ///   there (it is left as it is), or the write was refused as
    ///   ``setValue(_:forKey:cost:expiry:)`` refuses one.
    /// - Complexity: O(1), plus any evictions the write causes.
    @discardableResult
    public func insertValue(_ value: Value, forKey key: Key, cost: Int? = nil, expiry: Expiry? = nil) -> Bool {
        let cost = cost ?? measure?(value) ?? 1
        precondition(cost >= 0, "MemoryStore: the cost of an entry must not be negative (got \(cost))")
        let now = currentTime()
        let expiration = expirationTime(for: expiry ?? defaultExpiry, now: now)
        if expiration != .infinity { holdsExpiringEntries.store(true, ordering: .relaxed) }
        let hash = key.hashValue
        return withStateReleasingRemoved { state, graveyard in
            switch state.contains(key, hash: hash, now: now) {
            case .present: return false
            case .expired(let old): graveyard.bury(old)
            case .absent, .needsClock: break
            }
            return state.insert(
                value, forKey: key, hash: hash, cost: cost, expiration: expiration,
                sliding: (expiry ?? defaultExpiry).slidingInterval ?? 0, now: now, stamp: now,
                into: &graveyard) ?? false
        }
    }

    /// Removes the value stored for `key` and returns it, in one step: of several threads
    /// taking one key at once, exactly one gets the value.
    ///
    /// - Returns: The live value that was removed, or `nil` when there was none (an expired
    ///   value still held is removed and not returned).
    /// - Complexity: O(1).
    public func takeValue(forKey key: Key) -> Value? {
        let hash = key.hashValue
        let removed = locked.withLockUnchecked { state in state.remove(key, hash: hash) }
        guard let removed else { return nil }
        guard removed.expiration == .infinity || removed.expiration > currentTime() else { return nil }
        return removed.value
    }

    /// Changes when the live entry for `key` expires, leaving its value, cost and recency as
    /// they are.
    ///
    /// An expiry that has already passed removes the entry.
    ///
    /// - Returns: Whether a live entry was there.
    /// - Complexity: O(log k) among k entries that can expire.
    @discardableResult
    public func setExpiry(_ expiry: Expiry, forKey key: Key) -> Bool {
        precondition(expiry.isValid, "MemoryStore: expiry must be finite (got \(expiry))")
        let now = currentTime()
        let expiration = expirationTime(for: expiry, now: now)
        if expiration != .infinity { holdsExpiringEntries.store(true, ordering: .relaxed) }
        let hash = key.hashValue
        return withStateReleasingRemoved { state, graveyard in
            state.updateExpiration(
                of: key, hash: hash, to: expiration, sliding: expiry.slidingInterval ?? 0, now: now, into: &graveyard)
        }
    }

    /// The expiration time of `expiry` for a write at `now` (`.infinity` for ``Expiry/never``).
    func expirationTime(for expiry: Expiry, now: Double) -> Double {
        switch expiry {
        case .never: return .infinity
        case .seconds(let seconds), .sliding(let seconds): return now + seconds
        case .date(let date): return date.timeIntervalSinceReferenceDate
        }
    }
}

extension MemoryStore.State {
    /// Moves the live entry for `key` to expire at `expiration`; an entry already expired at
    /// `now`, or moved to expire by then, is removed. Returns whether a live entry was there.
    mutating func updateExpiration(
        of key: Key, hash: Int, to expiration: Double, sliding: Double, now: Double,
        into graveyard: inout MemoryStore.Graveyard
    ) -> Bool {
        guard let slot = slot(of: key, hash: hash) else { return false }
        let old = slots[slot].unsafelyUnwrapped.expiration
        if old <= now {
            statistics.expirations += 1
            graveyard.bury(removeSlot(slot).value)
            return false
        }
        if expiration <= now {
            graveyard.bury(removeSlot(slot).value)
            return true
        }
        slots[slot]!.expiration = expiration
        slots[slot]!.sliding = sliding
        if old == .infinity {
            if expiration != .infinity { expiry.insert(slot, expiration: expiration) }
        } else if expiration == .infinity {
            expiry.remove(slot)
        } else {
            expiry.update(slot, expiration: expiration)
        }
        return true
    }
}
