import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Shared checks for the reliability suites: the five promises, stated once.
enum Reliability {
    /// A quiet configuration (no log output) edited by `configure`.
    static func configuration(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) -> DiskStore.Configuration {
        var configuration = DiskStore.Configuration()
        configuration.logHandler = nil
        configure(&configuration)
        return configuration
    }

    /// An integer from the environment, for the suites' "more behind an env var" sizes.
    static func environment(_ name: String, default fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }

    /// Promise 5 and index consistency: totals equal a recount of the live entries, and are
    /// within the configured limits. Returns the live keys.
    @discardableResult
    static func expectTotalsExact(_ store: DiskStore, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        let keys = try store.keys()
        var size = 0
        for key in keys { size += try store.attributes(forKey: key)?.size ?? 0 }
        #expect(store.totalCount == keys.count, "\(context): totalCount \(store.totalCount), recount \(keys.count)",
                sourceLocation: sourceLocation)
        #expect(store.totalSize == size, "\(context): totalSize \(store.totalSize), recount \(size)",
                sourceLocation: sourceLocation)
        #expect(keys.count <= store.configuration.countLimit && size <= store.configuration.sizeLimit,
                "\(context): \(keys.count) entries / \(size) bytes exceed the limits", sourceLocation: sourceLocation)
        return keys
    }

    /// Promise 3: the store still takes a write, returns it exactly and removes it.
    static func expectStillWorks(_ store: DiskStore, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for (key, size) in [("probe-inline", 10), ("probe-file", 40_000)] {
            let value = CrashPayload.make(key: key, generation: 1, size: size)
            do {
                try store.setValue(value, forKey: key)
                #expect(try store.value(forKey: key) == value, "\(context): probe \(key) did not read back",
                        sourceLocation: sourceLocation)
                #expect(try store.removeValue(forKey: key), sourceLocation: sourceLocation)
            } catch {
                Issue.record("\(context): the store stopped working: \(error)", sourceLocation: sourceLocation)
            }
        }
    }

    /// Every file and directory under `root` (not following symbolic links), with its mode.
    static func tree(_ root: URL) -> [(path: String, isDirectory: Bool, mode: Int)] {
        var result: [(String, Bool, Int)] = []
        func walk(_ path: String) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                let child = path + "/" + name
                var info = stat()
                guard lstat(child, &info) == 0 else { continue }
                let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
                result.append((child, isDirectory, Int(info.st_mode & 0o7777)))
                if isDirectory { walk(child) }
            }
        }
        walk(root.path)
        return result
    }

    /// Promise 4 on the file system: everything under `root` is a regular file (0600) or a
    /// directory (0700); symbolic links or other kinds would be reported.
    static func expectOwnerOnly(_ root: URL, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for entry in tree(root) {
            var info = stat()
            lstat(entry.path, &info)
            let kind = info.st_mode & S_IFMT
            #expect(kind == S_IFREG || kind == S_IFDIR, "\(context): \(entry.path) is neither a file nor a directory",
                    sourceLocation: sourceLocation)
            let expected = entry.isDirectory ? 0o700 : 0o600
            #expect(entry.mode == expected, "\(context): \(entry.path) has mode \(String(entry.mode, radix: 8))",
                    sourceLocation: sourceLocation)
        }
    }
}
