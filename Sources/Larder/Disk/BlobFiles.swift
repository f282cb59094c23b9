import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The file side of the disk tier: `blobs/<name>` and `tmp/`, written with plain POSIX calls.
///
/// Every file and directory is created owner-only (0600 / 0700). A blob is first written to
/// `tmp/`, then renamed into place, so a reader never sees a partial file under `blobs/`.
///
/// New blobs sit directly in `blobs/`. Stores written by earlier versions keep theirs in shard
/// directories, `blobs/ab/<digest>-<n>`; those names stay valid, are read and removed as before,
/// and a shard directory goes when its last blob does.
struct BlobFiles: Sendable {
    let root: URL
    let blobsPath: String
    let tmpPath: String
    let durable: Bool

    init(root: URL, durable: Bool) {
        self.root = root
        self.blobsPath = root.appendingPathComponent("blobs", isDirectory: true).path
        self.tmpPath = root.appendingPathComponent("tmp", isDirectory: true).path
        self.durable = durable
    }

    /// The relative name of a new blob for a key digest: `<digest>-<random>`. Each write gets a
    /// fresh name, so an overwrite never changes a file a reader may be holding.
    ///
    /// No shard directory: creating a directory costs as much as creating the file (each is a new
    /// inode and a journal entry), so a store's first writes into 256 shards paid for two
    /// creations each, and every removal tried to remove the shard. Linux file systems index
    /// large directories (ext4's `dir_index`, XFS, btrfs), so one directory of many blobs costs a
    /// lookup no more than a shard does.
    static func makeName(hash: String) -> String {
        "\(hash)-\(String(UInt64.random(in: 0 ... .max), radix: 16))"
    }

    /// The shard directory of a name in the layout of stores written by earlier versions
    /// (`ab/<digest>-<n>`), or `nil` for a name directly in `blobs/`.
    static func legacyShard(of name: String) -> Substring? {
        let bytes = name.utf8
        guard bytes.count > 3, bytes[bytes.index(bytes.startIndex, offsetBy: 2)] == UInt8(ascii: "/") else { return nil }
        return name.prefix(2)
    }

    func path(of name: String) -> String { blobsPath + "/" + name }

    /// Whether `name` has the shape ``makeName(hash:)`` gives, `<hex digest>-<hex>`, or the one
    /// of stores written by earlier versions, `xx/<hex digest>-<hex>` with `xx` the digest's
    /// first two characters. Names come from the index, which a damaged or hostile file can fill
    /// with anything ("../../home/…"); only names of these shapes are ever read or deleted, so
    /// no path outside `blobs/` is touched.
    static func isValidName(_ name: String) -> Bool {
        // One pass over the bytes, no allocation: it runs on every read of a blob.
        var name = name
        return name.withUTF8 { bytes in
            func isHex(_ byte: UInt8) -> Bool {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            }
            guard bytes.count >= 3, bytes.count <= 200 else { return false }
            var start = 0
            if bytes[2] == UInt8(ascii: "/") {
                // A shard of the old layout: it repeats the digest's first two characters.
                guard bytes.count >= 6, bytes[0] == bytes[3], bytes[1] == bytes[4], isHex(bytes[0]), isHex(bytes[1])
                else { return false }
                start = 3
            }
            // Hex, one "-", hex: neither part empty.
            var dashes = 0
            for byte in bytes[start...] where !isHex(byte) {
                guard byte == UInt8(ascii: "-") else { return false }
                dashes += 1
            }
            return dashes == 1 && bytes[start] != UInt8(ascii: "-") && bytes[bytes.count - 1] != UInt8(ascii: "-")
        }
    }

    /// Creates `blobs/` and `tmp/` (owner-only) when missing; returns whether both were created
    /// now (so neither holds a file yet).
    @discardableResult
    func createDirectories() throws -> Bool {
        let createdBlobs = try Self.makeDirectory(blobsPath)
        let createdTmp = try Self.makeDirectory(tmpPath)
        return createdBlobs && createdTmp
    }

    /// Creates the directory at `path` (owner-only) unless one is there; returns whether it
    /// created it.
    @discardableResult
    static func makeDirectory(_ path: String) throws -> Bool {
        if mkdir(path, 0o700) == 0 { return true }  // a new directory: nothing else to check
        if errno != EEXIST { throw ioError("creating directory", path) }
        var info = stat()
        guard stat(path, &info) == 0 else { throw ioError("inspecting directory", path) }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw StorageError.io(operation: "creating directory", path: path, reason: "a file is in the way")
        }
        return false
    }

    /// Writes all of `data` to `descriptor` (retrying short writes and EINTR); `path` names the
    /// file in the error.
    static func writeAll(_ data: Data, to descriptor: Int32, path: String) throws {
        try data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ioError("writing temporary file", path)
                }
                offset += written
            }
        }
    }

    /// Writes `data` to a temporary file and renames it to `blobs/<name>`; `name` comes from
    /// ``makeName(hash:)``.
    func write(_ data: Data, name: String) throws {
        let temporary = tmpPath + "/" + name
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.ioError("creating temporary file", temporary) }
        do {
            try Self.writeAll(data, to: descriptor, path: temporary)
            if durable && fsync(descriptor) != 0 { throw Self.ioError("syncing temporary file", temporary) }
        } catch {
            close(descriptor)
            unlink(temporary)
            throw error
        }
        // Closed exactly once: after a failed close the number may already belong to another
        // file, so a second close could close someone else's descriptor.
        guard close(descriptor) == 0 else {
            let failure = Self.ioError("closing temporary file", temporary)
            unlink(temporary)
            throw failure
        }

        let destination = path(of: name)
        guard rename(temporary, destination) == 0 else {
            let failure = errno
            unlink(temporary)
            throw Self.ioError("moving blob into place", destination, code: failure)
        }
        if durable { try Self.syncDirectory(blobsPath) }
    }

    /// Reads `blobs/<name>`, or returns `nil` when the file is missing or is not a regular file
    /// of `expectedSize` bytes.
    func read(name: String, expectedSize: Int) throws -> Data? {
        guard Self.isValidName(name), expectedSize >= 0 else { return nil }
        let path = path(of: name)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else {
            // Missing, or not a regular file: a directory, a symbolic link (O_NOFOLLOW), a socket.
            if [ENOENT, ENOTDIR, EISDIR, ELOOP, ENXIO].contains(errno) { return nil }
            throw Self.ioError("opening blob", path)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Self.ioError("inspecting blob", path) }
        guard (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) == expectedSize else { return nil }
        guard expectedSize > 0 else { return Data() }
        // Read into uninitialized memory that the Data then owns: no zero-fill of a buffer the
        // read overwrites anyway.
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: expectedSize, alignment: 16)
        var offset = 0
        while offset < expectedSize {
            let count = Glibc.read(descriptor, buffer + offset, expectedSize - offset)
            if count < 0 {
                if errno == EINTR { continue }
                let failure = errno
                buffer.deallocate()
                if failure == EISDIR { return nil }
                throw Self.ioError("reading blob", path, code: failure)
            }
            if count == 0 {
                buffer.deallocate()
                return nil
            }
            offset += count
        }
        return Data(bytesNoCopy: buffer, count: expectedSize, deallocator: .custom { pointer, _ in pointer.deallocate() })
    }

    /// Removes `blobs/<name>`; a missing file is not an error, a name not of the shape
    /// ``isValidName(_:)`` accepts is ignored. A blob of the old layout takes its shard directory
    /// with it when it was the last one there.
    func remove(name: String) {
        guard Self.isValidName(name) else { return }
        guard unlink(path(of: name)) == 0 else { return }
        // Fails (ENOTEMPTY) while the shard holds other blobs: one cheap call.
        if let shard = Self.legacyShard(of: name) { rmdir(blobsPath + "/" + shard) }
    }

    static func syncDirectory(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ioError("opening directory to sync", path) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw ioError("syncing directory", path) }
    }

    static func ioError(_ operation: String, _ path: String, code: Int32 = errno) -> StorageError {
        .io(operation: operation, path: path, errno: code)
    }
}
