public import Foundation
import Synchronization

extension Storage {
    /// The settings of a ``Storage``: its memory tier, an optional disk tier, the tiers a call
    /// uses when it names none, and one clock and one log handler for every tier.
    ///
    /// ```swift
    /// var configuration = Storage<String, Data>.Configuration(directory: cachesURL)
    /// configuration.memory.costLimit = 50 << 20
    /// configuration.disk.sizeLimit = 500 << 20
    /// configuration.now = { testClock.now }   // every tier reads this clock
    /// let storage = try Storage(configuration: configuration, transformer: .data)
    /// ```
    public struct Configuration: Sendable {
        /// The memory tier's configuration. Defaults to `MemoryStore.Configuration()`.
        public var memory: MemoryStore<Key, Value>.Configuration
        /// The directory of the disk tier; `nil` makes a storage with no disk tier that never
        /// touches the file system. Defaults to `nil`.
        public var directory: URL?
        /// The disk tier's configuration, used when ``directory`` is set. Defaults to
        /// `DiskStore.Configuration()`.
        public var disk: DiskStore.Configuration
        /// The tiers a call uses when it names none. Defaults to ``StorageTiers/all``.
        public var defaultTiers: StorageTiers
        /// The clock of every tier the storage creates, replacing the tiers' own `now` when set.
        /// Defaults to `nil`: each tier keeps its configuration's clock.
        public var now: (@Sendable () -> Date)?
        /// Where every tier the storage creates reports what it recovers from, replacing the
        /// tiers' own handlers when set. Defaults to `nil`: each tier keeps its own.
        public var logHandler: (@Sendable (String) -> Void)?
        /// The options of every get-or-load call that passes none: fail-safe, timeouts,
        /// refresh ahead. Defaults to `LoadOptions()`: all off.
        ///
        /// Its ``LoadOptions/maxStale`` also decides whether the storage keeps stale copies at
        /// all: only then may a call use fail-safe, and only then do writes and removals drop
        /// stale copies (a cost the storage pays only when it asks for them).
        public var loading: LoadOptions
        /// The clock get-or-load's soft and hard timeouts are measured on. Defaults to
        /// `ContinuousClock()`; a test can give a clock it advances itself.
        public var loadClock: any Clock<Duration>
        /// Whether memory follows the changes other stores make to ``directory`` — other
        /// processes, or other storages of this process, sharing it. Defaults to `true`.
        ///
        /// With it on, a memory hit first checks whether anything committed to the directory's
        /// index since it last looked (a few memory loads), and when something did, drops the
        /// memory copies of the keys others wrote, removed, evicted or expired sooner before it
        /// answers (insert-if-absent too, so it never finds a duplicate in a stale copy). So a
        /// read that starts after a write returned in any process sees that write. Turn it off
        /// only for a directory this storage alone writes to: memory may then serve values
        /// other stores have since replaced or removed.
        public var followsDirectory: Bool
        /// Watches each get-or-load loader run (a span, a duration), for example LarderTracing's
        /// `OperationTracer`. Defaults to `nil`: nothing is watched, and a load pays one check.
        public var observer: (any OperationObserver)? = nil

        /// Creates a configuration; every parameter has the documented default.
        public init(
            memory: MemoryStore<Key, Value>.Configuration = .init(),
            directory: URL? = nil,
            disk: DiskStore.Configuration = .init(),
            defaultTiers: StorageTiers = .all,
            now: (@Sendable () -> Date)? = nil,
            logHandler: (@Sendable (String) -> Void)? = nil,
            loading: LoadOptions = .init(),
            loadClock: any Clock<Duration> = ContinuousClock(),
            followsDirectory: Bool = true
        ) {
            self.memory = memory
            self.directory = directory
            self.disk = disk
            self.defaultTiers = defaultTiers
            self.now = now
            self.logHandler = logHandler
            self.loading = loading
            self.loadClock = loadClock
            self.followsDirectory = followsDirectory
        }

        /// The memory configuration with the storage-wide clock applied.
        var effectiveMemory: MemoryStore<Key, Value>.Configuration {
            var memory = self.memory
            if let now { memory.now = now }
            return memory
        }

        /// The disk configuration with the storage-wide clock and log handler applied.
        var effectiveDisk: DiskStore.Configuration {
            var disk = self.disk
            if let now { disk.now = now }
            if let logHandler { disk.logHandler = logHandler }
            return disk
        }
    }

    /// A value with the tier that answered and its expiration.
    public struct Entry {
        /// The value.
        public var value: Value
        /// The tier the value came from.
        public var tier: StorageTier
        /// When the entry expires, or `nil` if it never does. For a stale entry, when its stale
        /// copy is dropped (its expiry plus ``LoadOptions/maxStale``).
        public var expirationDate: Date?
        /// Whether the value is a stale copy, past its expiry, that get-or-load returned because
        /// the loader failed or exceeded its timeout (fail-safe). Plain reads never return one.
        public var isStale: Bool = false

        @usableFromInline
        init(value: Value, tier: StorageTier, expirationDate: Date?) {
            self.value = value
            self.tier = tier
            self.expirationDate = expirationDate
        }

        init(staleValue value: Value, tier: StorageTier, expirationDate: Date?) {
            self.value = value
            self.tier = tier
            self.expirationDate = expirationDate
            self.isStale = true
        }
    }

    /// Counters since the storage was created, with every tier's current totals.
    public var statistics: StorageStatistics {
        var statistics = StorageStatistics()
        statistics.misses = counters.misses.load(ordering: .relaxed)
        let ownerCounts = memory.ownerCounts
        statistics.writes = counters.writes.load(ordering: .relaxed) + ownerCounts.writes
        statistics.decodingFailures = counters.decodingFailures.load(ordering: .relaxed)
        statistics.loads = counters.loads.load(ordering: .relaxed)
        statistics.loadStoreFailures = counters.loadStoreFailures.load(ordering: .relaxed)
        statistics.staleServed = counters.staleServed.load(ordering: .relaxed)
        statistics.softTimeouts = counters.softTimeouts.load(ordering: .relaxed)
        statistics.hardTimeouts = counters.hardTimeouts.load(ordering: .relaxed)
        statistics.loadFailures = counters.loadFailures.load(ordering: .relaxed)
        statistics.refreshesStarted = counters.refreshesStarted.load(ordering: .relaxed)
        statistics.refreshFailures = counters.refreshFailures.load(ordering: .relaxed)
        statistics.tagRemovals = counters.tagRemovals.load(ordering: .relaxed)
        statistics.removedByTag = counters.removedByTag.load(ordering: .relaxed)
        let memoryStatistics = memory.statistics
        var memoryFigures = TierStatistics()
        memoryFigures.hits = ownerCounts.hits
        memoryFigures.misses = ownerCounts.misses
        memoryFigures.promotions = counters.memoryPromotions.load(ordering: .relaxed)
        memoryFigures.writes = memoryStatistics.writes
        memoryFigures.evictions = memoryStatistics.evictions
        memoryFigures.expirations = memoryStatistics.expirations
        memoryFigures.totalCount = memoryStatistics.totalCount
        memoryFigures.totalSize = memoryStatistics.totalCost
        statistics.tiers[.memory] = memoryFigures
        for tier in tiers {
            let own = counters.tier(tier.tierID)
            let shared = tier.tierStatistics
            var figures = TierStatistics()
            figures.hits = own.hits.load(ordering: .relaxed)
            figures.misses = own.misses.load(ordering: .relaxed)
            figures.promotions = own.promotions.load(ordering: .relaxed)
            figures.errors = own.errors.load(ordering: .relaxed) + shared.errors
            figures.writes = shared.writes
            figures.evictions = shared.evictions
            figures.expirations = shared.expirations
            figures.corruptEntriesDropped = shared.corruptEntriesDropped
            figures.totalCount = shared.totalCount
            figures.totalSize = shared.totalSize
            statistics.tiers[tier.tierID] = figures
        }
        return statistics
    }
}

extension Storage.Entry: Sendable where Value: Sendable {}
