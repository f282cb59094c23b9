import ArgumentParser
import Foundation
import Larder

/// `larder clear`: removes every entry.
struct ClearCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear",
        abstract: "Remove every entry from the cache.",
        discussion: "The directory and its index stay; files of other programs are not touched.")

    @OptionGroup var cache: CacheOptions

    func run() throws {
        let store = try cache.openStore(.existing)
        defer { store.close() }
        let count = store.totalCount
        let size = store.totalSize
        try store.removeAll()
        print("Removed \(formatCount(count)) \(count == 1 ? "entry" : "entries") (\(formatBytes(size))) from \(store.directory.path)")
    }
}
