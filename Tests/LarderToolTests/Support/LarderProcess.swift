import Foundation
import Synchronization

/// Runs the `larder` executable that SwiftPM builds next to the test bundle, as a user would:
/// arguments, environment, and pipes for standard input, output and error.
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
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        let inputPipe = input.map { _ in Pipe() }
        process.standardInput = inputPipe ?? FileHandle.nullDevice
        // Children that other tests start meanwhile (the crash rounds run for minutes) must not
        // inherit these pipes' ends: one holding the write end of `errorPipe` would keep the
        // reads below from seeing end-of-file until it exits. This child gets its ends by
        // `dup2`, which clears the flag.
        for pipe in [outputPipe, errorPipe] + (inputPipe.map { [$0] } ?? []) {
            for handle in [pipe.fileHandleForReading, pipe.fileHandleForWriting] {
                _ = fcntl(handle.fileDescriptor, F_SETFD, FD_CLOEXEC)
            }
        }
        try process.run()

        // Feed and drain the pipes concurrently, so no side blocks on a full pipe buffer.
        let group = DispatchGroup()
        if let input, let writer = inputPipe?.fileHandleForWriting {
            DispatchQueue.global().async(group: group) {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
        let collected = Mutex(Data())
        let outputReader = outputPipe.fileHandleForReading
        DispatchQueue.global().async(group: group) {
            let data = outputReader.readDataToEndOfFile()
            collected.withLock { $0 = data }
        }
        let errors = errorPipe.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, reason: process.terminationReason,
            standardOutput: collected.withLock { $0 }, standardError: errors)
    }
}
