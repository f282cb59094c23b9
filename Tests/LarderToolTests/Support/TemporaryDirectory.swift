import Foundation

/// A fresh directory under the system temporary folder, deleted when the value is released.
final class TemporaryDirectory: Sendable {
    let url: URL

    init(_ label: String = "larder") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
