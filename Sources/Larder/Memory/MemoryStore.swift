public import Foundation
public import Synchronization

/// A thread-safe, in-memory cache tier that evicts its least recently used entries, or by S3-FIFO.
///
/// `MemoryStore` keeps values as they are (decoded, uncompressed) under count, cost and
/// size-bucket limits, with an optional expiry per entry. Every lookup, write and removal is
/// O(1): a hash table maps each key to a slot in an array-backed doubly-linked recency list
/// (or, under ``EvictionPolicy/s3fifo``, in S3-FIFO's queues; see ``Configuration/policy``).
/// Entries that can expire are also kept in a heap by expiration (O(log k) for k of them), so
/// that a write which overflows a limit removes the expired entries first, as ``DiskStore``
/// does.
/// All state sits behind one lock (`Locked`: `NSLock`'s mutex, which ThreadSanitizer sees); the lock
/// is held only for that bookkeeping, never while hashing the key, measuring a value's cost,
/// reading the clock, or releasing evicted values.
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
/// The store is `Sendable` when `Value` is. A key is hashed once per call, before locking, and
/// compared with the keys of equal hash under the lock (as any locked dictionary must), so
/// `Key`'s `==` must not call back into the store.
public final class MemoryStore<Key: Hashable & Sendable, Value> {
    /// The configuration the store was created with.
    public let configuration: Configuration

    /// Every read and write of the state happens inside `locked`, and nothing inside those
    /// sections calls user code (no cost closure, no clock, no value deinitializer: removed
    /// values are handed out and released after unlocking). This invariant is what makes the
    /// `@unchecked Sendable` conformance below sound, and why `withLockUnchecked` may hand a
    /// value out: the store is `Sendable` only where `Value` is.
    @usableFromInline let locked: Locked<State>

    /// Either the configuration's `@Sendable` closure or ``conformingMeasure()``, which captures
    /// only a metatype; both are safe to call from any thread.
    @usableFromInline let measure: ((Value) -> Int)?
    @usableFromInline let clock: @Sendable () -> Date
    @usableFromInline let defaultExpiry: Expiry
    /// When every write expires by default, nearly every read needs the time: read it before
    /// locking instead of discovering that under the lock and locking a second time.
    @usableFromInline let readsClockBeforeLocking: Bool
    /// Whether entries are stamped with the system's coarse clock (a few nanoseconds, no
    /// syscall) for ``trim(toDate:by:)``: when the configuration keeps the system clock. An
    /// injected clock stamps them instead, so that tests control ages too.
    @usableFromInline let stampsWithCoarseClock: Bool
    /// Set once the store has held an entry that can expire: from then on reads take the time
    /// before locking, instead of finding under the lock that they need it and locking again.
    @usableFromInline let holdsExpiringEntries = Atomic<Bool>(false)
    /// Where a storage that created the store hears of evictions and expirations.
    @usableFromInline let removals: RemovalReporter<Key>?

    /// Creates a store with the given configuration.
    ///
    /// - Parameter configuration: Limits, expiry and clock. Defaults to ``Configuration/init(countLimit:costLimit:entryCostLimit:sizeBuckets:defaultExpiry:overflowTrimRatio:cost:now:)``'s defaults.
    /// - Throws: ``StorageError/invalidConfiguration(field:value:reason:)`` naming the first
    ///   invalid field: a negative limit, an `overflowTrimRatio` outside `0..<1` (or NaN),
    ///   size buckets that are not strictly increasing or have a non-positive cost or count,
    ///   or a `defaultExpiry` that is not positive and finite.
    public convenience init(configuration: Configuration = .init()) throws {
        try self.init(configuration: configuration, removals: nil)
    }

    /// A store that reports its evictions and expirations to `removals`.
    init(configuration: Configuration, removals: RemovalReporter<Key>?) throws {
        try configuration.validate()
        self.removals = removals
        self.configuration = configuration
        self.locked = Locked(State(limits: Limits(configuration), policy: configuration.policy))
        self.measure = configuration.cost ?? Self.conformingMeasure()
        self.clock = configuration.now
        self.defaultExpiry = configuration.defaultExpiry
        self.readsClockBeforeLocking = configuration.defaultExpiry != .never
        self.stampsWithCoarseClock = configuration.usesSystemClock
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
                ? nil : Date(timeIntervalSinceReferenceDate: found.expiration),
            slidingInterval: found.sliding > 0 ? found.sliding : nil
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
        let hash = key.hashValue
        var now: Double? = readsClockBeforeLocking || holdsExpiringEntries.load(ordering: .relaxed) ? currentTime() : nil
        while true {
            let result = locked.withLockUnchecked { state in state.contains(key, hash: hash, now: now) }
            switch result {
            case .present: return true
            case .absent: return false
            case .expired(let dropped):
                withExtendedLifetime(dropped) {}  // released here, outside the lock
                reportExpired(key)
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
    /// exceeds its limit, every expired entry is removed first, as on disk; then the policy's
    /// victims (least recently used entries under LRU) are evicted until each total that
    /// exceeded its limit is at or below `(1 - overflowTrimRatio) × limit`. The new entry itself
    /// is never evicted by its own write.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it for.
    ///   - cost: The entry's cost; must not be negative. Defaults to the value's measured cost
    ///     (see ``MemoryStore``).
    ///   - expiry: When the entry stops being returned. Defaults to
    ///     ``Configuration/defaultExpiry``. `.seconds(_:)` must be finite.
    /// - Returns: `true` when the value was stored, `false` when the write was refused.
    /// - Complexity: O(1) per entry written or evicted; O(log k) more per write, removal or
    ///   expired entry among k entries that can expire (those that never expire cost nothing).
    @inlinable @discardableResult
    public func setValue(_ value: Value, forKey key: Key, cost: Int? = nil, expiry: Expiry? = nil) -> Bool {
        setValue(value, forKey: key, cost: cost, expiry: expiry, forOwner: false)
    }

    /// ``setValue(_:forKey:cost:expiry:)``; `forOwner` also counts the write in ``ownerCounts``.
    @inlinable @discardableResult
    func setValue(_ value: Value, forKey key: Key, cost: Int?, expiry: Expiry?, forOwner: Bool) -> Bool {
        let cost = cost ?? measure?(value) ?? 1
        precondition(cost >= 0, "MemoryStore: the cost of an entry must not be negative (got \(cost))")
        let expiration: Double
        let now: Double?
        switch expiry ?? defaultExpiry {
        case .never:
            expiration = .infinity
            now = nil
        case .seconds(let seconds), .sliding(let seconds):
            precondition(seconds.isFinite, "MemoryStore: expiry seconds must be finite (got \(seconds))")
            let time = currentTime()
            now = time
            expiration = time + seconds
        case .date(let date):
            expiration = date.timeIntervalSinceReferenceDate
            precondition(expiration.isFinite, "MemoryStore: expiry date must be finite")
            now = currentTime()
        }
        let hash = key.hashValue
        var time = now
        let stamp = stampTime(now)
        if expiration != .infinity { holdsExpiringEntries.store(true, ordering: .relaxed) }
        while true {
            let stored = withStateReleasingRemoved { state, graveyard in
                let stored = state.insert(
                    value, forKey: key, hash: hash, cost: cost, expiration: expiration,
                    sliding: (expiry ?? defaultExpiry).slidingInterval ?? 0, now: time, stamp: stamp, into: &graveyard)
                if forOwner, stored != nil { state.ownerCounts.writes += 1 }
                return stored
            }
            if let stored { return stored }
            // The write may overflow and entries that can expire are held, so expired ones go
            // first: read the clock (user code) outside the lock, then write again.
            time = currentTime()
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
        let hash = key.hashValue
        let now: Double? = readsClockBeforeLocking ? currentTime() : nil
        let removed = locked.withLockUnchecked { state in state.remove(key, hash: hash) }
        guard let removed else { return false }
        return removed.expiration == .infinity || removed.expiration > (now ?? currentTime())
    }

    /// Removes every entry. Statistics counters are kept.
    ///
    /// - Complexity: O(1) under the lock; the values are released after it, in O(n).
    public func removeAll() {
        let old = locked.withLockUnchecked { state in state.removeAll() }
        withExtendedLifetime(old) {}
    }

    /// Removes every expired entry.
    ///
    /// Expired entries are otherwise dropped only when a read or ``containsValue(forKey:)``
    /// finds them, and count towards ``totalCount`` and ``totalCost`` until then.
    ///
    /// - Returns: The number of entries removed.
    /// - Complexity: O(r log k) for r expired entries among k that can expire.
    @discardableResult
    public func removeExpired() -> Int {
        let now = currentTime()
        return withStateReleasingRemoved { state, graveyard in state.removeExpired(now: now, into: &graveyard) }
    }

    /// Removes expired entries, then evicts least recently used entries (under S3-FIFO, the
    /// policy's victims) until at most `count` remain.
    ///
    /// Does nothing when at most `count` entries are held; otherwise removes every expired
    /// entry first, as an overflowing write does.
    ///
    /// - Parameter count: The number of entries to keep; a negative count means `0`.
    /// - Complexity: O(k) for k evicted entries, plus O(log n) per expired one.
    public func trim(toCount count: Int) {
        let count = Swift.max(0, count), now = currentTime()
        withStateReleasingRemoved { state, graveyard in state.trim(toCount: count, now: now, into: &graveyard) }
    }

    /// Removes expired entries, then evicts least recently used entries (under S3-FIFO, the
    /// policy's victims) until the total cost is at most `cost`.
    ///
    /// Does nothing when the total is at most `cost`; otherwise removes every expired entry
    /// first, as an overflowing write does.
    ///
    /// - Parameter cost: The total cost to keep; a negative cost means `0`.
    /// - Complexity: O(k) for k evicted entries, plus O(log n) per expired one.
    public func trim(toCost cost: Int) {
        let cost = Swift.max(0, cost), now = currentTime()
        withStateReleasingRemoved { state, graveyard in state.trim(toCost: cost, now: now, into: &graveyard) }
    }

    /// Runs `body` on the state under the lock; the values it removes or replaces go into the
    /// graveyard and are released after unlocking, so no value deinitializer runs under the lock.
    @inlinable
    func withStateReleasingRemoved<Result>(_ body: (inout State, inout Graveyard) -> Result) -> Result {
        var graveyard = Graveyard(recording: removals?.isActive() ?? false)
        let result = locked.withLockUnchecked { state in body(&state, &graveyard) }
        if let departed = graveyard.departed, let removals {
            for entry in departed { removals.report(entry.key, entry.kind) }
        }
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
    ///   queue, then the main queue, each newest first; under ``EvictionPolicy/wTinyLFU``: the
    ///   window, probation, then protected, each most recently used first).
    /// - Complexity: O(n) in the number of entries, under the lock.
    public func keys() -> [Key] {
        let now = currentTime()
        return locked.withLockUnchecked { state in state.liveKeysByRecency(now: now) }
    }

    // MARK: - Totals and statistics

    /// The number of entries held, including expired ones not yet removed.
    ///
    /// - Complexity: O(1).
    public var totalCount: Int {
        return locked.withLockUnchecked { state in state.usage.count }
    }

    /// The total cost of the entries held, including expired ones not yet removed.
    ///
    /// - Complexity: O(1).
    public var totalCost: Int {
        return locked.withLockUnchecked { state in state.usage.cost }
    }

    /// A snapshot of the counters since the store was created, and of the current totals.
    ///
    /// - Complexity: O(1).
    public var statistics: Statistics {
        return locked.withLockUnchecked { state in
            var snapshot = state.statistics
            snapshot.totalCount = state.usage.count
            snapshot.totalCost = state.usage.cost
            return snapshot
        }
    }

    /// The reads and writes made with `forOwner` (see ``read(_:forOwner:)``).
    var ownerCounts: OwnerCounts {
        locked.withLockUnchecked { $0.ownerCounts }
    }

    // MARK: - Internals

    /// Looks `key` up as a read; `forOwner` also counts it in ``ownerCounts``, for the
    /// ``Storage`` that created the store.
    @inlinable
    func read(_ key: Key, forOwner: Bool = false) -> (value: Value, cost: Int, expiration: Double, sliding: Double)? {
        let hash = key.hashValue
        var now: Double? = readsClockBeforeLocking || !stampsWithCoarseClock || holdsExpiringEntries.load(ordering: .relaxed)
            ? currentTime() : nil
        let stamp = stampTime(now)
        while true {
            let result = locked.withLockUnchecked { state in state.read(key, hash: hash, now: now, stamp: stamp, forOwner: forOwner) }
            switch result {
            case .hit(let value, let cost, let expiration, let sliding):
                return (value, cost, expiration, sliding)
            case .miss:
                return nil
            case .expired(let dropped):
                withExtendedLifetime(dropped) {}  // released here, outside the lock
                reportExpired(key)
                return nil
            case .needsClock:
                // The entry can expire: read the clock (user code) outside the lock, then look
                // again. The second pass has a time, so it never asks again.
                now = currentTime()
            }
        }
    }

    /// Tells the storage that created the store, if it listens, that a read found `key` expired.
    @usableFromInline
    func reportExpired(_ key: Key) {
        guard let removals, removals.isActive() else { return }
        removals.report(key, .expired)
    }

    @inlinable
    func currentTime() -> Double {
        clock().timeIntervalSinceReferenceDate
    }

    /// The time to stamp an entry with as it is written or read: `now` when the caller has
    /// read the clock, else the coarse system clock (or the injected clock).
    @inlinable @inline(__always)
    func stampTime(_ now: Double?) -> Double {
        if let now { return now }
        return stampsWithCoarseClock ? CoarseClock.now() : currentTime()
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
}

// See the invariant on `state`: all mutable state is guarded by `lock`.
extension MemoryStore: @unchecked Sendable where Value: Sendable {}
