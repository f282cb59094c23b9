import ArgumentParser
import Foundation
import Larder

/// `larder set KEY [FILE]`: stores a file, or standard input, under a key.
struct SetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Store a file, or standard input, under a key.",
        discussion: "Creates the cache directory when it does not exist. Prints nothing on success.")

    @OptionGroup var cache: CacheOptions
    @OptionGroup var write: WriteOptions

    @Argument(help: "The key (any string).")
    var key: String

    @Argument(help: "The file to store; standard input when omitted.", completion: .file())
    var file: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Expire the entry after this many seconds.", valueName: "seconds"))
    var ttl: Double?

    func validate() throws {
        if let ttl, !(ttl.isFinite && ttl > 0) {
            throw ValidationError("--ttl must be a positive number of seconds, not \(ttl)")
        }
    }

    func run() throws {
        // Read the value before touching the cache, so an unreadable file changes nothing.
        let data: Data
        if let file {
            data = try readFile(file)
        } else {
            if isatty(STDIN_FILENO) == 1 {
                printError("larder: reading the value from standard input (end it with Ctrl-D)")
            }
            data = try readStandardInput()
        }
        let store = try cache.openStore(.create) { write.apply(to: &$0) }
        defer { store.close() }
        try store.setValue(data, forKey: key, expiry: ttl.map(Expiry.seconds))
    }
}
