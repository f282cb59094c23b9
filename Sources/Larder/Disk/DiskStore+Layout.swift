public import Foundation

extension DiskStore {
    /// The index file's name inside a store's directory; the only place the layout is named
    /// outside the store's own opening code.
    static let indexFileName = "index.sqlite"

    /// Whether `directory` holds a disk store, without opening or creating anything.
    ///
    /// Tools use it to refuse a directory that is not a cache before opening one there.
    public static func isStore(at directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent(indexFileName).path)
    }

    /// Bytes the index and its write-ahead log take on disk now (blob files not included).
    public var indexFileSize: Int {
        ["", "-wal"].reduce(0) { total, suffix in
            let path = directory.appendingPathComponent(Self.indexFileName + suffix).path
            return total + (((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0)
        }
    }
}
