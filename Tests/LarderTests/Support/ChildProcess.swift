import Foundation

/// What the orphan tests observe from outside: the children of this process, found in /proc,
/// and whether a process still exists.
enum ProcessTable {
    /// The process ids whose parent is this process and whose command line contains `marker`.
    static func children(containing marker: String) -> [Int32] {
        let me = getpid()
        var result: [Int32] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(name),
                  let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // After "comm)": state, ppid, …
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, Int32(fields[1]) == me,
                  let cmdline = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { continue }
            if String(decoding: cmdline.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self).contains(marker) { result.append(pid) }
        }
        return result
    }

    /// Polls `condition` every 10 ms until it holds or `timeout` passes; returns whether it held.
    static func poll(timeout: Duration, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// `true` once `pid` has been reaped: `kill(pid, 0)` fails with ESRCH.
    static func isReaped(_ pid: Int32) -> Bool {
        kill(pid, 0) == -1 && errno == ESRCH
    }

    /// The target of one of a process's file descriptors ("pipe:[123]", "/dev/null", …).
    static func descriptor(_ fd: Int32, of pid: Int32) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")
    }

    /// Every descriptor target this process holds.
    static func ownDescriptors() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(names.compactMap { Int32($0) }.compactMap { descriptor($0, of: getpid()) })
    }

    /// Whether the log has at least `count` completed operations.
    static func logHasCompleted(_ log: URL, atLeast count: Int) -> Bool {
        guard let data = FileManager.default.contents(atPath: log.path) else { return false }
        return String(decoding: data, as: UTF8.self).components(separatedBy: "\ndone ").count - 1 >= count
    }
}
