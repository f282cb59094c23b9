public import Foundation

/// Finds and starts the `LarderCrashHelper` executable, and reads the log its `write` mode keeps.
public enum CrashHelper {
    /// The helper SwiftPM builds next to the running binary (the test bundle, or
    /// `larder-torture` in the same build directory); `LARDER_CRASH_HELPER` overrides it.
    public static var executableURL: URL {
        get throws {
            if let path = ProcessInfo.processInfo.environment["LARDER_CRASH_HELPER"] {
                return URL(fileURLWithPath: path)
            }
            let binary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
            var directory = binary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("LarderCrashHelper")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "LarderCrashHelper next to \(binary.path)"])
        }
    }

    /// Starts the helper's `write` mode on `directory`, logging to `log`; `options` are the
    /// helper's `name=value` options (seed, durability, prefix, keys, iterations, countLimit,
    /// removeEvery, maxSize, close).
    @discardableResult
    public static func startWriter(
        in scope: ChildProcessScope, directory: URL, log: URL, _ options: [String: String] = [:]
    ) throws -> ChildProcess {
        try start(in: scope, ["write", directory.path, log.path] + options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
    }

    /// Starts the helper with raw arguments.
    @discardableResult
    public static func start(in scope: ChildProcessScope, _ arguments: [String]) throws -> ChildProcess {
        try scope.start(try executableURL, arguments: arguments)
    }

    /// What the helper's log says about each key: the last completed generation (0 for a
    /// remove), the generations begun since then and never logged as done (each may have
    /// landed: a helper killed between the write and its "done" line leaves one, and a later
    /// helper may begin another before any completes), and every generation ever begun.
    public struct LogState: Sendable {
        public var completed: [String: Int] = [:]
        public var inFlight: [String: Set<Int>] = [:]
        public var everBegun: [String: Set<Int>] = [:]
        public var completedWrites = 0

        public init() {}

        /// What a read of `key` may return: the last completed generation or any begun since.
        public func allowed(_ key: String) -> Set<Int> {
            var allowed = inFlight[key] ?? []
            if let completed = completed[key] { allowed.insert(completed) }
            return allowed
        }

        /// Applies the complete lines of `text`.
        public mutating func apply(_ text: Substring) {
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 3, let generation = Int(parts[2]) else { continue } // a torn line
                let key = String(parts[1])
                if parts[0] == "begin" {
                    inFlight[key, default: []].insert(generation)
                    everBegun[key, default: []].insert(generation)
                } else if parts[0] == "done" {
                    completed[key] = generation
                    inFlight[key] = nil
                    completedWrites += 1
                }
            }
        }
    }

    /// Reads a whole log.
    public static func readLog(_ url: URL) throws -> LogState {
        var reader = LogReader(url)
        return try reader.read()
    }

    /// Reads a log that keeps growing (one helper after another appends to it) in steps: each
    /// ``read()`` parses only the complete lines added since the previous one, so a thousand
    /// rounds cost a thousand small reads, not a thousand re-reads of the whole log.
    public struct LogReader: Sendable {
        public let url: URL
        public private(set) var state = LogState()
        private var offset: UInt64 = 0

        public init(_ url: URL) { self.url = url }

        public mutating func read() throws -> LogState {
            // A helper killed before it created the log has logged nothing.
            guard FileManager.default.fileExists(atPath: url.path) else { return state }
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            try handle.seek(toOffset: offset)
            let data = try handle.readToEnd() ?? Data()
            guard let lastNewline = data.lastIndex(of: 0x0A) else { return state }
            let complete = data[data.startIndex...lastNewline]
            state.apply(Substring(String(decoding: complete, as: UTF8.self)))
            offset += UInt64(complete.count)
            return state
        }
    }
}
