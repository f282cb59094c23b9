import ArgumentParser
import Foundation
import Larder

/// `larder verify`: checks every entry's bytes; `--repair` removes the damaged ones.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every entry: index row, blob file, checksum and decompression.",
        discussion: """
            Without --repair nothing is changed. Progress goes to standard error: a bar on a \
            terminal, otherwise a plain line per tenth (only the last line for fewer than 100 entries). Exit status: 0 when every entry is intact or \
            every damaged one was removed, 2 when damaged entries remain. With --json, prints \
            {"checked", "good", "damaged", "removed", "remaining", "damaged_entries": \
            [{"key", "damage"}]} where damage is one of missing-file, size-mismatch, \
            checksum-mismatch, undecodable, unknown-encoding.
            """)

    @OptionGroup var cache: CacheOptions

    @Flag(help: "Remove the damaged entries.")
    var repair = false

    @Flag(help: "Print JSON (keys documented above).")
    var json = false

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        let progress = ProgressReporter(label: repair ? "verifying and repairing" : "verifying")
        let report = try store.verify(repair: repair) { checked, total in progress.update(checked, of: total) }
        progress.finish()

        if json {
            try printJSON([
                "checked": report.checkedCount,
                "good": report.goodCount,
                "damaged": report.damagedEntries.count,
                "removed": report.removedCount,
                "remaining": report.remainingDamageCount,
                "damaged_entries": report.damagedEntries.map { ["key": $0.key, "damage": $0.damage.identifier] },
            ] as [String: Any])
        } else {
            print(report: report, directory: store.directory.path)
        }
        if !report.isHealthy { throw ExitCode(2) }
    }

    private func print(report: DiskStore.VerificationReport, directory: String) {
        Swift.print("Checked \(formatCount(report.checkedCount)) \(report.checkedCount == 1 ? "entry" : "entries") in \(directory)")
        var table = Table([.left, .right])
        table.append("Good", formatCount(report.goodCount))
        table.append("Damaged", formatCount(report.damagedEntries.count))
        table.print()
        var damaged = Table([.left, .left], indent: 2)
        for entry in report.damagedEntries.prefix(50) {
            damaged.append(quotedKey(entry.key), entry.damage.description)
        }
        damaged.print()
        if report.damagedEntries.count > 50 {
            Swift.print("  … and \(formatCount(report.damagedEntries.count - 50)) more")
        }
        if repair {
            Swift.print("Removed \(formatCount(report.removedCount)) damaged \(report.removedCount == 1 ? "entry" : "entries").")
        }
        if report.isHealthy {
            Swift.print("The cache is healthy.")
        } else {
            Swift.print("Run `larder verify --repair` to remove the damaged entries.")
        }
    }
}

/// Progress on standard error: a redrawn bar on a terminal, a plain line per tenth otherwise.
final class ProgressReporter {
    private let label: String
    private let isTerminal = isatty(STDERR_FILENO) == 1
    private var lastDrawn = -1
    private var drewBar = false

    init(label: String) {
        self.label = label
    }

    func update(_ checked: Int, of total: Int) {
        guard total > 0 else { return }
        if isTerminal {
            let permille = checked * 1_000 / total
            guard permille != lastDrawn else { return }
            lastDrawn = permille
            let width = 30
            let filled = checked * width / total
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            let line = "\r\(label) [\(bar)] \(permille / 10)% \(formatCount(checked))/\(formatCount(total))"
            FileHandle.standardError.write(Data(line.utf8))
            drewBar = true
        } else {
            // A line per tenth for a large cache; for a small one only the last line.
            let tenth = checked * 10 / total
            guard tenth != lastDrawn, checked == total || (total >= 100 && tenth > 0) else { return }
            lastDrawn = tenth
            printError("larder: \(label): \(formatCount(checked)) of \(formatCount(total)) entries checked")
        }
    }

    func finish() {
        // Clear the bar's line so the report starts on a clean one.
        if drewBar { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}
