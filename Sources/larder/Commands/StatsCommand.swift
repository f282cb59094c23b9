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
              hits             reads that found a value, by every process on the cache
              misses           reads that found nothing, by every process on the cache
              evictions        entries removed by the size and count limits
              size_limit       the size limit of the application using the cache, or null

            Hits, misses and evictions are written into the index by each process with its
            access order: a reading process's counts arrive a few seconds late.

            With --watch, shows the hit ratio, size against the limit and evictions every
            --interval seconds until interrupted (or --refreshes times): redrawn in place on a
            terminal, one line of key=value pairs per refresh otherwise.
            """)

    @OptionGroup var cache: CacheOptions

    @Flag(help: "Print JSON (keys documented above).")
    var json = false

    @Flag(help: "Keep showing the hit ratio, size and evictions (see above).")
    var watch = false

    @Option(help: ArgumentHelp("Seconds between two refreshes of --watch.", valueName: "seconds"))
    var interval: Double = 2

    @Option(help: ArgumentHelp("Stop --watch after this many refreshes.", valueName: "n"))
    var refreshes: Int?

    func validate() throws {
        guard interval.isFinite, interval >= 0.05, interval <= 86_400 else {
            throw ValidationError("--interval must be between 0.05 and 86400 seconds, got \(interval)")
        }
        if let refreshes, refreshes < 1 { throw ValidationError("--refreshes must be at least 1, got \(refreshes)") }
        if watch, json { throw ValidationError("--watch and --json cannot be used together") }
    }

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        if watch {
            try StatsWatch(store: store, interval: interval, refreshes: refreshes, isTerminal: isatty(STDOUT_FILENO) == 1).run()
            return
        }
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
    /// The hits, misses and evictions every process wrote into the index.
    var counts: DiskStore.DirectoryStatistics

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
        counts = try store.directoryStatistics()
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
            "hits": counts.hits,
            "misses": counts.misses,
            "evictions": counts.evictions,
            "size_limit": jsonOrNull(counts.sizeLimit),
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
        let reads = "\(formatCount(counts.hits)) hits, \(formatCount(counts.misses)) misses"
        table.append("Hit ratio", "\(StatsWatch.ratio(hits: counts.hits, misses: counts.misses)) (\(reads))")
        table.append("Evictions", formatCount(counts.evictions))
        table.print()
    }
}
