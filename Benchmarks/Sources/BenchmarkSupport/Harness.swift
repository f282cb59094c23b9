import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `key=value` command-line arguments, as `compare.sh` passes them to every contender.
public struct Arguments: Sendable {
    public let values: [String: String]
    public let flags: Set<String>

    public init(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        var values: [String: String] = [:]
        var flags: Set<String> = []
        for argument in arguments {
            if let eq = argument.firstIndex(of: "=") {
                values[String(argument[..<eq])] = String(argument[argument.index(after: eq)...])
            } else {
                flags.insert(argument)
            }
        }
        self.values = values
        self.flags = flags
    }

    public func int(_ key: String, default value: Int) -> Int { values[key].flatMap(Int.init) ?? value }
    public func string(_ key: String, default value: String) -> String { values[key] ?? value }
    public func has(_ flag: String) -> Bool { flags.contains(flag) }
}

/// Monotonic seconds (`clock_gettime(CLOCK_MONOTONIC)`, as baseline.c).
@inlinable
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// Runs `body` once and returns the wall-clock seconds it took.
@inlinable
public func measure(_ body: () throws -> Void) rethrows -> Double {
    let start = monotonicSeconds()
    try body()
    return monotonicSeconds() - start
}

/// Times two contenders over the same `count` items, `passes` times, and returns each one's
/// seconds: with `chunks` > 0 each pass is cut into that many chunks, each read by one contender
/// and then the other (which goes first alternates), so that both meet the same moods of a
/// shared host; with `chunks` 0, contender 0 does all its passes, then contender 1.
public func measureInTurns(
    count: Int, chunks: Int, passes: Int = 1, _ body: (_ contender: Int, _ items: Range<Int>) throws -> Void
) rethrows -> [Double] {
    var seconds = [0.0, 0.0]
    guard chunks > 0 else {
        for contender in 0..<2 {
            for _ in 0..<passes { seconds[contender] += try measure { try body(contender, 0..<count) } }
        }
        return seconds
    }
    var turn = 0
    for _ in 0..<passes {
        for chunk in 0..<chunks {
            let items = (chunk * count / chunks)..<((chunk + 1) * count / chunks)
            for contender in [turn % 2, 1 - turn % 2] { seconds[contender] += try measure { try body(contender, items) } }
            turn += 1
        }
    }
    return seconds
}

/// CPU time this process has used so far (user and system, every thread), in seconds.
public func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Keeps the optimizer from dropping a result.
@inline(never)
public func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Prints one machine-readable result line: `case<TAB>contender<TAB>value<TAB>unit`.
public func report(_ name: String, _ contender: String, value: Double, unit: String) {
    print("\(name)\t\(contender)\t\(String(format: "%.1f", value))\t\(unit)")
    fflush(nil)
}

/// Prints `ops / seconds` as an `ops/s` result line.
public func report(_ name: String, _ contender: String, ops: Int, seconds: Double) {
    report(name, contender, value: Double(ops) / seconds, unit: "ops/s")
}

/// Exits with a message on standard error.
public func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(1)
}

/// A fresh directory under the system temporary folder.
public func makeTemporaryDirectory(_ label: String) -> URL {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("larder-bench-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    try? FileManager.default.removeItem(at: url)
    do {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    } catch {
        fail("cannot create \(url.path): \(error)")
    }
    return url
}

/// Resident set size of this process in bytes, from `/proc/self/statm` (second field × page size).
public func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Median of a non-empty array.
public func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
