import Foundation
import LarderTestSupport
#if canImport(Glibc)
import Glibc
#endif

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

    /// Runs `larder arguments…` (or `executable`), feeding `input` on standard input (the null device when `nil`),
    /// with exactly `environment`, and waits for it to exit.
    ///
    /// Spawned with `posix_spawn` and reaped with `waitpid`, not with Foundation's `Process`:
    /// `Process` learns of an exit through a socket pair whose child end it leaves open across
    /// `exec`, so a child another test spawned at the same moment (the crash rounds run helpers
    /// for minutes) could inherit that end, and `waitUntilExit()` would then wait for that other
    /// child to exit too. `waitpid` sees this child's exit and nothing else. The child's standard input,
    /// output and error are files (a pipe's reader would have the same problem with inherited
    /// write ends), and it inherits no other descriptor of this process.
    static func run(
        _ arguments: [String], input: Data? = nil, environment: [String: String], executable: String? = nil
    ) throws -> Result {
        let executable = try executable ?? executableURL.path
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("larder-process-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let inputPath = scratch.appendingPathComponent("stdin").path
        let outputPath = scratch.appendingPathComponent("stdout").path
        let errorPath = scratch.appendingPathComponent("stderr").path
        if let input { try input.write(to: URL(fileURLWithPath: inputPath)) }

        var descriptors: [Int32] = []
        defer { for descriptor in descriptors { close(descriptor) } }
        for (path, flags) in [(input == nil ? "/dev/null" : inputPath, O_RDONLY),
                              (outputPath, O_WRONLY | O_CREAT | O_TRUNC), (errorPath, O_WRONLY | O_CREAT | O_TRUNC)] {
            let descriptor = open(path, flags | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            descriptors.append(descriptor)
        }

        let pid = try spawnChild(executable, arguments: arguments, environment: environment, standardStreams: descriptors)

        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .ECHILD) }
        }
        let (reason, code) = waitStatusTermination(status)
        return Result(
            status: code, reason: reason,
            standardOutput: try Data(contentsOf: URL(fileURLWithPath: outputPath)),
            standardError: try Data(contentsOf: URL(fileURLWithPath: errorPath)))
    }
}
