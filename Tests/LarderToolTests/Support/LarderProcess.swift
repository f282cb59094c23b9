import Foundation

/// Runs the `larder` executable that SwiftPM builds next to the test bundle, as a user would:
/// arguments, environment, and files for standard input, output and error.
enum LarderProcess {
    /// What one run of the tool produced.
    struct Result: CustomStringConvertible {
        var status: Int32
        var reason: Process.TerminationReason
        var standardOutput: Data
        var standardError: Data

        var output: String { String(decoding: standardOutput, as: UTF8.self) }
        var errors: String { String(decoding: standardError, as: UTF8.self) }
        var errorLines: [String] { errors.split(separator: "\n").map(String.init) }

        /// Parses standard output as JSON.
        func json() throws -> Any {
            try JSONSerialization.jsonObject(with: standardOutput)
        }

        var description: String {
            "status \(status) (\(reason == .exit ? "exit" : "signal")); stdout: \(output.prefix(2_000)); stderr: \(errors.prefix(2_000))"
        }
    }

    static var executableURL: URL {
        get throws {
            let testBinary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
            var directory = testBinary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("larder")
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                   FileManager.default.isExecutableFile(atPath: candidate.path) {
                    return candidate
                }
                directory = directory.deletingLastPathComponent()
            }
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "larder next to \(testBinary.path)"])
        }
    }

    /// A child that exits before reading its input must not kill the test process.
    private static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// Runs `larder arguments…`, feeding `input` on standard input (the null device when `nil`).
    static func run(_ arguments: [String], input: Data? = nil, environment: [String: String]) throws -> Result {
        _ = ignoreBrokenPipes
        let process = Process()
        process.executableURL = try executableURL
        process.arguments = arguments
        process.environment = environment
        // Standard input, output and error are files, not pipes: a pipe's reader sees
        // end-of-file only when every write end is closed, and children that other tests start
        // meanwhile (the crash rounds run for minutes) can inherit a write end before it is
        // closed, which stalled this child (waiting for its input) or the reads of its output
        // until they exited. A file ends where it ends.
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("larder-process-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outputURL = scratch.appendingPathComponent("stdout")
        let errorURL = scratch.appendingPathComponent("stderr")
        for url in [outputURL, errorURL] { FileManager.default.createFile(atPath: url.path, contents: nil) }
        let inputHandle: FileHandle
        if let input {
            let inputURL = scratch.appendingPathComponent("stdin")
            try input.write(to: inputURL)
            inputHandle = try FileHandle(forReadingFrom: inputURL)
        } else {
            inputHandle = FileHandle.nullDevice
        }
        let outputHandle = try FileHandle(forWritingTo: outputURL)
        let errorHandle = try FileHandle(forWritingTo: errorURL)
        process.standardInput = inputHandle
        process.standardOutput = outputHandle
        process.standardError = errorHandle
        try process.run()
        process.waitUntilExit()
        for handle in [outputHandle, errorHandle] { try? handle.close() }
        if input != nil { try? inputHandle.close() }
        let output = try Data(contentsOf: outputURL)
        let errors = try Data(contentsOf: errorURL)
        return Result(
            status: process.terminationStatus, reason: process.terminationReason,
            standardOutput: output, standardError: errors)
    }
}
