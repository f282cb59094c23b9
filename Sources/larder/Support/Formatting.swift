import Foundation

/// Human-readable bytes in binary units: `512 B`, `1.5 KiB`, `12.0 MiB`.
func formatBytes(_ count: Int) -> String {
    if count < 1024 { return "\(count) B" }
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    var value = Double(count) / 1024
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    let rounded = (value * 10).rounded() / 10
    return rounded == rounded.rounded(.down) ? "\(Int(rounded)) \(units[unit])" : String(format: "%.1f %@", rounded, units[unit])
}

/// An integer with thousands separators: `1,234,567`.
func formatCount(_ count: Int) -> String {
    let digits = String(count.magnitude)
    var grouped = ""
    for (offset, character) in digits.enumerated() {
        if offset > 0, (digits.count - offset) % 3 == 0 { grouped.append(",") }
        grouped.append(character)
    }
    return (count < 0 ? "-" : "") + grouped
}

/// A key as it may be shown on a terminal: control characters and other invisible scalars are
/// escaped (`\n`, `\u{1B}`), so a key can never break a line or move the cursor.
func displayKey(_ key: String) -> String {
    var shown = ""
    for scalar in key.unicodeScalars {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned, .surrogate, .privateUse:
            shown += scalar.escaped(asASCII: true)
        default:
            shown.unicodeScalars.append(scalar)
        }
    }
    return shown
}

/// A key in quotes for messages: `"avatars/42"`.
func quotedKey(_ key: String) -> String {
    "\"" + displayKey(key).replacingOccurrences(of: "\"", with: "\\\"") + "\""
}

/// A date relative to `now` for tables: `just now`, `5 min ago`, `in 2 h`.
func formatRelative(_ date: Date, now: Date = Date()) -> String {
    let seconds = date.timeIntervalSince(now)
    let magnitude = abs(seconds)
    let text: String
    switch magnitude {
    case ..<1: return "now"
    case ..<60: text = "\(Int(magnitude)) s"
    case ..<3_600: text = "\(Int(magnitude / 60)) min"
    case ..<86_400: text = "\(Int(magnitude / 3_600)) h"
    default: text = "\(Int(magnitude / 86_400)) d"
    }
    return seconds < 0 ? "\(text) ago" : "in \(text)"
}

/// An ISO 8601 UTC timestamp with milliseconds: `2026-05-01T12:00:00.250Z`.
func formatTimestamp(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: date)
}

/// Columns of text, aligned with two spaces between them.
struct Table {
    enum Alignment {
        case left
        case right
    }

    var alignments: [Alignment]
    var rows: [[String]] = []
    /// Spaces before every row.
    var indent = 0

    init(_ alignments: [Alignment], indent: Int = 0) {
        self.alignments = alignments
        self.indent = indent
    }

    mutating func append(_ row: String...) {
        rows.append(row)
    }

    mutating func append(_ row: [String]) {
        rows.append(row)
    }

    var lines: [String] {
        var widths = [Int](repeating: 0, count: alignments.count)
        for row in rows {
            for (column, cell) in row.enumerated() where column < widths.count {
                widths[column] = max(widths[column], cell.count)
            }
        }
        return rows.map { row in
            var line = String(repeating: " ", count: indent)
            for (column, cell) in row.enumerated() {
                let padding = String(repeating: " ", count: max(0, widths[min(column, widths.count - 1)] - cell.count))
                let isLast = column == row.count - 1
                switch alignments[min(column, alignments.count - 1)] {
                case .left: line += cell + (isLast ? "" : padding)
                case .right: line += padding + cell
                }
                if !isLast { line += "  " }
            }
            while line.last == " " { line.removeLast() }
            return line
        }
    }

    func print() {
        for line in lines { Swift.print(line) }
    }
}

/// Prints `object` as pretty, key-sorted JSON on standard output. Use `NSNull()` for null.
func printJSON(_ object: Any) throws {
    let data = try JSONSerialization.data(
        withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    print(String(decoding: data, as: UTF8.self))
}

/// `value` for JSON, or `NSNull()` when it is `nil`.
func jsonOrNull(_ value: Any?) -> Any {
    value ?? NSNull()
}
