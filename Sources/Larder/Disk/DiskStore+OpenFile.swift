public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Large values handed out as open files, for streaming (an HTTP response body) without
// copying them into memory.
extension DiskStore {
    /// A stored value as an open, verified, read-only file positioned at its start.
    ///
    /// The file stays readable, with the same bytes, for as long as the handle is held — even if
    /// the entry is overwritten, removed or evicted meanwhile (blob files are never changed in
    /// place: a removal unlinks the name, and an open descriptor keeps the bytes).
    public struct OpenedValue: Sendable {
        /// The open file; it closes when the last copy of this value is released.
        public let fileHandle: FileHandle
        /// The value's size in bytes.
        public let size: Int
        /// When the entry expires, or `nil` if it never does.
        public let expirationDate: Date?
        /// The metadata stored with the value.
        public let metadata: Data?
    }

    /// The value for `key` as an open file, or `nil` on a miss (no entry, expired, or damaged:
    /// a damaged entry is removed, as on any read).
    ///
    /// A value stored raw in a blob file is handed out as that file: its checksum is computed
    /// over the file in 1 MiB reads (no copy of the value is kept in memory) before the handle
    /// is returned. A value stored inline or compressed is decoded, checked and written to an
    /// unnamed temporary file in the store's `tmp/`.
    ///
    /// Counts as a read for least-recently-used order, like ``value(forKey:)``.
    public func openValue(forKey key: String) throws -> OpenedValue? {
        for _ in 0..<3 {
            guard let location = try withReader({ try $0.location(forKey: key) }) else {
                record(.miss)
                return nil
            }
            let now = configuration.now().milliseconds
            if let expires = location.expires, expires <= now {
                // A renewal this process logged may keep it alive: then it is read again.
                guard try removeExpiredEntry(key: key, location: location) else { continue }
                record(.miss)
                return nil
            }
            if let handle = try openVerified(location, key: key) {
                let renewed = location.renewedExpiry(at: now)
                recordHit(rowID: location.rowID, now: now, renewing: renewed)
                return OpenedValue(
                    fileHandle: handle, size: location.originalSize,
                    expirationDate: (renewed ?? location.expires).map(Date.init(milliseconds:)), metadata: location.metadata)
            }
            if try drop(key: key, location: location) {
                record(.miss)
                return nil
            }
        }
        record(.miss)
        return nil
    }

    /// An open file with the checked, decoded value behind `location`, or `nil` when its bytes
    /// are damaged.
    private func openVerified(_ location: DiskIndex.Location, key: String) throws -> FileHandle? {
        if let file = location.file, location.crcKind == 1, location.encodingCode == Int64(Encoding.raw.rawValue),
           location.size == location.originalSize {
            return try openVerifiedBlob(file, location: location, key: key)
        }
        guard let data = try decode(location, key: key) else { return nil }
        return try temporaryFile(holding: data)
    }

    /// Opens the blob and checks its CRC-32C (over the key, then the bytes) by reading it
    /// through once; returns it positioned at its start, or `nil` when it is missing or damaged.
    private func openVerifiedBlob(_ file: String, location: DiskIndex.Location, key: String) throws -> FileHandle? {
        guard BlobFiles.isValidName(file) else { return nil }
        let path = files.path(of: file)
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else {
            if [ENOENT, ENOTDIR, EISDIR, ELOOP, ENXIO].contains(errno) { return nil }
            throw BlobFiles.ioError("opening blob", path)
        }
        var keepOpen = false
        defer { if !keepOpen { Glibc.close(descriptor) } }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw BlobFiles.ioError("inspecting blob", path) }
        guard (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) == location.size else { return nil }

        var key = key
        var crc = key.withUTF8 { CRC32C.checksum(UnsafeRawBufferPointer($0)) }
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < location.size {
            let count = pread(descriptor, buffer.baseAddress, min(chunk, location.size - offset), off_t(offset))
            if count < 0 {
                if errno == EINTR { continue }
                throw BlobFiles.ioError("reading blob", path)
            }
            if count == 0 { return nil }
            crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[..<count]), continuing: crc)
            offset += count
        }
        guard crc == location.crc else { return nil }
        keepOpen = true
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    /// An unnamed file in `tmp/` holding `data`, positioned at its start: created, then
    /// unlinked at once, so it goes away when its handle closes.
    private func temporaryFile(holding data: Data) throws -> FileHandle {
        let path = files.tmpPath + "/open-" + String(UInt64.random(in: 0 ... .max), radix: 16)
        var descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0, errno == ENOENT {
            try files.createDirectories()
            descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        }
        guard descriptor >= 0 else { throw BlobFiles.ioError("creating temporary file", path) }
        unlink(path)
        do {
            try BlobFiles.writeAll(data, to: descriptor, path: path)
            guard lseek(descriptor, 0, SEEK_SET) == 0 else { throw BlobFiles.ioError("rewinding temporary file", path) }
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }
}
