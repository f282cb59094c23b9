import Foundation
@testable import Larder

/// An obviously correct, slow model of ``MemoryStore`` for differential tests.
///
/// Entries live in one array ordered by recency (index 0 = most recently used); every operation
/// is a linear scan. It shares no code with the store: the overflow targets, bucket choice and
/// eviction loops are written out again from the documented rules.
struct ReferenceMemoryStore<Key: Hashable & Sendable, Value>: MemoryStoreModel {
    struct Item {
        var key: Key
        var value: Value
        var cost: Int
        var expiration: Double  // .infinity = never
        var bucket: Int?
    }

    let countLimit: Int
    let costLimit: Int
    let entryCostLimit: Int
    let buckets: [SizeBucket]
    let ratio: Double
    let defaultExpiry: Expiry
    let measure: (Value) -> Int

    private(set) var items: [Item] = []
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

    var totalCount: Int { items.count }
    var totalCost: Int { items.reduce(0) { $0 + $1.cost } }
    var keysByRecency: [Key] { items.map(\.key) }
    var frequencies: [Key: Int] { [:] }
    var ghostCount: Int { 0 }

    /// "At or below (1 - ratio) × limit", for limits small enough to be exact in a Double.
    private func target(_ limit: Int) -> Int {
        ratio == 0 ? limit : Int((Double(limit) * (1 - ratio) + 1e-9).rounded(.down))
    }

    private func position(of key: Key) -> Int? {
        items.firstIndex { $0.key == key }
    }

    private func isExpired(_ item: Item, now: Double) -> Bool {
        item.expiration <= now
    }

    mutating func value(forKey key: Key, now: Double) -> (value: Value, cost: Int, expiration: Double)? {
        guard let position = position(of: key) else {
            statistics.misses += 1
            return nil
        }
        if isExpired(items[position], now: now) {
            items.remove(at: position)
            statistics.misses += 1
            statistics.expirations += 1
            return nil
        }
        statistics.hits += 1
        let item = items.remove(at: position)
        items.insert(item, at: 0)
        return (item.value, item.cost, item.expiration)
    }

    mutating func containsValue(forKey key: Key, now: Double) -> Bool {
        guard let position = position(of: key) else { return false }
        if isExpired(items[position], now: now) {
            items.remove(at: position)
            statistics.expirations += 1
            return false
        }
        return true
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
            bucket = index  // the smallest bucket that fits wins, as the loop runs backwards
            fitsABucket = true
        }
        if let old = position(of: key) {
            items.remove(at: old)
        }
        let admitted = countLimit > 0 && cost <= entryCostLimit && cost <= costLimit
            && fitsABucket && expiration > now
        guard admitted else {
            statistics.rejections += 1
            return false
        }
        statistics.writes += 1
        items.insert(Item(key: key, value: value, cost: cost, expiration: expiration, bucket: bucket), at: 0)

        // Every limit the write takes over is noted first; then expired entries go, then least
        // recently used ones until each noted total is at or below its target.
        let inBucket = { (items: [Item], bucket: Int) in items.filter { $0.bucket == bucket }.count }
        let bucketIsOver = bucket.map { inBucket(items, $0) > buckets[$0].countLimit } ?? false
        let countIsOver = items.count > countLimit
        let costIsOver = totalCost > costLimit
        guard bucketIsOver || countIsOver || costIsOver else { return true }
        dropExpired(now: now)
        if bucketIsOver, let bucket {
            while inBucket(items, bucket) > target(buckets[bucket].countLimit) {
                let last = items.lastIndex { $0.bucket == bucket }!
                if last == 0 { break }
                items.remove(at: last)
                statistics.bucketEvictions += 1
            }
        }
        if countIsOver {
            while items.count > target(countLimit), items.count > 1 {
                items.removeLast()
                statistics.countEvictions += 1
            }
        }
        if costIsOver {
            while totalCost > target(costLimit), items.count > 1 {
                items.removeLast()
                statistics.costEvictions += 1
            }
        }
        return true
    }

    mutating func removeValue(forKey key: Key, now: Double) -> Value? {
        guard let position = position(of: key) else { return nil }
        let item = items.remove(at: position)
        return isExpired(item, now: now) ? nil : item.value
    }

    mutating func removeExpired(now: Double) -> Int {
        dropExpired(now: now)
    }

    /// Removes every expired item, counting them as expirations.
    @discardableResult
    private mutating func dropExpired(now: Double) -> Int {
        let before = items.count
        items = items.filter { $0.expiration > now }
        statistics.expirations += before - items.count
        return before - items.count
    }

    /// As the store: nothing when within `count`, else expired items first, then the oldest.
    mutating func trim(toCount count: Int, now: Double) {
        let count = max(0, count)
        guard items.count > count else { return }
        dropExpired(now: now)
        while items.count > count {
            items.removeLast()
            statistics.countEvictions += 1
        }
    }

    mutating func trim(toCost cost: Int, now: Double) {
        let cost = max(0, cost)
        guard totalCost > cost else { return }
        dropExpired(now: now)
        while totalCost > cost {
            items.removeLast()
            statistics.costEvictions += 1
        }
    }

    mutating func removeAll() {
        items.removeAll()
    }

    /// The statistics a store in the same state reports.
    var snapshot: MemoryStore<Key, Value>.Statistics {
        var result = statistics
        result.totalCount = totalCount
        result.totalCost = totalCost
        return result
    }
}
