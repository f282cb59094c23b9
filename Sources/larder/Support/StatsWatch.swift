import Foundation
import Larder

#if canImport(Glibc)
import Glibc
#endif

/// `larder stats --watch`: the directory's hit ratio, size against its limit and evictions,
/// read every interval from the counts every store adds to the index
/// (``Larder/DiskStore/DirectoryStatistics``). On a terminal the view is redrawn in place; into
/// a pipe or a file each refresh is one `key=value` line.
struct StatsWatch {
    let store: DiskStore
    let interval: Double
    /// Refreshes before stopping; `nil` until interrupted.
    let refreshes: Int?
    let isTerminal: Bool

    func run() throws {
        var previous: DiskStore.DirectoryStatistics?
        var linesShown = 0
        var done = 0
        while true {
            let now = try store.directoryStatistics()
            if isTerminal {
                let lines = view(now, since: previous)
                // Back to the view's first line, each line cleared before it is redrawn.
                var text = linesShown > 0 ? "\u{1B}[\(linesShown)A" : ""
                for line in lines { text += "\u{1B}[2K" + line + "\n" }
                emit(text)
                linesShown = lines.count
            } else {
                emit(line(now) + "\n")
            }
            previous = now
            done += 1
            if let refreshes, done >= refreshes { return }
            Thread.sleep(forTimeInterval: interval)
        }
    }

    /// The terminal view: one line per figure, with the growth since the previous refresh.
    func view(_ now: DiskStore.DirectoryStatistics, since previous: DiskStore.DirectoryStatistics?) -> [String] {
        var table = Table([.left, .left])
        table.append("Cache", store.directory.path)
        var ratio = "\(Self.ratio(hits: now.hits, misses: now.misses)) (\(formatCount(now.hits)) hits, \(formatCount(now.misses)) misses)"
        if let previous {
            ratio += ", \(Self.ratio(hits: now.hits - previous.hits, misses: now.misses - previous.misses)) in the last \(Self.seconds(interval))"
        }
        table.append("Hit ratio", ratio)
        var size = "\(formatBytes(now.totalSize)) in \(formatCount(now.totalCount)) entries"
        if let limit = now.sizeLimit, limit > 0 {
            size += ", " + String(format: "%.0f%%", Double(now.totalSize) / Double(limit) * 100) + " of the \(formatBytes(limit)) limit"
        }
        table.append("Size", size)
        var evictions = formatCount(now.evictions)
        if let previous { evictions += ", \(formatCount(now.evictions - previous.evictions)) in the last \(Self.seconds(interval))" }
        table.append("Evictions", evictions)
        return table.lines + ["(every \(Self.seconds(interval)); Ctrl-C stops)"]
    }

    /// One refresh as a line for a log: a timestamp, then `key=value` pairs.
    func line(_ now: DiskStore.DirectoryStatistics) -> String {
        let reads = now.hits + now.misses
        var fields = [
            formatTimestamp(Date()), "hits=\(now.hits)", "misses=\(now.misses)",
            "hit_ratio=" + (reads == 0 ? "-" : String(format: "%.4f", Double(now.hits) / Double(reads))),
            "entries=\(now.totalCount)", "bytes=\(now.totalSize)",
        ]
        if let limit = now.sizeLimit { fields.append("size_limit=\(limit)") }
        fields.append("evictions=\(now.evictions)")
        return fields.joined(separator: " ")
    }

    static func ratio(hits: Int, misses: Int) -> String {
        let reads = hits + misses
        return reads == 0 ? "no reads" : String(format: "%.1f%%", Double(hits) / Double(reads) * 100)
    }

    static func seconds(_ interval: Double) -> String {
        interval == interval.rounded() ? "\(Int(interval)) s" : "\(interval) s"
    }

    private func emit(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
