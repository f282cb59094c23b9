import ArgumentParser
import Foundation
import Larder

/// `larder stats`: totals of the cache.
struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the cache's totals.",
        discussion: """
            With --json, prints one object with these keys (sizes in bytes, dates in ISO 8601 UTC):
              directory        the cache directory
              entries          rows in the index, expired ones included
              live_entries     entries a read would return
              expired_entries  expired entries not yet removed
              stored_bytes     bytes on disk (after compression), all entries
              original_bytes   bytes as written, live entries
              inline_entries   live entries stored in the index row
              file_entries     live entries stored in blob files
              gzip_entries     live entries stored gzip-compressed
              index_bytes      size of the index and its WAL
              oldest_access    least recent access of a live entry, or null
              newest_access    most recent access of a live entry, or null
            """)

    @OptionGroup var cache: CacheOptions

    @Flag(help: "Print JSON (keys documented above).")
    var json = false

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        let summary = try CacheSummary(store: store)
        if json {
            try printJSON(summary.json)
        } else {
            summary.print()
        }
    }
}

/// The numbers `stats` reports.
struct CacheSummary {
    var directory: String
    var entries: Int
    var liveEntries = 0
    var storedBytes: Int
    var originalBytes = 0
    var inlineEntries = 0
    var fileEntries = 0
    var gzipEntries = 0
    var indexBytes = 0
    var oldestAccess: Date?
    var newestAccess: Date?

    var expiredEntries: Int { max(0, entries - liveEntries) }

    init(store: DiskStore) throws {
        directory = store.directory.path
        entries = store.totalCount
        storedBytes = store.totalSize
        for key in try store.keys() {
            guard let entry = try store.attributes(forKey: key) else { continue }
            liveEntries += 1
            originalBytes += entry.originalSize
            if entry.isInline { inlineEntries += 1 } else { fileEntries += 1 }
            if entry.encoding == .gzip { gzipEntries += 1 }
            oldestAccess = min(oldestAccess ?? entry.accessDate, entry.accessDate)
            newestAccess = max(newestAccess ?? entry.accessDate, entry.accessDate)
        }
        indexBytes = store.indexFileSize
    }

    var json: [String: Any] {
        [
            "directory": directory,
            "entries": entries,
            "live_entries": liveEntries,
            "expired_entries": expiredEntries,
            "stored_bytes": storedBytes,
            "original_bytes": originalBytes,
            "inline_entries": inlineEntries,
            "file_entries": fileEntries,
            "gzip_entries": gzipEntries,
            "index_bytes": indexBytes,
            "oldest_access": jsonOrNull(oldestAccess.map(formatTimestamp)),
            "newest_access": jsonOrNull(newestAccess.map(formatTimestamp)),
        ]
    }

    func print() {
        var table = Table([.left, .left])
        table.append("Cache", directory)
        var entryLine = "\(formatCount(liveEntries)) live"
        if expiredEntries > 0 { entryLine += ", \(formatCount(expiredEntries)) expired (not yet removed)" }
        table.append("Entries", entryLine)
        table.append("", "\(formatCount(inlineEntries)) inline, \(formatCount(fileEntries)) in files, \(formatCount(gzipEntries)) gzip")
        table.append("Stored", "\(formatBytes(storedBytes)) (\(formatCount(storedBytes)) bytes)")
        var original = "\(formatBytes(originalBytes)) (\(formatCount(originalBytes)) bytes)"
        if originalBytes > 0, storedBytes < originalBytes, expiredEntries == 0 {
            let saved = Double(originalBytes - storedBytes) / Double(originalBytes) * 100
            original += String(format: ", gzip saves %.0f%%", saved)
        }
        table.append("Original", original)
        table.append("Index", formatBytes(indexBytes))
        if let oldestAccess, let newestAccess {
            table.append("Accessed", "\(formatRelative(newestAccess)) (newest), \(formatRelative(oldestAccess)) (oldest)")
        }
        table.print()
    }
}
