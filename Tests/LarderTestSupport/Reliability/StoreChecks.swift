public import Foundation
public import Larder

/// The checks every reliability run makes on a store, stated once, through `DiskStore`'s
/// public API only (the crash helper and `larder-torture` are release builds without
/// `@testable`).
public enum StoreChecks {
    /// A quiet configuration (no log output) edited by `configure`.
    public static func configuration(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) -> DiskStore.Configuration {
        var configuration = DiskStore.Configuration()
        configuration.logHandler = nil
        configure(&configuration)
        return configuration
    }

    /// An integer from the environment, for the suites' "more behind an env var" sizes.
    public static func environment(_ name: String, default fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }

    /// Promise 5 and index consistency: totals equal a recount of the live entries and are
    /// within the configured limits. Returns the live keys.
    @discardableResult
    public static func totalsExact(_ store: DiskStore, _ context: String, into findings: inout Findings) throws -> [String] {
        let keys = try store.keys()
        var size = 0
        for key in keys { size += try store.attributes(forKey: key)?.size ?? 0 }
        findings.check(store.totalCount == keys.count, .totals, "\(context): totalCount \(store.totalCount), recount \(keys.count)")
        findings.check(store.totalSize == size, .totals, "\(context): totalSize \(store.totalSize), recount \(size)")
        findings.check(keys.count <= store.configuration.countLimit && size <= store.configuration.sizeLimit, .totals,
                       "\(context): \(keys.count) entries / \(size) bytes exceed the limits")
        return keys
    }

    /// Promise 3: the store still takes a write, returns it exactly and removes it.
    public static func stillWorks(_ store: DiskStore, _ context: String, into findings: inout Findings) {
        for (key, size) in [("probe-inline", 10), ("probe-file", 40_000)] {
            let value = CrashPayload.make(key: key, generation: 1, size: size)
            do {
                try store.setValue(value, forKey: key)
                findings.check(try store.value(forKey: key) == value, .broken, "\(context): probe \(key) did not read back")
                findings.check(try store.removeValue(forKey: key), .broken, "\(context): probe \(key) was not removed")
            } catch {
                findings.record(.broken, "\(context): the store stopped working: \(error)")
            }
        }
    }

    /// Every file and directory under `root` (not following symbolic links), with its mode.
    public static func tree(_ root: URL) -> [(path: String, isDirectory: Bool, mode: Int)] {
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

    /// The paths of the blob files of the store in `directory`, in either layout (directly in
    /// `blobs/`, or in the shard directories of earlier versions).
    public static func blobFiles(in directory: URL) -> [String] {
        tree(directory.appendingPathComponent("blobs")).filter { !$0.isDirectory }.map(\.path)
    }
}
