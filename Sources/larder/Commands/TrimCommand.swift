import ArgumentParser
import Foundation
import Larder

/// `larder trim`: removes expired entries, then least recently used ones, down to a target.
struct TrimCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trim",
        abstract: "Shrink the cache: expired entries first, then least recently used ones.",
        discussion: """
            --size and --count may be combined; --percent stands alone. --expired removes every \
            expired entry first and may be combined with any of them (--percent then applies to \
            what is left). With --json, prints {"before": {"entries", "stored_bytes"}, "after": \
            {...}, "removed_entries", "removed_bytes", "expired", "evicted"}.
            """)

    @OptionGroup var cache: CacheOptions

    @Option(parsing: .unconditional, help: ArgumentHelp("Trim until the stored size is at most this (e.g. 500000, 64K, 10M, 1G).", valueName: "bytes"))
    var size: ByteCount?

    @Option(parsing: .unconditional, help: ArgumentHelp("Trim until at most this many entries remain.", valueName: "n"))
    var count: EntryCount?

    @Option(parsing: .unconditional, help: ArgumentHelp("Remove this percentage of the entries (0-100), least recently used first.", valueName: "p"))
    var percent: Double?

    @Flag(help: "Remove every expired entry.")
    var expired = false

    @Flag(help: "Print JSON (keys documented above).")
    var json = false

    func validate() throws {
        if percent != nil, size != nil || count != nil {
            throw ValidationError("--percent cannot be combined with --size or --count")
        }
        if let percent, !(percent.isFinite && (0...100).contains(percent)) {
            throw ValidationError("--percent must be between 0 and 100, not \(percent)")
        }
        if size == nil, count == nil, percent == nil, !expired {
            throw ValidationError("nothing to trim: give --size, --count, --percent or --expired")
        }
    }

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        let before = (count: store.totalCount, size: store.totalSize)
        let statisticsBefore = store.statistics

        if expired { try store.removeExpired() }
        if let size { try store.trim(toSize: size.value) }
        if let count { try store.trim(toCount: count.value) }
        if let percent {
            // The same rounding as the stores' own overflow trim: keep ⌊count × (1 − p)⌋.
            let keep = Int((Double(store.totalCount) * (1 - percent / 100)).rounded(.down))
            try store.trim(toCount: keep)
        }

        let after = (count: store.totalCount, size: store.totalSize)
        let statistics = store.statistics
        let expiredCount = statistics.expirations - statisticsBefore.expirations
        let evicted = statistics.evictions - statisticsBefore.evictions
        if json {
            try printJSON([
                "before": ["entries": before.count, "stored_bytes": before.size],
                "after": ["entries": after.count, "stored_bytes": after.size],
                "removed_entries": before.count - after.count,
                "removed_bytes": before.size - after.size,
                "expired": expiredCount,
                "evicted": evicted,
            ] as [String: Any])
            return
        }
        func entries(_ count: Int) -> String { "\(formatCount(count)) \(count == 1 ? "entry" : "entries")" }
        var table = Table([.left, .right, .right, .left])
        table.append("Before", entries(before.count), formatBytes(before.size), "")
        table.append("After", entries(after.count), formatBytes(after.size), "")
        table.append(
            "Removed", entries(before.count - after.count), formatBytes(before.size - after.size),
            "(\(formatCount(expiredCount)) expired, \(formatCount(evicted)) least recently used)")
        table.print()
    }
}
