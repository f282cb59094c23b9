import Foundation
import Testing
@testable import Larder

/// The blob file of `key` in the store at `directory` (the store names files
/// `blobs/<sha1 of key>-<random>`).
func blobFile(forKey key: String, in directory: URL) throws -> URL {
    let digest = KeyHashing.sha1.hexDigest(key)
    let blobs = directory.appendingPathComponent("blobs")
    let name = try #require(try FileManager.default.contentsOfDirectory(atPath: blobs.path)
        .first { $0.hasPrefix(digest + "-") })
    return blobs.appendingPathComponent(name)
}
