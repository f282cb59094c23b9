import ArgumentParser
import Foundation
import Larder

/// `larder rm KEY`: removes one entry.
struct RemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove the entry stored under a key.",
        discussion: "Exits with status 1 when there is no such entry, unless --force is given.")

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The key.")
    var key: String

    @Flag(name: [.short, .long], help: "Succeed even when there is no such entry.")
    var force = false

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        let existed = try store.containsValue(forKey: key)
        // An expired row is not an entry a reader can see, but it is still removed.
        try store.removeValue(forKey: key)
        if !existed && !force {
            throw ToolError("no entry for key \(quotedKey(key))")
        }
    }
}
