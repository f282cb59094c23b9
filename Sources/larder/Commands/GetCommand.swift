import ArgumentParser
import Foundation
import Larder

/// `larder get KEY`: writes the value's bytes to standard output.
struct GetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write the value stored under a key to standard output.",
        discussion: "Exits with status 1, and a message on standard error, when there is no live entry.")

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The key.")
    var key: String

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        guard let data = try store.value(forKey: key) else {
            throw ToolError("no entry for key \(quotedKey(key))")
        }
        try writeStandardOutput(data)
    }
}
