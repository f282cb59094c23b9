import ArgumentParser
import Foundation
import Larder

/// `larder`: a command-line tool over a Larder disk cache directory, and the README's demo.
@main
struct LarderTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "Inspect and manage a Larder disk cache, or run the demo.",
        discussion: """
            Cache commands work on --directory, which defaults to $LARDER_DIRECTORY, else \
            $XDG_CACHE_HOME/larder, else ~/.cache/larder. Commands that only read never create \
            a directory.

            Exit status: 0 on success; 1 on an error or a missing key; 2 when `verify` leaves \
            damaged entries; 64 for a usage error.
            """,
        subcommands: [
            DemoCommand.self,
            SetCommand.self,
            GetCommand.self,
            RemoveCommand.self,
            ClearCommand.self,
            StatsCommand.self,
            ListCommand.self,
            TrimCommand.self,
            VerifyCommand.self,
            ImageCommand.self,
        ])

    /// Parses and runs the command; every failure ends as one `larder: error: …` line on
    /// standard error and a non-zero status, never a trap or a stack trace.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            exitReporting(error)
        }
    }

    static func exitReporting(_ error: any Error) -> Never {
        if let exitCode = error as? ExitCode {
            Foundation.exit(exitCode.rawValue)
        }
        if let error = error as? ToolError {
            printError("larder: error: \(oneLine(error.message))")
            Foundation.exit(error.status)
        }
        if error is StorageError || error is CocoaError || error is POSIXError {
            printError("larder: error: \(oneLine(describe(error)))")
            Foundation.exit(1)
        }
        // Argument parsing: help and --version exit cleanly with their text on stdout;
        // usage errors become one line.
        let code = exitCode(for: error)
        if code.isSuccess { exit(withError: error) }
        var message = oneLine(message(for: error))
        if message.hasPrefix("Error: ") { message.removeFirst("Error: ".count) }
        if message.isEmpty { message = oneLine(describe(error)) }
        printError("larder: error: \(message)")
        Foundation.exit(code.rawValue)
    }
}
