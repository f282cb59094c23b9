import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file's device and inode: what a path names, so a file deleted and created again under the
/// same path is told apart from the one that was opened.
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64

    /// The identity of the file at `path`, or `nil` when there is none.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

// The directory deleted while the store is open (a user clearing caches, a tmp cleaner): the
// next operation notices, creates the directory and the index again where a new store on the
// same path finds them, and reports nothing cached.
extension DiskStore {
    /// Opens the index again when `index.sqlite` no longer names the file the store opened (or
    /// an earlier attempt left it to be reopened). Call with the writer's lock held.
    func reopenIfDirectoryChanged(_ state: inout State) throws {
        guard state.index != nil || state.needsReopen else { return }
        if !state.needsReopen, let identity = state.indexIdentity, FileIdentity(path: indexPath) == identity { return }
        if let index = state.index {
            configuration.logHandler?("the cache directory \(directory.path) was deleted or replaced; creating it again")
            replacingIndex {
                index.connection.close()
                state.index = nil
                state.needsReopen = true
            }
        }
        try Self.makeDirectories(directory)
        let directoriesAreNew = try files.createDirectories()
        let (index, _) = try Self.openIndex(
            in: directory, configuration: configuration, directoriesAreNew: directoriesAreNew, writer: writerID)
        state.index = index
        setIndexIdentity(FileIdentity(path: indexPath), in: &state)
        state.needsReopen = false
        state.statistics.directoryRecreations += 1
    }

    /// Records the identity of the index file just opened again, and counts the opening (call
    /// with the writer's lock held).
    func setIndexIdentity(_ identity: FileIdentity?, in state: inout State) {
        state.indexIdentity = identity
        readers.indexOpened(identity)
        indexOpenings.add(1, ordering: .releasing)
    }

    /// Creates `directory` (and its parents) owner-only if it is missing.
    static func makeDirectories(_ directory: URL) throws {
        do {
            try FileManager.default.createDirectory(
                atPath: directory.path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            let reason = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? POSIXError)
                .map { String(cString: strerror($0.code.rawValue)) } ?? "\(error)"
            throw StorageError.io(operation: "creating directory", path: directory.path, reason: reason, cause: error)
        }
        try BlobFiles.makeDirectory(directory.path)
    }
}
