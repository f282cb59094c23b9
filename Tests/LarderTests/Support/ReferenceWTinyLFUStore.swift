import Foundation
@testable import Larder

/// An obviously correct, slow model of ``MemoryStore`` under ``EvictionPolicy/wTinyLFU``.
///
/// The lists are plain arrays (index 0 = newest); the frequency sketch is a dictionary of
/// counters and a set of doorkeeper bits; every operation is a linear scan. It shares only the
/// sketch's hash-to-position function with the store (``FrequencySketch/positions(of:blockMask:doorkeeperMask:)``);
/// the W-TinyLFU rules (as documented on ``EvictionPolicy/wTinyLFU`` and ``WTinyLFUPolicy``),
/// the sketch's counting, aging and sizing, and the limits are written out again.
struct ReferenceWTinyLFUStore<Key: Hashable & Sendable, Value>: MemoryStoreModel {
    struct Item {
        var key: Key
        var value: Value
        var cost: Int
        var expiration: Double  // .infinity = never
        var bucket: Int?
    }

    /// The sketch, counter by counter: `counters[word * 16 + counter]`, doorkeeper bits by
    /// `word * 64 + bit`.
    struct Sketch {
        var capacity: Int
        var counters: [Int: Int] = [:]
        var doorkeeper: Set<Int> = []
        var uses = 0

        init(capacity: Int) { self.capacity = max(capacity, 16) }

        private var positions: (Int) -> FrequencySketch.Positions {
            let blocks = FrequencySketch.blockCount(forCapacity: capacity)
            return { FrequencySketch.positions(of: $0, blockMask: blocks - 1) }
        }

        private func cells(_ hash: Int) -> (counters: [Int], doorkeeper: [Int]) {
            let at = positions(hash)
            let words = [at.words.0, at.words.1, at.words.2, at.words.3]
            let shifts = [at.shifts.0, at.shifts.1, at.shifts.2, at.shifts.3]
            let counters = zip(words, shifts).map { $0 * 16 + Int($1) / 4 }
            let bits = (0..<64).filter { at.doorkeeperBits & (1 << UInt64($0)) != 0 }.map { at.doorkeeperWord * 64 + $0 }
            return (counters, bits)
        }

        mutating func increment(_ hash: Int) {
            let (counters, bits) = cells(hash)
            if !bits.allSatisfy(doorkeeper.contains) {
                doorkeeper.formUnion(bits)
                return
            }
            // The four rows' counters are distinct cells (each row has its own words).
            for cell in counters where self.counters[cell, default: 0] < 15 { self.counters[cell, default: 0] += 1 }
        }

        func estimate(_ hash: Int) -> Int {
            let (counters, bits) = cells(hash)
            return counters.map { self.counters[$0, default: 0] }.min()! + (bits.allSatisfy(doorkeeper.contains) ? 1 : 0)
        }

        mutating func recordUse() {
            uses += 1
            guard uses >= 16 * capacity else { return }
            uses = 0
            counters = counters.mapValues { $0 / 2 }
            doorkeeper = []
        }

        mutating func resize(_ newCapacity: Int) {
            guard max(newCapacity, 16) != capacity else { return }
            self = Sketch(capacity: newCapacity)
        }

        mutating func grow(toFit count: Int, limit: Int) {
            guard count > capacity, capacity < limit else { return }
            var newCapacity = capacity
            while newCapacity < count, newCapacity < limit { newCapacity = min(2 * newCapacity, limit) }
            resize(newCapacity)
        }
    }

    let countLimit: Int
    let costLimit: Int
    let entryCostLimit: Int
    let buckets: [SizeBucket]
    let ratio: Double
    let defaultExpiry: Expiry
    let measure: (Value) -> Int

    private(set) var window: [Item] = []
    private(set) var probation: [Item] = []
    private(set) var protected: [Item] = []
    private(set) var sketch: Sketch
    private(set) var statistics = MemoryStore<Key, Value>.Statistics()

    init(_ configuration: MemoryStore<Key, Value>.Configuration, measure: @escaping (Value) -> Int) {
        countLimit = configuration.countLimit
        costLimit = configuration.costLimit
        entryCostLimit = configuration.entryCostLimit
        buckets = configuration.sizeBuckets
        ratio = configuration.overflowTrimRatio
        defaultExpiry = configuration.defaultExpiry
        self.measure = measure
        let main = configuration.countLimit - Self.windowCountShare(configuration.countLimit)
        sketch = Sketch(capacity: min(main, 1_024))
    }

    var all: [Item] { window + probation + protected }
    var main: [Item] { probation + protected }
    var totalCount: Int { all.count }
    var totalCost: Int { all.reduce(0) { $0 + $1.cost } }
    var keysByRecency: [Key] { all.map(\.key) }
    var frequencies: [Key: Int] { Dictionary(uniqueKeysWithValues: all.map { ($0.key, sketch.estimate($0.key.hashValue)) }) }
    var ghostCount: Int { 0 }

    static func windowCountShare(_ limit: Int) -> Int { limit <= 0 ? 0 : max(1, limit / 100) }
    private var mainCountShare: Int { countLimit - Self.windowCountShare(countLimit) }
    private var mainCostShare: Int { costLimit - costLimit / 100 }
    private var protectedCountShare: Int { mainCountShare - mainCountShare / 5 }
    private var protectedCostShare: Int { mainCostShare - mainCostShare / 5 }
    private func cost(_ items: [Item]) -> Int { items.reduce(0) { $0 + $1.cost } }

    private func target(_ limit: Int) -> Int {
        ratio == 0 ? limit : Int((Double(limit) * (1 - ratio) + 1e-9).rounded(.down))
    }

    private enum Place { case window, probation, protected }

    /// Removes `key` from whichever list holds it.
    private mutating func take(_ key: Key) -> (item: Item, place: Place)? {
        if let index = window.firstIndex(where: { $0.key == key }) { return (window.remove(at: index), .window) }
        if let index = probation.firstIndex(where: { $0.key == key }) { return (probation.remove(at: index), .probation) }
        if let index = protected.firstIndex(where: { $0.key == key }) { return (protected.remove(at: index), .protected) }
        return nil
    }

    private func find(_ key: Key) -> Item? { all.first { $0.key == key } }

    private mutating func demoteWhileProtectedIsOver() {
        while !protected.isEmpty, protected.count > protectedCountShare || cost(protected) > protectedCostShare {
            probation.insert(protected.removeLast(), at: 0)
        }
    }

    /// Into main: probation if it has room, else protected if it has room, else probation.
    private mutating func enterMain(_ item: Item) {
        let probationCountShare = mainCountShare / 5, probationCostShare = mainCostShare / 5
        let probationHasRoom = probation.count < probationCountShare && cost(probation) + item.cost <= probationCostShare
        let protectedHasRoom = protected.count < protectedCountShare && cost(protected) + item.cost <= protectedCostShare
        if !probationHasRoom && protectedHasRoom { protected.insert(item, at: 0) } else { probation.insert(item, at: 0) }
    }

    /// A hit: window → front; probation → protected; protected → front. Main hits are counted.
    private mutating func use(_ key: Key) {
        guard let (item, place) = take(key) else { return }
        switch place {
        case .window:
            window.insert(item, at: 0)
            return
        case .probation, .protected:
            protected.insert(item, at: 0)
            demoteWhileProtectedIsOver()
        }
        sketch.increment(key.hashValue)
        sketch.recordUse()
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
        use(key)
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

    /// Evicts one entry of `bucket` (`nil`: any entry): the window's oldest moves to main
    /// while main (its entries of the bucket) is within `countShare` and `costShare`; then it
    /// contests main's victim. Returns false when nothing can go.
    private mutating func evictOne(bucket: Int?, countShare: Int, costShare: Int) -> Bool {
        let inScope = { (item: Item) in bucket == nil || item.bucket == bucket }
        while true {
            let scopedMain = main.filter(inScope)
            let mainIsOver = scopedMain.count > countShare || cost(scopedMain) > costShare
            let mainVictim = (probation.last(where: inScope) ?? protected.last(where: inScope))?.key
            guard !mainIsOver, let candidate = window.last(where: inScope) else {
                guard let mainVictim else { return false }
                _ = take(mainVictim)
                return true
            }
            if scopedMain.count < countShare, cost(scopedMain) + candidate.cost <= costShare {
                _ = take(candidate.key)
                enterMain(candidate)
                sketch.increment(candidate.key.hashValue)
                continue
            }
            let admitted = mainVictim.map { sketch.estimate(candidate.key.hashValue) > sketch.estimate($0.hashValue) } ?? false
            sketch.increment(candidate.key.hashValue)
            if admitted, let mainVictim {
                _ = take(mainVictim)
                _ = take(candidate.key)
                enterMain(candidate)
            } else {
                _ = take(candidate.key)
            }
            return true
        }
    }

    private mutating func evictFromStore() -> Bool {
        evictOne(bucket: nil, countShare: mainCountShare, costShare: mainCostShare)
    }

    private mutating func evictFromBucket(_ bucket: Int) -> Bool {
        let limit = buckets[bucket].countLimit
        return evictOne(bucket: bucket, countShare: limit - Self.windowCountShare(limit), costShare: .max)
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

        // The written entry stays out of the lists until the evictions are done.
        let pending = Item(key: key, value: value, cost: cost, expiration: expiration, bucket: bucket)
        let previous = take(key)?.place
        let bucketIsOver = bucket.map { bucket in all.filter({ $0.bucket == bucket }).count + 1 > buckets[bucket].countLimit } ?? false
        let countIsOver = totalCount + 1 > countLimit
        let costIsOver = totalCost + cost > costLimit
        if bucketIsOver || countIsOver || costIsOver { removeExpired(now: now) }
        if bucketIsOver, let bucket {
            while all.filter({ $0.bucket == bucket }).count + 1 > target(buckets[bucket].countLimit), evictFromBucket(bucket) {
                statistics.bucketEvictions += 1
            }
        }
        if countIsOver {
            while totalCount + 1 > target(countLimit), evictFromStore() { statistics.countEvictions += 1 }
        }
        if costIsOver {
            while totalCost + cost > target(costLimit), evictFromStore() { statistics.costEvictions += 1 }
        }

        switch previous {
        case nil:
            window.insert(pending, at: 0)
            sketch.grow(toFit: totalCount, limit: mainCountShare)
            sketch.increment(key.hashValue)
        case .window:
            window.insert(pending, at: 0)
        case .probation, .protected:
            protected.insert(pending, at: 0)
            demoteWhileProtectedIsOver()
            sketch.increment(key.hashValue)
            sketch.recordUse()
        }
        return true
    }

    mutating func removeValue(forKey key: Key, now: Double) -> Value? {
        guard let (item, _) = take(key) else { return nil }
        return item.expiration <= now ? nil : item.value
    }

    @discardableResult
    mutating func removeExpired(now: Double) -> Int {
        let before = totalCount
        window.removeAll { $0.expiration <= now }
        probation.removeAll { $0.expiration <= now }
        protected.removeAll { $0.expiration <= now }
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
        window.removeAll()
        probation.removeAll()
        protected.removeAll()
        sketch = Sketch(capacity: sketch.capacity)
    }

    var snapshot: MemoryStore<Key, Value>.Statistics {
        var result = statistics
        result.totalCount = totalCount
        result.totalCost = totalCost
        return result
    }
}
