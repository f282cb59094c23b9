import Foundation
@testable import Larder

/// An obviously correct, slow model of ``MemoryStore`` under ``EvictionPolicy/s3fifo``.
///
/// Queues are plain arrays (index 0 = newest), the ghost queue is an array of keys (index 0 =
/// oldest); every operation is a linear scan. It shares no code with the store: the S3-FIFO
/// rules (as documented on ``EvictionPolicy/s3fifo`` and ``S3FIFOPolicy``) and the limits are
/// written out again.
struct ReferenceS3FIFOStore<Key: Hashable & Sendable, Value>: MemoryStoreModel {
    struct Item {
        var key: Key
        var value: Value
        var cost: Int
        var expiration: Double  // .infinity = never
        var bucket: Int?
        var frequency = 0
    }

    let countLimit: Int
    let costLimit: Int
    let entryCostLimit: Int
    let buckets: [SizeBucket]
    let ratio: Double
    let defaultExpiry: Expiry
    let measure: (Value) -> Int

    private(set) var small: [Item] = []
    private(set) var main: [Item] = []
    private(set) var ghost: [Key] = []
    private var hasEvicted = false
    private(set) var statistics = MemoryStore<Key, Value>.Statistics()

    init(_ configuration: MemoryStore<Key, Value>.Configuration, measure: @escaping (Value) -> Int) {
        countLimit = configuration.countLimit
        costLimit = configuration.costLimit
        entryCostLimit = configuration.entryCostLimit
        buckets = configuration.sizeBuckets
        ratio = configuration.overflowTrimRatio
        defaultExpiry = configuration.defaultExpiry
        self.measure = measure
    }

    var all: [Item] { small + main }
    var totalCount: Int { small.count + main.count }
    var totalCost: Int { all.reduce(0) { $0 + $1.cost } }
    var keysByRecency: [Key] { all.map(\.key) }
    var frequencies: [Key: Int] { Dictionary(uniqueKeysWithValues: all.map { ($0.key, $0.frequency) }) }
    var ghostCount: Int { ghost.count }

    private static func smallShare(_ limit: Int) -> Int { Int(Double(limit) / 10) }
    private func target(_ limit: Int) -> Int {
        ratio == 0 ? limit : Int((Double(limit) * (1 - ratio) + 1e-9).rounded(.down))
    }

    /// Removes `key` from whichever queue holds it.
    private mutating func take(_ key: Key) -> (item: Item, wasMain: Bool)? {
        if let index = small.firstIndex(where: { $0.key == key }) { return (small.remove(at: index), false) }
        if let index = main.firstIndex(where: { $0.key == key }) { return (main.remove(at: index), true) }
        return nil
    }

    private func find(_ key: Key) -> Item? {
        all.first { $0.key == key }
    }

    private mutating func bump(_ key: Key) {
        if let index = small.firstIndex(where: { $0.key == key }) { small[index].frequency = min(small[index].frequency + 1, 3) }
        if let index = main.firstIndex(where: { $0.key == key }) { main[index].frequency = min(main[index].frequency + 1, 3) }
    }

    mutating func value(forKey key: Key, now: Double) -> (value: Value, cost: Int, expiration: Double)? {
        guard let item = find(key) else {
            statistics.misses += 1
            return nil
        }
        if item.expiration <= now {
            _ = take(key)
            statistics.misses += 1
            statistics.expirations += 1
            return nil
        }
        statistics.hits += 1
        bump(key)
        return (item.value, item.cost, item.expiration)
    }

    mutating func containsValue(forKey key: Key, now: Double) -> Bool {
        guard let item = find(key) else { return false }
        if item.expiration <= now {
            _ = take(key)
            statistics.expirations += 1
            return false
        }
        return true
    }

    /// Runs S3-FIFO's victim search over the entries `inScope` accepts, with the given queue
    /// shares, and evicts the victim. Returns false when there is nothing to evict.
    private mutating func evictOne(
        inScope: (Item) -> Bool, mainIsOver: (_ main: [Item]) -> Bool
    ) -> Bool {
        hasEvicted = true
        while true {
            let scopedSmall = small.filter(inScope), scopedMain = main.filter(inScope)
            if mainIsOver(scopedMain) || scopedSmall.isEmpty {
                // Main: oldest first; a non-zero counter buys another round at the front.
                while let index = main.lastIndex(where: inScope) {
                    if main[index].frequency == 0 {
                        main.remove(at: index)
                        return true
                    }
                    var item = main.remove(at: index)
                    item.frequency -= 1
                    main.insert(item, at: 0)
                }
                return false
            }
            while let index = small.lastIndex(where: inScope) {
                var item = small.remove(at: index)
                if item.frequency >= 2 {
                    item.frequency = 0
                    main.insert(item, at: 0)
                } else {
                    let limit = min(mainShareOfCount, totalCount)
                    if limit > 0 {
                        ghost.append(item.key)
                        while ghost.count > limit { ghost.removeFirst() }
                    }
                    return true
                }
            }
        }
    }

    private var mainShareOfCount: Int { countLimit - Self.smallShare(countLimit) }

    private mutating func evictFromStore() -> Bool {
        let countShare = mainShareOfCount, costShare = costLimit - Self.smallShare(costLimit)
        return evictOne(inScope: { _ in true }) { main in
            main.count > countShare || main.reduce(0, { $0 + $1.cost }) > costShare
        }
    }

    @discardableResult
    mutating func setValue(_ value: Value, forKey key: Key, cost: Int?, expiry: Expiry?, now: Double) -> Bool {
        let cost = cost ?? measure(value)
        let expiration: Double
        switch expiry ?? defaultExpiry {
        case .never: expiration = .infinity
        case .seconds(let seconds), .sliding(let seconds): expiration = now + seconds  // (never given a sliding one)
        case .date(let date): expiration = date.timeIntervalSinceReferenceDate
        }
        var bucket: Int?
        var fitsABucket = buckets.isEmpty
        for index in buckets.indices.reversed() where cost <= buckets[index].maxEntryCost {
            bucket = index
            fitsABucket = true
        }
        let admitted = countLimit > 0 && cost <= entryCostLimit && cost <= costLimit
            && fitsABucket && expiration > now
        guard admitted else {
            _ = take(key)
            statistics.rejections += 1
            return false
        }
        statistics.writes += 1

        // The written entry stays out of the queues until the evictions are done.
        var pending = Item(key: key, value: value, cost: cost, expiration: expiration, bucket: bucket)
        let toMain: Bool?
        if let (old, wasMain) = take(key) {
            pending.frequency = min(old.frequency + 1, 3)
            toMain = wasMain
        } else if let index = ghost.firstIndex(of: key) {
            ghost.remove(at: index)
            toMain = true
        } else {
            toMain = nil
        }
        // Totals including the pending entry. Every limit the write takes over is noted first;
        // then expired entries go (not to the ghost), then victims until each noted total is
        // at or below its target.
        let bucketIsOver = bucket.map { bucket in all.filter({ $0.bucket == bucket }).count + 1 > buckets[bucket].countLimit } ?? false
        let countIsOver = totalCount + 1 > countLimit
        let costIsOver = totalCost + cost > costLimit
        if bucketIsOver || countIsOver || costIsOver { removeExpired(now: now) }
        if bucketIsOver, let bucket {
            let limit = buckets[bucket].countLimit, mainShare = limit - Self.smallShare(limit)
            while all.filter({ $0.bucket == bucket }).count + 1 > target(limit),
                  evictOne(inScope: { $0.bucket == bucket }, mainIsOver: { $0.count > mainShare }) {
                statistics.bucketEvictions += 1
            }
        }
        if countIsOver {
            while totalCount + 1 > target(countLimit), evictFromStore() { statistics.countEvictions += 1 }
        }
        if costIsOver {
            while totalCost + cost > target(costLimit), evictFromStore() { statistics.costEvictions += 1 }
        }

        let goesToMain: Bool
        if let toMain {
            goesToMain = toMain
        } else {
            let smallIsFull = small.count >= Self.smallShare(countLimit)
                || small.reduce(0, { $0 + $1.cost }) >= Self.smallShare(costLimit)
            goesToMain = !hasEvicted && smallIsFull
        }
        if goesToMain { main.insert(pending, at: 0) } else { small.insert(pending, at: 0) }
        return true
    }

    mutating func removeValue(forKey key: Key, now: Double) -> Value? {
        guard let (item, _) = take(key) else { return nil }
        return item.expiration <= now ? nil : item.value
    }

    @discardableResult
    mutating func removeExpired(now: Double) -> Int {
        let before = totalCount
        small.removeAll { $0.expiration <= now }
        main.removeAll { $0.expiration <= now }
        statistics.expirations += before - totalCount
        return before - totalCount
    }

    /// As the store: nothing when within `count`, else expired entries first, then victims.
    mutating func trim(toCount count: Int, now: Double) {
        let count = max(0, count)
        guard totalCount > count else { return }
        removeExpired(now: now)
        while totalCount > count, evictFromStore() { statistics.countEvictions += 1 }
    }

    mutating func trim(toCost cost: Int, now: Double) {
        let cost = max(0, cost)
        guard totalCost > cost else { return }
        removeExpired(now: now)
        while totalCost > cost, evictFromStore() { statistics.costEvictions += 1 }
    }

    mutating func removeAll() {
        small.removeAll()
        main.removeAll()
        ghost.removeAll()
        hasEvicted = false
    }

    var snapshot: MemoryStore<Key, Value>.Statistics {
        var result = statistics
        result.totalCount = totalCount
        result.totalCost = totalCost
        return result
    }
}

/// What the differential test drives: ``ReferenceMemoryStore`` (LRU) or ``ReferenceS3FIFOStore``.
protocol MemoryStoreModel<Key, Value> {
    associatedtype Key: Hashable & Sendable
    associatedtype Value
    mutating func value(forKey key: Key, now: Double) -> (value: Value, cost: Int, expiration: Double)?
    mutating func containsValue(forKey key: Key, now: Double) -> Bool
    @discardableResult
    mutating func setValue(_ value: Value, forKey key: Key, cost: Int?, expiry: Expiry?, now: Double) -> Bool
    mutating func removeValue(forKey key: Key, now: Double) -> Value?
    mutating func removeExpired(now: Double) -> Int
    mutating func trim(toCount count: Int, now: Double)
    mutating func trim(toCost cost: Int, now: Double)
    mutating func removeAll()
    var keysByRecency: [Key] { get }
    /// Every entry's S3-FIFO counter or W-TinyLFU estimate; empty for LRU.
    var frequencies: [Key: Int] { get }
    var ghostCount: Int { get }
    var snapshot: MemoryStore<Key, Value>.Statistics { get }
}
