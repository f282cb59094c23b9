import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes of a download that was cut off, kept in a file so that the next attempt asks the
/// server for the rest (`Range: bytes=N-` with `If-Range`) instead of starting over.
///
/// Only a response that can be resumed safely is kept: a `200` (or a `206` that continued a
/// kept download) with a strong `ETag` or a `Last-Modified` date, a known total length, no
/// content coding, and a total no larger than the fetcher's body limit.
///
/// The file holds `LPD1`, the length of a JSON header (4 bytes, big-endian), the header (the
/// request URL, the validators, the total length, the count of bytes kept) and the bytes. A
/// file that does not read back exactly (another URL, a count that does not match, damage) is
/// removed and ignored: the download starts from zero.
struct PartialDownload: Sendable, Equatable {
    struct Header: Codable, Equatable {
        /// The request URL (as ``HTTPImageFetcher/requestURL(for:)`` makes it).
        var url: String
        var entityTag: String?
        var lastModified: String?
        /// The length of the whole body.
        var total: Int64
        /// The bytes kept, from the start of the body.
        var count: Int64
    }

    var header: Header
    var data: Data

    private static let magic = Data("LPD1".utf8)

    /// The validator `If-Range` carries: the strong entity tag, else the modification date.
    var validator: String? {
        if let entityTag = header.entityTag, !entityTag.hasPrefix("W/") { return entityTag }
        return header.lastModified
    }

    /// Sets `Range` and `If-Range`, so that the server sends the rest (`206`) if the image is
    /// unchanged, or the whole new image (`200`) if it changed.
    func addRangeHeaders(to request: inout URLRequest) {
        guard let validator else { return }
        request.setValue("bytes=\(data.count)-", forHTTPHeaderField: "Range")
        request.setValue(validator, forHTTPHeaderField: "If-Range")
    }

    // MARK: - Keeping received bytes

    /// What to keep of a `200` response cut off after `response.data`, or `nil` when it cannot
    /// be resumed (no strong validator, unknown length, a content coding, nothing received).
    static func start(_ response: DownloadedResponse, url: String, maximumSize: Int64) -> PartialDownload? {
        let http = response.response
        guard http.statusCode == 200, isIdentityCoded(http) else { return nil }
        let total = http.expectedContentLength
        guard total > 0, total <= maximumSize, !response.data.isEmpty, Int64(response.data.count) < total else { return nil }
        let header = Header(
            url: url, entityTag: http.value(forHTTPHeaderField: "ETag"),
            lastModified: http.value(forHTTPHeaderField: "Last-Modified"),
            total: total, count: Int64(response.data.count))
        let partial = PartialDownload(header: header, data: response.data)
        return partial.validator == nil ? nil : partial
    }

    /// This download continued by a `206` response: the bytes kept followed by the response's,
    /// or `nil` when the response does not continue them (its `Content-Range` starts elsewhere
    /// or names another total, or its validators differ from the ones kept).
    func continued(by response: DownloadedResponse) -> PartialDownload? {
        let http = response.response
        guard http.statusCode == 206, Self.isIdentityCoded(http) else { return nil }
        guard let range = http.value(forHTTPHeaderField: "Content-Range").flatMap(ContentRange.init),
              range.start == Int64(data.count), range.total == header.total, range.end < range.total
        else { return nil }
        // A validator the answer repeats must be the one the bytes were kept with.
        if let entityTag = http.value(forHTTPHeaderField: "ETag"), entityTag != header.entityTag { return nil }
        if let lastModified = http.value(forHTTPHeaderField: "Last-Modified"), let kept = header.lastModified,
           lastModified != kept { return nil }
        let received = response.data.prefix(Int(range.end - range.start + 1))
        var next = self
        next.data.append(received)
        next.header.count = Int64(next.data.count)
        return next
    }

    /// Whether every byte of the body is here.
    var isComplete: Bool { Int64(data.count) == header.total }

    /// The assembled body as a complete `200` response: the `206`'s header fields (the same
    /// representation's), with `Content-Length` the whole length and no `Content-Range`, so
    /// the assembled bytes go through the same checks as any other response.
    func completeResponse(from response: DownloadedResponse) -> DownloadedResponse? {
        let http = response.response
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            guard let name = name as? String, let value = value as? String else { continue }
            let lower = name.lowercased()
            if lower == "content-range" || lower == "content-length" { continue }
            fields[name] = value
        }
        fields["Content-Length"] = String(header.total)
        guard let url = http.url ?? URL(string: header.url),
              let whole = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields)
        else { return nil }
        return DownloadedResponse(data: data, response: whole, url: response.url)
    }

    private static func isIdentityCoded(_ response: HTTPURLResponse) -> Bool {
        let coding = response.value(forHTTPHeaderField: "Content-Encoding")?.lowercased()
        return coding == nil || coding == "identity"
    }

    // MARK: - The file

    /// The download kept in `file` for `url`, or `nil` (removing a file that does not read back
    /// as one for `url`).
    static func read(from file: URL, url: String) -> PartialDownload? {
        guard let contents = try? Data(contentsOf: file) else { return nil }
        guard let partial = decode(contents), partial.header.url == url else {
            remove(file)
            return nil
        }
        return partial
    }

    private static func decode(_ contents: Data) -> PartialDownload? {
        let bytes = [UInt8](contents.prefix(8))
        guard bytes.count == 8, contents.prefix(4) == magic else { return nil }
        let length = Int(bytes[4]) << 24 | Int(bytes[5]) << 16 | Int(bytes[6]) << 8 | Int(bytes[7])
        guard contents.count >= 8 + length else { return nil }
        let headerStart = contents.startIndex + 8
        guard let header = try? JSONDecoder().decode(Header.self, from: contents[headerStart..<(headerStart + length)])
        else { return nil }
        let body = Data(contents[(headerStart + length)...])
        guard header.count > 0, Int64(body.count) == header.count, header.count < header.total else { return nil }
        let partial = PartialDownload(header: header, data: body)
        return partial.validator == nil ? nil : partial
    }

    /// Writes the download to `file` (through a temporary file renamed into place, so a reader
    /// never sees half a file). A failure only loses the chance to resume.
    func write(to file: URL) {
        guard let headerData = try? JSONEncoder().encode(header) else { return }
        let length = UInt32(headerData.count)
        var contents = Self.magic
        contents.append(contentsOf: [UInt8(length >> 24 & 0xFF), UInt8(length >> 16 & 0xFF),
                                     UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
        contents.append(headerData)
        contents.append(data)
        let directory = file.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".\(file.lastPathComponent).\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try contents.write(to: temporary)
            if rename(temporary.path, file.path) != 0 { throw CocoaError(.fileWriteUnknown) }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
        }
    }

    /// Removes the download kept in `file`, if any.
    static func remove(_ file: URL) {
        try? FileManager.default.removeItem(at: file)
    }
}

/// A `Content-Range: bytes <start>-<end>/<total>` value (RFC 9110 section 14.4); an unknown
/// total (`*`) or any other form is `nil`.
struct ContentRange: Equatable {
    var start: Int64
    var end: Int64
    var total: Int64

    init?(_ value: String) {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let total = Int64(parts[1]) else { return nil }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]),
              start >= 0, start <= end, end < total
        else { return nil }
        self.start = start
        self.end = end
        self.total = total
    }
}
