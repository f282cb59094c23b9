import ArgumentParser
import Foundation
import Larder

/// `--directory`, which every cache command takes.
struct CacheOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The cache directory.",
            discussion: "Defaults to $LARDER_DIRECTORY, else $XDG_CACHE_HOME/larder, else ~/.cache/larder.",
            valueName: "dir"))
    var directory: String?

    /// The directory the command works on: `--directory`, else the environment's default.
    var url: URL {
        if let directory { return URL(fileURLWithPath: directory).standardizedFileURL }
        return Self.defaultDirectory(environment: ProcessInfo.processInfo.environment)
    }

    /// `$LARDER_DIRECTORY`, else `$XDG_CACHE_HOME/larder` (when absolute, as the XDG spec asks),
    /// else `~/.cache/larder`.
    static func defaultDirectory(environment: [String: String]) -> URL {
        if let path = environment["LARDER_DIRECTORY"], !path.isEmpty {
            return URL(fileURLWithPath: path).standardizedFileURL
        }
        if let path = environment["XDG_CACHE_HOME"], path.hasPrefix("/") {
            return URL(fileURLWithPath: path).appendingPathComponent("larder").standardizedFileURL
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.path
        return URL(fileURLWithPath: home).appendingPathComponent(".cache/larder").standardizedFileURL
    }

    /// Opens the cache in ``url``.
    ///
    /// - Parameters:
    ///   - mode: `.existing` for commands that read or prune a cache: a missing directory, or
    ///     one without an index, is an error and nothing is created. `.create` (for writes)
    ///     creates the directory, but refuses a non-empty directory that is not a cache.
    ///   - configure: Edits the store's configuration (hashing, compression…).
    func openStore(_ mode: OpenMode, configure: (inout DiskStore.Configuration) -> Void = { _ in }) throws -> DiskStore {
        let directory = url
        let path = directory.path
        switch fileKind(path) {
        case .missing:
            guard mode == .create else {
                throw ToolError("no cache at \(path) (the directory does not exist)")
            }
            try makeDirectories(path)
        case .directory:
            if !DiskStore.isStore(at: directory) {
                if mode == .existing {
                    throw ToolError("\(path) is not a larder cache (it has no index)")
                }
                let contents = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                guard contents.isEmpty else {
                    throw ToolError("\(path) is not empty and not a larder cache; refusing to create one there")
                }
            }
        case .other:
            throw ToolError("\(path) is not a directory")
        }
        guard access(path, R_OK | X_OK) == 0 else {
            throw ToolError("cannot read \(path): \(systemError())")
        }

        var configuration = DiskStore.Configuration()
        // The tool never evicts on its own: limits belong to the application that owns the
        // cache, and `larder trim` applies them on request.
        configuration.sizeLimit = .max
        configuration.countLimit = .max
        configuration.logHandler = { message in printError("larder: warning: \(message)") }
        configure(&configuration)
        return try DiskStore(directory: directory, configuration: configuration)
    }

    enum OpenMode {
        case existing
        case create
    }
}

/// `--hash` and `--gzip`, for commands that write entries.
struct WriteOptions: ParsableArguments {
    @Option(help: "The digest that names blob files: md5, sha1 or sha256.")
    var hash: HashName = .sha1

    @Flag(help: "Gzip values that shrink (zlib level 6); others are stored raw.")
    var gzip = false

    func apply(to configuration: inout DiskStore.Configuration) {
        configuration.keyHashing = hash.keyHashing
        configuration.compression = gzip ? .gzip(level: 6) : .none
    }
}

/// The names `--hash` accepts.
enum HashName: String, CaseIterable, ExpressibleByArgument {
    case md5
    case sha1
    case sha256

    var keyHashing: KeyHashing {
        switch self {
        case .md5: return .md5
        case .sha1: return .sha1
        case .sha256: return .sha256
        }
    }
}

enum FileKind {
    case missing
    case directory
    case other
}

/// What is at `path`, following symbolic links.
func fileKind(_ path: String) -> FileKind {
    var info = stat()
    guard stat(path, &info) == 0 else { return .missing }
    return (info.st_mode & S_IFMT) == S_IFDIR ? .directory : .other
}

/// `mkdir -p`: the cache directory itself owner-only (0700), missing parents 0755.
func makeDirectories(_ path: String) throws {
    let url = URL(fileURLWithPath: path)
    let parent = url.deletingLastPathComponent().path
    if parent != path, fileKind(parent) == .missing {
        try makeDirectories(parent)
        chmod(parent, 0o755)
    }
    if mkdir(path, 0o700) != 0 && errno != EEXIST {
        throw ToolError("cannot create directory \(path): \(systemError())")
    }
    guard fileKind(path) == .directory else { throw ToolError("\(path) is not a directory") }
}
