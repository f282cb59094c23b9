import Foundation

/// An obviously correct, slow model of ``DiskStore``'s eviction under ``EvictionPolicy/s3fifo``.
///
/// Queues are plain arrays (index 0 = newest), the ghost an array (index 0 = oldest); every
/// operation is a linear scan. It shares no code with the store: the rules (as documented in
/// `DiskStore+S3FIFO.swift`), the charge of a row and the charge limit are written out again.
struct ReferenceDiskS3FIFO {
    struct Item: Equatable {
        var key: String
        var size: Int
        var charge: Int
        var expires: Int64?  // milliseconds; nil = never
        var frequency = 0
    }

    private(set) var countLimit: Int
    private(set) var sizeLimit: Int
    let ratio: Double
    private(set) var small: [Item] = []
    private(set) var main: [Item] = []
    private(set) var ghost: [(key: String, charge: Int)] = []
    private var hasEvicted = false
    private(set) var evictions = 0
    private(set) var expirations = 0

    init(countLimit: Int, sizeLimit: Int, ratio: Double) {
        self.countLimit = countLimit
        self.sizeLimit = sizeLimit
        self.ratio = ratio
    }

    /// What a row costs under `sizeLimit` (schema 3's `charge`), for a row without metadata.
    static func charge(key: String, size: Int, isInline: Bool) -> Int {
        let keyBytes = key.utf8.count
        return isInline ? 2 * (size + keyBytes) + 128 : ((size + 4_095) / 4_096 + 1) * 4_096 + 2 * keyBytes + 256
    }

    /// The most the rows may cost under `sizeLimit`: the limit less the log's bound above its
    /// 64 KiB floor, plus 96 KiB.
    static func chargeLimit(_ sizeLimit: Int) -> Int {
        let wal = min(4 << 20, max(64 << 10, sizeLimit / 16))
        return max(0, sizeLimit - (wal - (64 << 10))) + (96 << 10)
    }

    private static func share(_ limit: Int, _ ratio: Double) -> Int {
        let value = (Double(limit) * ratio).rounded(.down)
        return value >= Double(Int.max) ? .max : Int(value)
    }

    private static func target(_ limit: Int, _ ratio: Double) -> Int {
        guard ratio > 0 else { return limit }
        let exact = Double(limit) * (1 - ratio)
        guard exact < Double(Int.max) else { return limit }
        let nearest = exact.rounded()
        return abs(exact - nearest) <= 1e-9 * max(1, exact) ? Int(nearest) : Int(exact.rounded(.down))
    }

    var all: [Item] { small + main }
    /// Every key with a row, expired or not.
    var keys: [String] { all.map(\.key).sorted() }
    /// `(key, queue, frequency)` of every row, small queue (1) then main (0), oldest first.
    var queueOrder: [String] {
        small.reversed().map { "\($0.key) small \($0.frequency)" } + main.reversed().map { "\($0.key) main \($0.frequency)" }
    }

    private func measure(_ items: [Item]) -> (count: Int, size: Int, charge: Int) {
        (items.count, items.reduce(0) { $0 + $1.size }, items.reduce(0) { $0 + $1.charge })
    }

    // MARK: - Operations

    /// A read: `true` on a hit (the counter goes up, saturating at 3); an expired entry goes.
    mutating func read(_ key: String, now: Int64) -> Bool {
        for queue in [0, 1] {
            var items = queue == 0 ? small : main
            guard let index = items.firstIndex(where: { $0.key == key }) else { continue }
            if let expires = items[index].expires, expires <= now {
                items.remove(at: index)
                expirations += 1
            } else {
                items[index].frequency = min(items[index].frequency + 1, 3)
            }
            let hit = items.count == (queue == 0 ? small : main).count
            if queue == 0 { small = items } else { main = items }
            return hit
        }
        return false
    }

    mutating func remove(_ key: String) {
        small.removeAll { $0.key == key }
        main.removeAll { $0.key == key }
    }

    mutating func write(_ key: String, size: Int, isInline: Bool, expires: Int64?, now: Int64) {
        let charge = Self.charge(key: key, size: size, isInline: isInline)
        for queue in [0, 1] {
            var items = queue == 0 ? small : main
            guard let index = items.firstIndex(where: { $0.key == key }) else { continue }
            // An overwrite: a read, and the front of its queue.
            var item = items.remove(at: index)
            item.size = size
            item.charge = charge
            item.expires = expires
            item.frequency = min(item.frequency + 1, 3)
            items.insert(item, at: 0)
            if queue == 0 { small = items } else { main = items }
            evictIfNeeded(keeping: key, pending: nil, now: now)
            return
        }
        let wasGhost = ghost.contains { $0.key == key }
        ghost.removeAll { $0.key == key }
        let pending = Item(key: key, size: size, charge: charge, expires: expires)
        evictIfNeeded(keeping: key, pending: pending, now: now)
        let smallShare = (Self.share(countLimit, 0.1), Self.share(sizeLimit, 0.1), Self.share(Self.chargeLimit(sizeLimit), 0.1))
        let s = measure(small)
        let smallIsFull = s.count >= smallShare.0 || s.size >= smallShare.1 || s.charge >= smallShare.2
        if wasGhost || (!hasEvicted && smallIsFull) {
            main.insert(pending, at: 0)
        } else {
            small.insert(pending, at: 0)
        }
    }

    mutating func trim(toCount count: Int, toSize size: Int, now: Int64) {
        shrink(count: count, size: size, charge: .max, keeping: nil, pending: nil, now: now)
    }

    mutating func setLimits(countLimit: Int, sizeLimit: Int, now: Int64) {
        self.countLimit = countLimit
        self.sizeLimit = sizeLimit
        shrink(count: countLimit, size: sizeLimit, charge: Self.chargeLimit(sizeLimit), keeping: nil, pending: nil, now: now)
    }

    // MARK: - Eviction

    private mutating func evictIfNeeded(keeping key: String, pending: Item?, now: Int64) {
        let totals = measure(all + (pending.map { [$0] } ?? []))
        let chargeLimit = Self.chargeLimit(sizeLimit)
        guard totals.count > countLimit || totals.size > sizeLimit || totals.charge > chargeLimit else { return }
        shrink(
            count: totals.count > countLimit ? Self.target(countLimit, ratio) : countLimit,
            size: totals.size > sizeLimit ? Self.target(sizeLimit, ratio) : sizeLimit,
            charge: totals.charge > chargeLimit ? Self.target(chargeLimit, ratio) : chargeLimit,
            keeping: key, pending: pending, now: now)
    }

    private mutating func shrink(count: Int, size: Int, charge: Int, keeping key: String?, pending: Item?, now: Int64) {
        func isOver(_ model: ReferenceDiskS3FIFO) -> Bool {
            let totals = model.measure(model.all + (pending.map { [$0] } ?? []))
            return totals.count > count || totals.size > size || totals.charge > charge
        }
        guard isOver(self) else { return }
        // Expired entries first (not remembered in the ghost).
        let isExpired = { (item: Item) in item.expires.map { $0 <= now } ?? false }
        expirations += all.filter(isExpired).count
        small.removeAll(where: isExpired)
        main.removeAll(where: isExpired)
        while isOver(self) {
            guard let (victim, fromSmall) = victim(keeping: key) else { return }
            evictions += 1
            if fromSmall { remember(victim, entries: all.count + (pending == nil ? 0 : 1)) }
        }
    }

    private mutating func victim(keeping key: String?) -> (Item, fromSmall: Bool)? {
        hasEvicted = true
        let chargeLimit = Self.chargeLimit(sizeLimit)
        let mainShare = (
            countLimit - Self.share(countLimit, 0.1), sizeLimit - Self.share(sizeLimit, 0.1),
            chargeLimit - Self.share(chargeLimit, 0.1))
        let m = measure(main)
        if m.count > mainShare.0 || m.size > mainShare.1 || m.charge > mainShare.2 || small.isEmpty {
            if let victim = mainVictim(keeping: key) { return (victim, false) }
        }
        while let index = small.lastIndex(where: { $0.key != key }) {
            var item = small.remove(at: index)
            guard item.frequency >= 2 else { return (item, true) }
            item.frequency = 0
            main.insert(item, at: 0)
        }
        return mainVictim(keeping: key).map { ($0, false) }
    }

    private mutating func mainVictim(keeping key: String?) -> Item? {
        while let index = main.lastIndex(where: { $0.key != key }) {
            var item = main.remove(at: index)
            guard item.frequency > 0 else { return item }
            item.frequency -= 1
            main.insert(item, at: 0)
        }
        return nil
    }

    /// Remembers an entry evicted from small: at most 90% of each limit, and no more keys than
    /// `entries` (the rows left).
    private mutating func remember(_ item: Item, entries: Int) {
        let chargeLimit = Self.chargeLimit(sizeLimit)
        let limit = (count: min(Self.share(countLimit, 0.9), entries), charge: Self.share(chargeLimit, 0.9))
        guard item.charge <= limit.charge, limit.count > 0 else { return }
        while !ghost.isEmpty,
              ghost.count + 1 > limit.count || ghost.reduce(0, { $0 + $1.charge }) + item.charge > limit.charge {
            ghost.removeFirst()
        }
        if !ghost.contains(where: { $0.key == item.key }) { ghost.append((item.key, item.charge)) }
    }
}
