#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation

// What the store's directory takes on disk, and how `sizeLimit` bounds it.
extension DiskStore {
    /// The room on disk the directory takes beyond ``Configuration/sizeLimit`` at most, at rest
    /// (between calls): the index's own pages (its schema), the write-ahead log's smallest
    /// bound, SQLite's shared-memory file and the directories. A value being written adds its
    /// own size until its write returns.
    public static let footprintSlack = 256 << 10

    /// The bytes the directory takes on disk now: the index, its write-ahead log and
    /// shared-memory files as allocated, each blob file's blocks, and the directories' blocks
    /// (with the shard directories of blobs written by earlier versions).
    ///
    /// `sizeLimit` bounds this, within ``footprintSlack``: the store charges each entry what it
    /// costs on disk (an inline value about twice its bytes, a blob file its whole blocks), scales
    /// the write-ahead log's bound with the limit (1/16 of it, 64 KiB to 4 MiB), and gives the
    /// index's free pages back to the file system after evictions.
    ///
    /// - Complexity: O(*n*) in the number of entries (one pass over the index rows).
    public var footprint: Int {
        get throws {
            var total = 0
            for suffix in ["", "-wal", "-shm"] { total += Self.allocatedSize(of: indexPath + suffix) }
            for directory in [directory.path, files.root.appendingPathComponent("blobs").path, files.root.appendingPathComponent("tmp").path] {
                total += Self.allocatedSize(of: directory)
            }
            total += try withReader { reader in
                try reader.connection.statement("""
                    SELECT coalesce(sum((size + 4095) / 4096 * 4096), 0),
                        count(DISTINCT CASE WHEN substr(file, 3, 1) = '/' THEN substr(file, 1, 2) END)
                    FROM entries WHERE file IS NOT NULL
                    """).withReset { statement -> Int in
                    guard try statement.step() else { return 0 }
                    return Int(statement.int64(0)) + Int(statement.int64(1)) * 4096
                }
            }
            return total
        }
    }

    /// The bytes the file system allocated for `path` (0 when it does not exist).
    static func allocatedSize(of path: String) -> Int {
        var status = stat()
        guard lstat(path, &status) == 0 else { return 0 }
        return Int(status.st_blocks) * 512
    }
}
