public import Foundation

/// A thread-safe, in-memory cache tier that evicts its least recently used entries, or by S3-FIFO.
///
/// `MemoryStore` keeps values as they are (decoded, uncompressed) under count, cost and
/// size-bucket limits, with an optional expiry per entry. Every lookup, write and removal is
/// O(1): a dictionary maps each key to a slot in an array-backed doubly-linked recency list
/// (or, under ``EvictionPolicy/s3fifo``, in S3-FIFO's queues; see ``Configuration/policy``).
/// All state sits behind one `NSLock`; the lock is held only for that bookkeeping, never while
/// measuring a value's cost, reading the clock, or releasing evicted values.
///
/// ```swift
/// let store = try MemoryStore<String, Data> {
///     $0.costLimit = 32 * 1024 * 1024   // 32 MiB
///     $0.countLimit = 1_000
///     $0.defaultExpiry = .seconds(300)
/// }
/// store.setValue(Data("hello".utf8), forKey: "greeting")
/// if let data = store.value(forKey: "greeting") {
///     print(data.count)                  // 5
/// }
/// store.setValue(Data(count: 100), forKey: "blob", cost: 1, expiry: .never)
/// store.removeValue(forKey: "greeting")
/// print(store.totalCount, store.totalCost) // 1 1
/// ```
///
/// A value's cost is the `cost` passed to ``setValue(_:forKey:cost:expiry:)``; otherwise the
/// configuration's ``Configuration/cost`` closure; otherwise its ``CacheCostMeasurable/cacheCost``
/// (bytes of `Data`, `String`, `[UInt8]`); otherwise `1`.
///
/// The store is `Sendable` when `Value` is. Keys and values are compared and hashed under the
/// lock (as any locked dictionary must), so `Key`'s `==` and `hash(into:)` must not call back
/// into the store.
public final class MemoryStore<Key: Hashable & Sendable, Value> {
    /// The configuration the store was created with.
    public let configuration: Configuration

    @usableFromInline let lock = NSLock()
    /// Guarded by `lock`: every read and write of `state` happens between `lock.lock()` and
    /// `lock.unlock()`, and nothing inside those sections calls user code (no cost closure, no
    /// clock, no value deinitializer: removed values are handed out and released after unlocking).
    /// This invariant is what makes the `@unchecked Sendable` conformance below sound.
    @usableFromInline var state: State

    /// Either the configuration's `@Sendable` closure or ``conformingMeasure()``, which captures
    /// only a metatype; both are safe to call from any thread.
    @usableFromInline let measure: ((Value) -> Int)?
    @usableFromInline let clock: @Sendable () -> Date
    @usableFromInline let defaultExpiry: Expiry
    /// When every write expires by default, nearly every read needs the time: read it before
    /// locking instead of discovering that under the lock and locking a second time.
    @usableFromInline let readsClockBeforeLocking: Bool

    /// Creates a store with the given configuration.
    ///
    /// - Parameter configuration: Limits, expiry and clock. Defaults to ``Configuration/init(countLimit:costLimit:entryCostLimit:sizeBuckets:defaultExpiry:overflowTrimRatio:cost:now:)``'s defaults.
    /// - Throws: ``StorageError/invalidConfiguration(field:value:reason:)`` naming the first
    ///   invalid field: a negative limit, an `overflowTrimRatio` outside `0..<1` (or NaN),
    ///   size buckets that are not strictly increasing or have a non-positive cost or count,
    ///   or a `defaultExpiry` that is not positive and finite.
    public init(configuration: Configuration = .init()) throws {
        try configuration.validate()
        self.configuration = configuration
        self.state = State(limits: Limits(configuration), policy: configuration.policy)
        self.measure = configuration.cost ?? Self.conformingMeasure()
        self.clock = configuration.now
        self.defaultExpiry = configuration.defaultExpiry
        self.readsClockBeforeLocking = configuration.defaultExpiry != .never
    }

    /// Creates a store, letting `configure` adjust a default configuration.
    ///
    /// ```swift
    /// let store = try MemoryStore<URL, Data> { $0.countLimit = 100 }
    /// ```
    ///
    /// - Parameter configure: Changes the default ``Configuration``.
    /// - Throws: ``StorageError/invalidConfiguration(field:value:reason:)`` as ``init(configuration:)`` does.
    public convenience init(_ configure: (inout Configuration) -> Void) throws {
        var configuration = Configuration()
        configure(&configuration)
        try self.init(configuration: configuration)
    }

    // MARK: - Reading

    /// Returns the value stored for `key`, marking it most recently used.
    ///
    /// An expired entry is removed and reported as a miss.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value, or `nil` when there is none or it has expired.
    /// - Complexity: O(1).
    @inlinable
    public func value(forKey key: Key) -> Value? {
        read(key)?.value
    }

    /// Returns the value stored for `key` with its cost and expiration, marking it most
    /// recently used.
    ///
    /// Use it when you need the remaining lifetime, for example to copy the entry to another
    /// tier with the same expiry. Counts as a read, like ``value(forKey:)``.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The entry, or `nil` when there is none or it has expired.
    /// - Complexity: O(1).
    @inlinable
    public func entry(forKey key: Key) -> Entry? {
        guard let found = read(key) else { return nil }
        return Entry(
            value: found.value,
            cost: found.cost,
            expirationDate: found.expiration == .infinity
                ? nil : Date(timeIntervalSinceReferenceDate: found.expiration)
        )
    }

    /// Whether a live value is stored for `key`, without marking it used.
    ///
    /// Does not change the recency order and does not count as a hit or a miss. An expired
    /// entry is removed and reported as absent.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: `true` when ``value(forKey:)`` would return a value right now.
    /// - Complexity: O(1).
    @inlinable
    public func containsValue(forKey key: Key) -> Bool {
        var now: Double? = readsClockBeforeLocking ? currentTime() : nil
        while true {
            lock.lock()
            let result = state.contains(key, now: now)
            lock.unlock()
            switch result {
            case .present: return true
            case .absent: return false
            case .expired(let dropped):
                withExtendedLifetime(dropped) {}  // released here, outside the lock
                return false
            case .needsClock: now = currentTime()
            }
        }
    }

    /// Accesses the value for `key`; assigning `nil` removes it.
    ///
    /// Reading is ``value(forKey:)``; assigning a value is ``setValue(_:forKey:cost:expiry:)``
    /// with the default cost and expiry.
    ///
    /// - Complexity: O(1), plus any evictions the write causes.
    @inlinable
    public subscript(key: Key) -> Value? {
        get { value(forKey: key) }
        set {
            if let newValue {
                setValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    // MARK: - Writing

    /// Stores `value` for `key` as the most recently used entry, evicting others as the limits
    /// require.
    ///
    /// The write is refused, and any older value for `key` removed, when the entry costs more
    /// than ``Configuration/entryCostLimit`` or ``Configuration/costLimit``, fits no size bucket,
    /// has already expired, or ``Configuration/countLimit`` is `0`. Otherwise, if a total now
    /// exceeds its limit, the policy's victims (least recently used entries under LRU) are
    /// evicted until it is at or below
    /// `(1 - overflowTrimRatio) × limit`; the new entry itself is never evicted by its own write.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it for.
    ///   - cost: The entry's cost; must not be negative. Defaults to the value's measured cost
    ///     (see ``MemoryStore``).
    ///   - expiry: When the entry stops being returned. Defaults to
    ///     ``Configuration/defaultExpiry``. `.seconds(_:)` must be finite.
    /// - Returns: `true` when the value was stored, `false` when the write was refused.
    /// - Complexity: O(1) per entry written or evicted.
    @inlinable @discardableResult
    public func setValue(_ value: Value, forKey key: Key, cost: Int? = nil, expiry: Expiry? = nil) -> Bool {
        let cost = cost ?? measure?(value) ?? 1
        precondition(cost >= 0, "MemoryStore: the cost of an entry must not be negative (got \(cost))")
        let expiration: Double
        let now: Double?
        switch expiry ?? defaultExpiry {
        case .never:
            expiration = .infinity
            now = nil
        case .seconds(let seconds):
            precondition(seconds.isFinite, "MemoryStore: expiry seconds must be finite (got \(seconds))")
            let time = currentTime()
            now = time
            expiration = time + seconds
        case .date(let date):
            expiration = date.timeIntervalSinceReferenceDate
            precondition(expiration.isFinite, "MemoryStore: expiry date must be finite")
            now = currentTime()
        }
        return withStateReleasingRemoved { state, graveyard in
            state.insert(value, forKey: key, cost: cost, expiration: expiration, now: now, into: &graveyard)
        }
    }

    /// Removes the value stored for `key`.
    ///
    /// - Parameter key: The key to remove.
    /// - Returns: Whether a live value was removed. An expired value that was still held is
    ///   removed but not counted.
    /// - Complexity: O(1).
    @inlinable @discardableResult
    public func removeValue(forKey key: Key) -> Bool {
        let now: Double? = readsClockBeforeLocking ? currentTime() : nil
        lock.lock()
        let removed = state.remove(key)
        lock.unlock()
        guard let removed else { return false }
        return removed.expiration == .infinity || removed.expiration > (now ?? currentTime())
    }

    /// Removes every entry. Statistics counters are kept.
    ///
    /// - Complexity: O(1) under the lock; the values are released after it, in O(n).
    public func removeAll() {
        lock.lock()
        let old = state.removeAll()
        lock.unlock()
        withExtendedLifetime(old) {}
    }

    /// Removes every expired entry.
    ///
    /// Expired entries are otherwise dropped only when a read or ``containsValue(forKey:)``
    /// finds them, and count towards ``totalCount`` and ``totalCost`` until then.
    ///
    /// - Returns: The number of entries removed.
    /// - Complexity: O(n) in the number of entries.
    @discardableResult
    public func removeExpired() -> Int {
        let now = currentTime()
        return withStateReleasingRemoved { state, graveyard in state.removeExpired(now: now, into: &graveyard) }
    }

    /// Evicts least recently used entries (under S3-FIFO, the policy's victims) until at most
    /// `count` remain.
    ///
    /// - Parameter count: The number of entries to keep; must not be negative.
    /// - Complexity: O(k) for k evicted entries.
    public func trim(toCount count: Int) {
        precondition(count >= 0, "MemoryStore: trim(toCount:) needs a non-negative count (got \(count))")
        withStateReleasingRemoved { state, graveyard in state.trim(toCount: count, into: &graveyard) }
    }

    /// Evicts least recently used entries (under S3-FIFO, the policy's victims) until the total
    /// cost is at most `cost`.
    ///
    /// - Parameter cost: The total cost to keep; must not be negative.
    /// - Complexity: O(k) for k evicted entries.
    public func trim(toCost cost: Int) {
        precondition(cost >= 0, "MemoryStore: trim(toCost:) needs a non-negative cost (got \(cost))")
        withStateReleasingRemoved { state, graveyard in state.trim(toCost: cost, into: &graveyard) }
    }

    /// Runs `body` on the state under the lock; the values it removes or replaces go into the
    /// graveyard and are released after unlocking, so no value deinitializer runs under the lock.
    @inlinable
    func withStateReleasingRemoved<Result>(_ body: (inout State, inout Graveyard) -> Result) -> Result {
        var graveyard = Graveyard()
        lock.lock()
        let result = body(&state, &graveyard)
        lock.unlock()
        withExtendedLifetime(graveyard) {}
        return result
    }

    /// The keys of every live entry, from most to least recently used.
    ///
    /// Does not mark any entry used or count as a read. Entries that have expired but are not
    /// yet removed are left out. Use it to enumerate what the tier holds, for example every
    /// key with a given prefix; it copies each key.
    ///
    /// ```swift
    /// let thumbnails = store.keys().filter { $0.hasPrefix("thumb/") }
    /// ```
    ///
    /// - Returns: The keys, most recently used first (under ``EvictionPolicy/s3fifo``: the small
    ///   queue, then the main queue, each newest first).
    /// - Complexity: O(n) in the number of entries, under the lock.
    public func keys() -> [Key] {
        let now = currentTime()
        lock.lock()
        defer { lock.unlock() }
        return state.liveKeysByRecency(now: now)
    }

    // MARK: - Totals and statistics

    /// The number of entries held, including expired ones not yet removed.
    ///
    /// - Complexity: O(1).
    public var totalCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return state.usage.count
    }

    /// The total cost of the entries held, including expired ones not yet removed.
    ///
    /// - Complexity: O(1).
    public var totalCost: Int {
        lock.lock()
        defer { lock.unlock() }
        return state.usage.cost
    }

    /// A snapshot of the counters since the store was created, and of the current totals.
    ///
    /// - Complexity: O(1).
    public var statistics: Statistics {
        lock.lock()
        defer { lock.unlock() }
        var snapshot = state.statistics
        snapshot.totalCount = state.usage.count
        snapshot.totalCost = state.usage.cost
        return snapshot
    }

    // MARK: - Internals

    @inlinable
    func read(_ key: Key) -> (value: Value, cost: Int, expiration: Double)? {
        var now: Double? = readsClockBeforeLocking ? currentTime() : nil
        while true {
            lock.lock()
            let result = state.read(key, now: now)
            lock.unlock()
            switch result {
            case .hit(let value, let cost, let expiration):
                return (value, cost, expiration)
            case .miss:
                return nil
            case .expired(let dropped):
                withExtendedLifetime(dropped) {}  // released here, outside the lock
                return nil
            case .needsClock:
                // The entry can expire: read the clock (user code) outside the lock, then look
                // again. The second pass has a time, so it never asks again.
                now = currentTime()
            }
        }
    }

    @inlinable
    func currentTime() -> Double {
        clock().timeIntervalSinceReferenceDate
    }

    /// The ``CacheCostMeasurable`` measure when `Value` conforms, looked up once.
    private static func conformingMeasure() -> ((Value) -> Int)? {
        guard let type = Value.self as? any CacheCostMeasurable.Type else { return nil }
        func make<Measurable: CacheCostMeasurable>(_: Measurable.Type) -> (Value) -> Int {
            // `Measurable` is `Value` itself (checked above), so the cast always succeeds; doing
            // it here avoids an existential cast on every write.
            { value in unsafeBitCast(value, to: Measurable.self).cacheCost }
        }
        return make(type)
    }

    /// The keys from most to least recently used (for tests; O(n)). Under S3-FIFO: the small
    /// queue, then the main queue, each newest first.
    func keysByRecency() -> [Key] {
        lock.lock()
        defer { lock.unlock() }
        return state.keysByRecency()
    }

    /// S3-FIFO's small and main queues, newest first, and every entry's counter (for tests; O(n)).
    func queueKeys() -> (small: [Key], main: [Key], frequencies: [Key: Int]) {
        lock.lock()
        defer { lock.unlock() }
        return state.queueKeys()
    }

    /// The number of keys in S3-FIFO's ghost queue (for tests).
    var ghostCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return state.policy.s3fifo.ghost.count
    }

    /// Descriptions of every broken internal invariant; empty when the store is consistent.
    func invariantViolations() -> [String] {
        lock.lock()
        defer { lock.unlock() }
        return state.invariantViolations()
    }
}

// See the invariant on `state`: all mutable state is guarded by `lock`.
extension MemoryStore: @unchecked Sendable where Value: Sendable {}

// MARK: - Entry and statistics

extension MemoryStore {
    /// A stored value with its cost and expiration, as ``MemoryStore/entry(forKey:)`` returns it.
    ///
    /// ```swift
    /// if let entry = store.entry(forKey: "avatar"), let end = entry.expirationDate {
    ///     let remaining = end.timeIntervalSinceNow  // the TTL left, to copy to another tier
    ///     print(entry.cost, remaining)
    /// }
    /// ```
    public struct Entry {
        /// The stored value.
        public var value: Value
        /// The cost the entry is charged against the limits.
        public var cost: Int
        /// The moment the entry expires, or `nil` when it never does.
        public var expirationDate: Date?

        /// Creates an entry.
        public init(value: Value, cost: Int, expirationDate: Date?) {
            self.value = value
            self.cost = cost
            self.expirationDate = expirationDate
        }
    }

    /// Counters of a ``MemoryStore``'s activity since it was created, and its current totals.
    ///
    /// ```swift
    /// let stats = store.statistics
    /// print("hit ratio \(stats.hitRatio), \(stats.totalCount) entries, \(stats.evictions) evicted")
    /// ```
    public struct Statistics: Sendable, Equatable {
        /// Reads (``MemoryStore/value(forKey:)``, ``MemoryStore/entry(forKey:)``) that returned a value.
        public var hits = 0
        /// Reads that returned nothing, including those that found an expired entry.
        public var misses = 0
        /// Writes that stored their value.
        public var writes = 0
        /// Writes refused because the entry cost too much, fitted no bucket, had already
        /// expired, or the count limit was `0`.
        public var rejections = 0
        /// Entries evicted to satisfy ``Configuration/countLimit`` or ``MemoryStore/trim(toCount:)``.
        public var countEvictions = 0
        /// Entries evicted to satisfy ``Configuration/costLimit`` or ``MemoryStore/trim(toCost:)``.
        public var costEvictions = 0
        /// Entries evicted to satisfy a size bucket's count limit.
        public var bucketEvictions = 0
        /// Expired entries removed, by a read, ``MemoryStore/containsValue(forKey:)`` or
        /// ``MemoryStore/removeExpired()``.
        public var expirations = 0
        /// The number of entries held when the snapshot was taken.
        public var totalCount = 0
        /// The total cost of the entries held when the snapshot was taken.
        public var totalCost = 0

        /// Creates statistics with every counter at zero.
        public init() {}

        /// Entries evicted for any limit (count, cost or bucket); expirations excluded.
        public var evictions: Int { countEvictions + costEvictions + bucketEvictions }

        /// Hits divided by reads, or `0` before the first read.
        public var hitRatio: Double {
            let reads = hits + misses
            return reads == 0 ? 0 : Double(hits) / Double(reads)
        }
    }
}

extension MemoryStore.Entry: Sendable where Value: Sendable {}

// MARK: - Locked state

extension MemoryStore {
    /// Values removed under the lock, released by the caller once the lock is free.
    ///
    /// Holds the first value inline so that a write evicting one entry does not allocate.
    @usableFromInline
    struct Graveyard {
        @usableFromInline var first: Value?
        @usableFromInline var rest: [Value]

        @inlinable
        init() {
            first = nil
            rest = []
        }

        @inlinable
        mutating func bury(_ value: Value) {
            if first == nil {
                first = value
            } else {
                rest.append(value)
            }
        }
    }

    /// Why an entry is evicted, for the statistics.
    @usableFromInline
    enum EvictionReason {
        case count, cost, bucket, expiry
    }

    /// The limits, and the totals to reach when one is exceeded, fixed at creation.
    @usableFromInline
    struct Limits {
        @usableFromInline let countLimit: Int
        @usableFromInline let countTarget: Int
        @usableFromInline let costLimit: Int
        @usableFromInline let costTarget: Int
        @usableFromInline let entryCostLimit: Int
        @usableFromInline let bucketMaxCosts: [Int]
        @usableFromInline let bucketCountLimits: [Int]
        @usableFromInline let bucketCountTargets: [Int]

        init(_ configuration: Configuration) {
            let ratio = configuration.overflowTrimRatio
            countLimit = configuration.countLimit
            countTarget = trimTarget(limit: countLimit, ratio: ratio)
            costLimit = configuration.costLimit
            costTarget = trimTarget(limit: costLimit, ratio: ratio)
            entryCostLimit = Swift.min(configuration.entryCostLimit, configuration.costLimit)
            bucketMaxCosts = configuration.sizeBuckets.map(\.maxEntryCost)
            bucketCountLimits = configuration.sizeBuckets.map(\.countLimit)
            bucketCountTargets = bucketCountLimits.map { trimTarget(limit: $0, ratio: ratio) }
        }

        /// The bucket of an entry of `cost`: `.some(nil)` when there are no buckets, `nil` when
        /// no bucket fits.
        @inlinable @inline(__always)
        func bucket(forCost cost: Int) -> Int?? {
            if bucketMaxCosts.isEmpty { return .some(nil) }
            for (index, maxCost) in bucketMaxCosts.enumerated() where cost <= maxCost {
                return .some(index)
            }
            return nil
        }
    }

    /// The limits accounting: totals that every eviction policy shares.
    @usableFromInline
    struct Usage {
        @usableFromInline var count: Int
        @usableFromInline var cost: Int
        @usableFromInline var bucketCounts: [Int]

        @usableFromInline
        init(bucketCount: Int) {
            count = 0
            cost = 0
            bucketCounts = Array(repeating: 0, count: bucketCount)
        }

        @inlinable @inline(__always)
        mutating func add(cost: Int, bucket: Int?) {
            count += 1
            self.cost += cost
            if let bucket { bucketCounts[bucket] += 1 }
        }

        @inlinable @inline(__always)
        mutating func subtract(cost: Int, bucket: Int?) {
            count -= 1
            self.cost -= cost
            if let bucket { bucketCounts[bucket] -= 1 }
        }
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

        @inlinable
        init(key: Key, value: Value, cost: Int, expiration: Double, bucket: Int?) {
            self.key = key
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
        @usableFromInline var index: [Key: Int] = [:]
        @usableFromInline var slots: ContiguousArray<Slot?> = []
        @usableFromInline var freeSlots: [Int] = []
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
        mutating func read(_ key: Key, now: Double?) -> ReadResult {
            guard let slot = index[key] else {
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
        mutating func contains(_ key: Key, now: Double?) -> ContainsResult {
            guard let slot = index[key] else { return .absent }
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
            _ value: Value, forKey key: Key, cost: Int, expiration: Double, now: Double?,
            into graveyard: inout Graveyard
        ) -> Bool {
            guard
                limits.countLimit > 0,
                cost <= limits.entryCostLimit,
                let bucket = limits.bucket(forCost: cost),
                expiration == .infinity || expiration > now!
            else {
                statistics.rejections += 1
                if let existing = index[key] { graveyard.bury(removeSlot(existing).value) }
                return false
            }
            statistics.writes += 1

            // Keep the total representable: only reachable with costs near `Int.max`.
            while usage.cost > Int.max - cost, let victim = policy.victim() {
                evict(victim, reason: .cost, into: &graveyard)
            }

            // S3-FIFO's ghost queue remembers keys by hash; LRU needs none.
            let keyHash = policy.needsKeyHash ? key.hashValue : 0
            // One hash lookup finds an existing entry or claims a slot for a new one.
            let candidate = freeSlots.last ?? slots.count
            let slot: Int
            if let existing = Self.claim(&index[key], with: candidate) {
                slot = existing
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
                slot = candidate
                let entry = Slot(key: key, value: value, cost: cost, expiration: expiration, bucket: bucket)
                if freeSlots.isEmpty {
                    slots.append(entry)
                } else {
                    freeSlots.removeLast()
                    slots[slot] = entry
                }
                policy.didInsert(slot, bucket: bucket, cost: cost, keyHash: keyHash)
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

        /// Returns the slot `entry` holds, or stores `candidate` in it and returns `nil`.
        ///
        /// Called on `index[key]` so that a dictionary `_modify` access does the lookup and the
        /// insertion with a single hash.
        @inlinable @inline(__always)
        static func claim(_ entry: inout Int?, with candidate: Int) -> Int? {
            if let existing = entry { return existing }
            entry = candidate
            return nil
        }

        /// Removes the entry for `key`, returning it.
        @inlinable
        mutating func remove(_ key: Key) -> Slot? {
            guard let slot = index[key] else { return nil }
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
        mutating func removeAll() -> (index: [Key: Int], slots: ContiguousArray<Slot?>) {
            let old = (index, slots)
            index = [:]
            slots = []
            freeSlots = []
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
            let entry = slots[slot].take().unsafelyUnwrapped
            index.removeValue(forKey: entry.key)
            policy.didRemove(slot, bucket: entry.bucket, isEviction: isEviction)
            usage.subtract(cost: entry.cost, bucket: entry.bucket)
            freeSlots.append(slot)
            return entry
        }

        // MARK: Diagnostics

        /// LRU: keys from most to least recently used. S3-FIFO: the small queue, then the main
        /// queue, each from newest to oldest.
        func keysByRecency() -> [Key] {
            liveKeysByRecency(now: -.infinity)
        }

        /// S3-FIFO's queues, newest first, with each entry's counter; empty under LRU.
        func queueKeys() -> (small: [Key], main: [Key], frequencies: [Key: Int]) {
            let small = policy.s3fifo.slots(inList: S3FIFOPolicy.smallList).map { slots[$0]!.key }
            let main = policy.s3fifo.slots(inList: S3FIFOPolicy.mainList).map { slots[$0]!.key }
            var frequencies: [Key: Int] = [:]
            for (key, slot) in index where policy.isS3FIFO {
                frequencies[key] = Int(policy.s3fifo.meta[slot].frequency)
            }
            return (small, main, frequencies)
        }

        /// Live keys in the order of ``keysByRecency()``.
        func liveKeysByRecency(now: Double) -> [Key] {
            let order = policy.isS3FIFO
                ? policy.s3fifo.slots(inList: S3FIFOPolicy.smallList) + policy.s3fifo.slots(inList: S3FIFOPolicy.mainList)
                : policy.lru.slotsByRecency()
            return order.compactMap { slot in
                let entry = slots[slot]!
                return entry.expiration > now ? entry.key : nil
            }
        }

        func invariantViolations() -> [String] {
            var problems: [String] = []
            let live = slots.indices.filter { slots[$0] != nil }
            if live.count != index.count { problems.append("\(live.count) slots but \(index.count) keys") }
            if usage.count != index.count { problems.append("count \(usage.count) != \(index.count) keys") }
            let cost = live.reduce(0) { $0 + slots[$1]!.cost }
            if usage.cost != cost { problems.append("cost \(usage.cost) != sum \(cost)") }
            for (key, slot) in index where slots[slot]?.key != key {
                problems.append("key \(key) points at slot \(slot) holding another key")
            }
            for bucket in limits.bucketMaxCosts.indices {
                let members = live.filter { slots[$0]!.bucket == bucket }
                if usage.bucketCounts[bucket] != members.count {
                    problems.append("bucket \(bucket) count \(usage.bucketCounts[bucket]) != \(members.count)")
                }
                if usage.bucketCounts[bucket] > limits.bucketCountLimits[bucket] {
                    problems.append("bucket \(bucket) over its limit")
                }
            }
            if policy.isS3FIFO {
                problems += policy.s3fifo.invariantViolations(
                    live: live, bucketOf: { slots[$0]!.bucket }, bucketCount: limits.bucketMaxCosts.count
                )
            } else {
                let order = policy.lru.slotsByRecency()
                if Set(order) != Set(live) || order.count != live.count {
                    problems.append("recency list \(order) != live slots \(live)")
                }
                for bucket in limits.bucketMaxCosts.indices {
                    let bucketOrder = policy.lru.slotsByRecency(inBucket: bucket)
                    if bucketOrder != order.filter({ slots[$0]!.bucket == bucket }) {
                        problems.append("bucket \(bucket) recency \(bucketOrder) disagrees with the store's order")
                    }
                }
            }
            if usage.count > Swift.max(limits.countLimit, 1) { problems.append("count over the limit") }
            return problems
        }
    }
}
