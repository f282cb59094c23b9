import ArgumentParser
import Foundation
import Larder

/// `larder list`: the live entries, in key order.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the live entries in key order.",
        discussion: """
            With --json, prints {"total": N, "count": n, "entries": [...]} where total counts \
            every live entry (with --prefix, those that match) and count the ones listed. Each \
            entry has: key, original_bytes, stored_bytes, encoding ("raw" or "gzip"), storage \
            ("inline" or "file"), created, accessed and expires (ISO 8601 UTC; expires is \
            null for an entry that never expires).
            """)

    @OptionGroup var cache: CacheOptions

    @Option(parsing: .unconditional, help: ArgumentHelp("List at most this many entries.", valueName: "n"))
    var limit: EntryCount?

    @Option(help: ArgumentHelp("List only keys that start with this string.", valueName: "prefix"))
    var prefix: String?

    @Flag(help: "Print JSON (keys documented above).")
    var json = false

    func validate() throws {
        if let limit, limit.value < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        let keys = try prefix.map { try store.keys(withPrefix: $0) } ?? store.keys()
        var entries: [DiskStore.Attributes] = []
        for key in keys {
            if let limit, entries.count >= limit.value { break }
            if let entry = try store.attributes(forKey: key) { entries.append(entry) }
        }
        if json {
            try printJSON([
                "total": keys.count,
                "count": entries.count,
                "entries": entries.map(Self.json),
            ] as [String: Any])
            return
        }
        if entries.isEmpty {
            print(keys.isEmpty ? "No entries." : "No live entries.")
            return
        }
        var table = Table([.left, .right, .right, .left, .left, .left])
        table.append("KEY", "SIZE", "STORED", "WHERE", "ACCESSED", "EXPIRES")
        let now = Date()
        for entry in entries {
            let place = (entry.isInline ? "inline" : "file") + (entry.encoding == .gzip ? ", gzip" : "")
            table.append(
                displayKey(entry.key), formatBytes(entry.originalSize), formatBytes(entry.size), place,
                formatRelative(entry.accessDate, now: now), entry.expirationDate.map { formatRelative($0, now: now) } ?? "never")
        }
        table.print()
        if entries.count < keys.count {
            print("(\(formatCount(entries.count)) of \(formatCount(keys.count)) entries shown)")
        }
    }

    static func json(_ entry: DiskStore.Attributes) -> [String: Any] {
        [
            "key": entry.key,
            "original_bytes": entry.originalSize,
            "stored_bytes": entry.size,
            "encoding": entry.encoding == .gzip ? "gzip" : "raw",
            "storage": entry.isInline ? "inline" : "file",
            "created": formatTimestamp(entry.creationDate),
            "accessed": formatTimestamp(entry.accessDate),
            "expires": jsonOrNull(entry.expirationDate.map(formatTimestamp)),
        ]
    }
}
