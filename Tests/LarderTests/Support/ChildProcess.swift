import Foundation

/// Runs the `LarderCrashHelper` executable that SwiftPM builds next to the test bundle.
enum CrashHelper {
    static var executableURL: URL {
        get throws {
            let testBinary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
            var directory = testBinary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("LarderCrashHelper")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "LarderCrashHelper next to \(testBinary.path)"])
        }
    }

    /// Starts the helper's `write` mode on `directory`, logging to `log`; `options` are the
    /// helper's `name=value` options (seed, durability, prefix, keys, iterations, countLimit,
    /// removeEvery, maxSize, close).
    static func startWriter(directory: URL, log: URL, _ options: [String: String] = [:]) throws -> Process {
        try start(["write", directory.path, log.path] + options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
    }

    /// Starts the helper with raw arguments; standard output goes to `output` when given.
    static func start(_ arguments: [String], output: Pipe? = nil) throws -> Process {
        let process = Process()
        process.executableURL = try executableURL
        process.arguments = arguments
        process.standardOutput = output ?? FileHandle.nullDevice
        try process.run()
        return process
    }

    /// What the helper's log says about each key: the last completed generation (0 for a
    /// remove), the one that was in flight when it died, and every generation ever begun.
    struct LogState {
        var completed: [String: Int] = [:]
        var inFlight: [String: Int] = [:]
        var everBegun: [String: Set<Int>] = [:]
        var completedWrites = 0
    }

    static func readLog(_ url: URL) throws -> LogState {
        var state = LogState()
        let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 3, let generation = Int(parts[2]) else { continue } // a torn last line
            let key = String(parts[1])
            if parts[0] == "begin" {
                state.inFlight[key] = generation
                state.everBegun[key, default: []].insert(generation)
            } else if parts[0] == "done" {
                state.completed[key] = generation
                state.inFlight[key] = nil
                state.completedWrites += 1
            }
        }
        return state
    }
}
