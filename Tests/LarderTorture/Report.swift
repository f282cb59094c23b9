import Foundation
import LarderTestSupport

extension Torture {
    /// The one Markdown report of a run.
    /// The commit the run was built from, noted as the run starts (edits made while it runs do
    /// not change what it tested).
    static func commit(root: URL) -> String {
        let head = shell("git", "-C", root.path, "rev-parse", "HEAD")
        let dirty = !shell("git", "-C", root.path, "status", "--porcelain", "--untracked-files=no").isEmpty
        return "`\(head)`" + (dirty ? " (with uncommitted changes)" : "")
    }

    static func report(_ records: [PhaseRecord], options: Options, started: Date, commit: String, elapsed: Duration, workspace: URL) -> String {
        let failed = records.contains(where: \.failed)
        let all = records.reduce(into: Findings()) { $0.merge($1.findings) }
        let kills = records.filter { $0.phase == .fast || $0.phase == .durable }.reduce(0) { $0 + $1.kills }
        let powerLosses = records.first { $0.phase == .powerLoss }?.kills ?? 0
        let operations = records.filter { $0.phase != .fuzz }.reduce(0) { $0 + $1.operations }
        let keysChecked = records.filter { $0.phase != .fuzz }.reduce(0) { $0 + $1.findings.keysChecked }
        let fuzzInputs = records.first { $0.phase == .fuzz }?.operations ?? 0
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")

        var lines: [String] = []
        lines.append("# Larder long reliability run")
        lines.append("")
        lines.append("**\(failed ? "FAILED: \(all.violations.count) invariant violations" : "Every invariant held.")**")
        lines.append("")
        lines.append("| | |")
        lines.append("|---|---|")
        lines.append("| Date (start, UTC) | \(formatter.string(from: started)) |")
        lines.append("| Commit | \(commit) |")
        lines.append("| Command | `\(commandLine())` |")
        lines.append("| Build | \(isRelease ? "release" : "debug") |")
        lines.append("| Run time | \(clock(elapsed)) |")
        lines.append("| Machine | \(machine()) |")
        lines.append("| Stores | in a fresh directory on \(shell("df", "--output=fstype", workspace.path).split(separator: "\n").last.map(String.init) ?? "?") (real files, real fsync) |")
        lines.append("")
        lines.append("## Invariants")
        lines.append("")
        lines.append("| figure | value | must be |")
        lines.append("|---|---:|---|")
        let killPhases = [Phase.fast, .durable].filter { options.phases.contains($0.rawValue) }.count
        lines.append("| SIGKILLs survived (fast + durable) | \(kills) | \(killPhases * options.kills) |")
        lines.append("| simulated power losses survived | \(powerLosses) | \(options.phases.contains(Phase.powerLoss.rawValue) ? "\(options.powerLossRounds)" : "—") |")
        lines.append("| operations completed (helpers' logged writes and removes, load operations, two-process helper operations, corruption reads) | \(operations) | |")
        lines.append("| keys checked against what they must hold | \(keysChecked) | |")
        lines.append("| fuzzed inputs (libFuzzer, AddressSanitizer) | \(fuzzInputs) | |")
        lines.append("| **wrong bytes** (damaged, truncated, foreign or never-written values returned) | **\(all.count(.wrongBytes))** | 0 |")
        lines.append("| **lost completed durable writes** | **\(all.count(.lostWrite))** | 0 |")
        lines.append("| unexpected keys | \(all.count(.unexpectedKey)) | 0 |")
        lines.append("| totals differing from a recount, or over the limits | \(all.count(.totals)) | 0 |")
        lines.append("| store broken (failed to open, stopped working, threw, deadlock, fuzzer crash) | \(all.count(.broken)) | 0 |")
        lines.append("| helper failures (exited before its kill, failed its checks) | \(all.count(.helper)) | 0 |")
        lines.append("")
        lines.append("## Phases")
        lines.append("")
        lines.append("| phase | parameters | result | time | figures |")
        lines.append("|---|---|---|---:|---|")
        for record in records {
            lines.append("| \(record.phase.rawValue) | \(record.parameters) | \(record.failed ? "FAILED (\(record.findings.violations.count))" : "ok") | \(clock(record.elapsed)) | \(record.details) |")
        }
        lines.append("")
        lines.append("What each phase does (the same code as the CI suites in `Tests/LarderTests/Reliability`, from `Tests/LarderTestSupport/Reliability`):")
        lines.append("")
        lines.append("- **fast / durable**: a `LarderCrashHelper` process writes, overwrites and removes 40 keys (inline rows and gzip blobs) and logs each operation with fsync before and after; it is SIGKILLed 100–600 ms after it starts; the directory is reopened and every key must hold its last completed write, the write in flight, or (fast mode, with a count limit that evicts) a miss — never other bytes; totals must equal a recount, and the store must still take writes. `durable` has no count limit: every completed write must read back exactly.")
        lines.append("- **power-loss**: as `fast`, then after each kill the WAL's unsynced tail is cut, the shared-memory index deleted and recently written blobs zeroed or truncated; reads must return intact bytes of some write of that key, or a miss.")
        lines.append("- **corruption**: index, WAL, blob and temporary file × truncate, zero a page, flip bytes, delete, replace with a directory, in fresh crash images of a live store (one image per seed for the seeded damages); exact bytes or a miss for every key, and the store keeps working.")
        lines.append("- **load**: 8 threads of mixed reads, writes, removes and limit checks on one `Storage` (memory + disk) with limits small enough that both tiers evict constantly; a watchdog reports a deadlock; afterwards every value in both tiers is intact and the totals equal a recount.")
        lines.append("- **two-process**: two helper processes and this one on one directory: disjoint keys, the same keys with removes, eviction across processes, and two processes creating a new directory at once.")
        lines.append("- **fuzz**: `Fuzz/run` — libFuzzer with AddressSanitizer on `ImageFormat.detect` and `ImageHeader.parse`.")
        if !all.isEmpty {
            lines.append("")
            lines.append("## Violations (first 100)")
            lines.append("")
            for violation in all.violations.prefix(100) { lines.append("- \(violation)") }
        }
        lines.append("")
        return lines.joined(separator: "\n")
    }

    static var isRelease: Bool {
        #if DEBUG
        false
        #else
        true
        #endif
    }

    static func commandLine() -> String {
        let arguments = CommandLine.arguments.dropFirst().joined(separator: " ")
        // As run: Tests/long-run/run and `swift run -c release larder-torture` both end here.
        return "larder-torture" + (arguments.isEmpty ? " (defaults)" : " " + arguments)
    }

    static func machine() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces) ?? "?" } ?? "?"
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let kibibytes = meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        let load = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
        let kernel = ((try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
        let swift = shell("swift", "--version").split(separator: "\n").first.map(String.init) ?? "?"
        return "\(ProcessInfo.processInfo.activeProcessorCount) CPUs (nproc), \(model), \(String(format: "%.1f", Double(kibibytes) / 1_048_576)) GiB memory, Linux \(kernel), \(swift); load average at the end \(load) (a machine shared with other builds)"
    }

    /// The trimmed standard output of a short command, or "?" when it fails.
    static func shell(_ arguments: String...) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "?" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
