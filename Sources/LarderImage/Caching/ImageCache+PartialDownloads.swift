import Foundation

/// Where the cache keeps the bytes of interrupted downloads, so that the fetcher resumes them
/// (``HTTPImageFetcher/fetch(_:headers:priority:partialDownloadFile:progress:)``).
///
/// One file per original, in `partial-downloads/` inside the disk tier's directory (a
/// memory-only cache keeps none), named by a hash of the key's canonical string; the file
/// itself names the URL it belongs to, so a hash collision only loses a resumption. The fetcher
/// removes a file when its download completes or fails for good; the cache removes it with the
/// image (``removeImage(source:)``, ``removeAll(tiers:)`` of the disk), and keeps at most
/// ``partialDownloadCountLimit`` files and ``partialDownloadSizeLimit`` bytes, the least
/// recently written going first.
extension ImageCache {
    /// The most interrupted downloads kept at once.
    static let partialDownloadCountLimit = 16

    /// The directory of the kept downloads, or `nil` without a disk tier.
    var partialDownloadsDirectory: URL? {
        configuration.directory?.appendingPathComponent("partial-downloads", isDirectory: true)
    }

    /// The file for `key`'s original, or `nil` without a disk tier.
    func partialDownloadFile(for key: ImageKey) -> URL? {
        // FNV-1a, 64 bits: stable across launches, unlike `Hasher`.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.original.canonicalString.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        let name = String(hash, radix: 16)
        return partialDownloadsDirectory?.appendingPathComponent(String(repeating: "0", count: 16 - name.count) + name)
    }

    /// Removes the kept download of `key`'s original, if any.
    func removePartialDownload(for key: ImageKey) {
        guard let file = partialDownloadFile(for: key) else { return }
        try? FileManager.default.removeItem(at: file)
    }

    /// Removes every kept download.
    func removeAllPartialDownloads() {
        guard let directory = partialDownloadsDirectory else { return }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The most bytes the kept downloads hold together.
    static let partialDownloadSizeLimit = 64 * 1024 * 1024

    /// Removes the least recently written kept downloads until at most
    /// ``partialDownloadCountLimit`` files and ``partialDownloadSizeLimit`` bytes are left.
    func trimPartialDownloads() {
        let keys: Set<URLResourceKey> = [.contentModificationDateKey, .fileSizeKey]
        guard let directory = partialDownloadsDirectory,
              let files = try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: Array(keys))
        else { return }
        var kept = files.map { file in
            let values = try? file.resourceValues(forKeys: keys)
            return (file: file, date: values?.contentModificationDate ?? .distantPast, size: values?.fileSize ?? 0)
        }.sorted { $0.date > $1.date }
        var total = kept.reduce(0) { $0 + $1.size }
        while let oldest = kept.last, kept.count > Self.partialDownloadCountLimit || total > Self.partialDownloadSizeLimit {
            try? FileManager.default.removeItem(at: oldest.file)
            total -= oldest.size
            kept.removeLast()
        }
    }
}
