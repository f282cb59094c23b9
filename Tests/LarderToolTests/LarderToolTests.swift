import Foundation
import LarderTestSupport
import Testing

/// End-to-end tests of the built `larder` executable: every test runs it as a separate process
/// on a fresh cache directory. Serialized: each test blocks its thread while the child runs,
/// and in parallel they would hold every cooperative thread of a 2-core machine at once.
///
/// Ten minutes, as every suite: a limit only catches a hang. In a full run on a fresh clone,
/// almost no test anywhere finished in the first 100–155 s (they then finished in one burst),
/// and the first case of this suite ran into an old 2-minute limit in each of three such runs.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct LarderToolTests {
    let temporary: TemporaryDirectory
    /// The test's own folder (deleted afterwards).
    var folder: URL { temporary.url }
    /// The cache the commands use by default (through `$LARDER_DIRECTORY`); not created yet.
    var cache: URL { folder.appendingPathComponent("cache", isDirectory: true) }

    init() throws {
        temporary = try TemporaryDirectory("larder-tool")
    }

    // MARK: - Helpers

    /// Runs `larder` with `$LARDER_DIRECTORY` pointing at ``cache``.
    @discardableResult
    func larder(_ arguments: String..., input: Data? = nil) throws -> LarderProcess.Result {
        try larder(arguments, input: input)
    }

    @discardableResult
    func larder(_ arguments: [String], input: Data? = nil, environment: [String: String]? = nil) throws -> LarderProcess.Result {
        var defaults = ProcessInfo.processInfo.environment
        defaults["LARDER_DIRECTORY"] = cache.path
        return try LarderProcess.run(arguments, input: input, environment: environment ?? defaults)
    }

    /// Runs `larder` and requires exit status 0.
    @discardableResult
    func succeed(_ arguments: String..., input: Data? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws
        -> LarderProcess.Result
    {
        try succeed(arguments, input: input, sourceLocation: sourceLocation)
    }

    @discardableResult
    func succeed(_ arguments: [String], input: Data? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws
        -> LarderProcess.Result
    {
        let result = try larder(arguments, input: input)
        try #require(result.status == 0 && result.reason == .exit, "larder \(arguments): \(result)", sourceLocation: sourceLocation)
        return result
    }

    func jsonObject(_ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let result = try larder(arguments)
        try #require(result.status == 0, "larder \(arguments): \(result)", sourceLocation: sourceLocation)
        return try #require(try result.json() as? [String: Any], sourceLocation: sourceLocation)
    }

    /// Checks the shape every failure must have: a non-zero exit (not a signal), one line on
    /// standard error starting with `larder: error:`, and no trap or stack trace.
    func expectCleanFailure(
        _ result: LarderProcess.Result, status: Int32? = nil, mentioning fragment: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.reason == .exit, "\(result)", sourceLocation: sourceLocation)
        #expect(result.status != 0, "\(result)", sourceLocation: sourceLocation)
        if let status { #expect(result.status == status, "\(result)", sourceLocation: sourceLocation) }
        #expect(result.errorLines.count == 1, "\(result)", sourceLocation: sourceLocation)
        #expect(result.errors.hasPrefix("larder: error: "), "\(result)", sourceLocation: sourceLocation)
        for trace in ["Fatal error", "Stack dump", "Current stack trace", "Illegal instruction", "#0 "] {
            #expect(!result.errors.contains(trace), "\(result)", sourceLocation: sourceLocation)
        }
        if let fragment {
            #expect(result.errors.contains(fragment), "\(result)", sourceLocation: sourceLocation)
        }
    }

    static func randomBytes(_ count: Int) -> Data {
        Data((0..<count).map { _ in UInt8.random(in: 0 ... .max) })
    }

    /// Every regular file under `blobs/`.
    func blobFiles() -> Set<String> {
        Set(StoreChecks.blobFiles(in: cache))
    }

    /// Stores `data` under `key` and returns the blob file the write created.
    func setBlob(_ key: String, _ data: Data) throws -> String {
        let before = blobFiles()
        try succeed("set", key, input: data)
        let created = blobFiles().subtracting(before)
        try #require(created.count == 1, "expected one new blob for \(key), got \(created)")
        return created.first!
    }

    func exists(_ url: URL) -> Bool {
        FileManager.default.fileExists(atPath: url.path)
    }

    // MARK: - set / get / rm round trips

    @Test(arguments: [0, 1, 255, 16_383, 16_384, 300_000])
    func setAndGetRoundTripBinaryBytesThroughStandardInputAndOutput(size: Int) throws {
        // Given bytes of every value, some of them NUL and newline
        var value = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        if size > 10 { value.replaceSubrange(0..<10, with: Self.randomBytes(10)) }
        // When they go in through stdin and out through stdout
        try succeed("set", "bytes/\(size)", input: value)
        let result = try succeed("get", "bytes/\(size)")
        // Then they come back byte for byte, with nothing on stderr
        #expect(result.standardOutput == value)
        #expect(result.errors.isEmpty)
    }

    @Test(arguments: [["--hash", "md5"], ["--hash", "sha256", "--gzip"], ["--gzip"]])
    func setWithHashAndGzipOptionsRoundTrips(options: [String]) throws {
        let compressible = Data(String(repeating: "larder ", count: 10_000).utf8)
        let random = Self.randomBytes(40_000)
        try succeed(["set", "text"] + options, input: compressible)
        try succeed(["set", "random"] + options, input: random)
        #expect(try succeed("get", "text").standardOutput == compressible)
        #expect(try succeed("get", "random").standardOutput == random)
        // gzip, when asked for, stores the text compressed and the random bytes raw
        let list = try jsonObject("list", "--json")
        let entries = try #require(list["entries"] as? [[String: Any]])
        let encodings = Dictionary(uniqueKeysWithValues: entries.map { ($0["key"] as! String, $0["encoding"] as! String) })
        #expect(encodings["text"] == (options.contains("--gzip") ? "gzip" : "raw"))
        #expect(encodings["random"] == "raw")
        if options.contains("--hash") {
            // The digest's length shows in the blob file name (hex digits before the '-').
            let digestLength = options.contains("md5") ? 32 : 64
            let names = blobFiles().map { URL(fileURLWithPath: $0).lastPathComponent }
            #expect(!names.isEmpty)
            #expect(names.allSatisfy { $0.split(separator: "-").first?.count == digestLength })
        }
    }

    @Test func setReadsAFileArgumentAndOverwrites() throws {
        let file = folder.appendingPathComponent("value.bin")
        let first = Self.randomBytes(50_000)
        try first.write(to: file)
        try succeed("set", "k", file.path)
        #expect(try succeed("get", "k").standardOutput == first)
        try succeed("set", "k", input: Data("second".utf8))
        #expect(try succeed("get", "k").output == "second")
    }

    @Test func setCreatesTheDirectoryAndGetDoesNotNeedStdin() throws {
        #expect(!exists(cache))
        try succeed("set", "greeting", input: Data("hello\n".utf8))
        #expect(exists(cache.appendingPathComponent("index.sqlite")))
        #expect(try succeed("get", "greeting").output == "hello\n")
    }

    @Test func rmRemovesTheEntryAndASecondRmFails() throws {
        try succeed("set", "a", input: Data("1".utf8))
        try succeed("set", "b", input: Data("2".utf8))
        let removed = try succeed("rm", "a")
        #expect(removed.output.isEmpty && removed.errors.isEmpty)
        expectCleanFailure(try larder("get", "a"), status: 1, mentioning: "\"a\"")
        expectCleanFailure(try larder("rm", "a"), status: 1, mentioning: "no entry")
        try succeed("rm", "--force", "a")
        #expect(try succeed("get", "b").output == "2")
    }

    @Test func getOfAMissingKeyExitsOneWithOneLine() throws {
        try succeed("set", "present", input: Data("x".utf8))
        let result = try larder("get", "absent")
        expectCleanFailure(result, status: 1, mentioning: "no entry for key \"absent\"")
        #expect(result.standardOutput.isEmpty)
    }

    @Test func keysWithControlCharactersStayOnOneLineInMessages() throws {
        try succeed("set", "x", input: Data())
        let result = try larder("get", "line1\nline2\u{1B}[31m")
        expectCleanFailure(result, status: 1, mentioning: "line1\\nline2\\u{1B}[31m")
    }

    @Test func clearRemovesEverything() throws {
        for key in ["a", "b", "c"] { try succeed("set", key, input: Self.randomBytes(20_000)) }
        let result = try succeed("clear")
        #expect(result.output.contains("Removed 3 entries"))
        let stats = try jsonObject("stats", "--json")
        #expect(stats["entries"] as? Int == 0)
        #expect(stats["stored_bytes"] as? Int == 0)
        #expect(blobFiles().isEmpty)
    }

    // MARK: - TTL

    @Test func ttlIsRecordedAsTheExpiry() throws {
        try succeed("set", "session", "--ttl", "3600", input: Data("token".utf8))
        try succeed("set", "forever", input: Data("value".utf8))
        let list = try jsonObject("list", "--json")
        let entries = try #require(list["entries"] as? [[String: Any]])
        #expect(entries.map { $0["key"] as? String } == ["forever", "session"])
        #expect(entries[0]["expires"] is NSNull)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let created = try #require((entries[1]["created"] as? String).flatMap(formatter.date(from:)))
        let expires = try #require((entries[1]["expires"] as? String).flatMap(formatter.date(from:)))
        #expect(abs(expires.timeIntervalSince(created) - 3_600) < 0.01)
    }

    @Test func anExpiredEntryIsAMissAndTrimExpiredRemovesIt() throws {
        // Given an entry whose 1 ms TTL has passed by the time the next process starts
        try succeed("set", "brief", "--ttl", "0.001", input: Data("gone".utf8))
        try succeed("set", "stays", input: Data("here".utf8))
        // Then reads miss it, list leaves it out, and stats counts it as expired
        expectCleanFailure(try larder("get", "brief"), status: 1)
        // (the read removed it; write it again to see it counted)
        try succeed("set", "brief", "--ttl", "0.001", input: Data("gone".utf8))
        let list = try jsonObject("list", "--json")
        #expect(list["total"] as? Int == 1)
        var stats = try jsonObject("stats", "--json")
        #expect(stats["entries"] as? Int == 2)
        #expect(stats["live_entries"] as? Int == 1)
        #expect(stats["expired_entries"] as? Int == 1)
        // When expired entries are trimmed
        let trim = try jsonObject("trim", "--expired", "--json")
        #expect(trim["expired"] as? Int == 1)
        #expect(trim["removed_entries"] as? Int == 1)
        stats = try jsonObject("stats", "--json")
        #expect(stats["entries"] as? Int == 1)
        #expect(try succeed("get", "stays").output == "here")
    }

    // MARK: - stats and list

    @Test func statsJSONHasTheDocumentedKeysAndTotals() throws {
        // Given one inline value, one file value and one gzip value
        try succeed("set", "inline", input: Data(repeating: 1, count: 10))
        try succeed("set", "file", input: Self.randomBytes(20_000))
        try succeed("set", "text", "--gzip", input: Data(String(repeating: "abc", count: 10_000).utf8))
        let stats = try jsonObject("stats", "--json")
        #expect(Set(stats.keys) == [
            "directory", "entries", "live_entries", "expired_entries", "stored_bytes", "original_bytes",
            "inline_entries", "file_entries", "gzip_entries", "index_bytes", "oldest_access", "newest_access",
            "hits", "misses", "evictions", "size_limit",
        ])
        #expect(stats["directory"] as? String == cache.path)
        #expect(stats["entries"] as? Int == 3)
        #expect(stats["live_entries"] as? Int == 3)
        #expect(stats["original_bytes"] as? Int == 10 + 20_000 + 30_000)
        let stored = try #require(stats["stored_bytes"] as? Int)
        #expect(stored > 20_010 && stored < 20_010 + 30_000)
        #expect(stats["inline_entries"] as? Int == 2)
        #expect(stats["file_entries"] as? Int == 1)
        #expect(stats["gzip_entries"] as? Int == 1)
        #expect((stats["index_bytes"] as? Int ?? 0) > 0)
        #expect(stats["oldest_access"] is String)
        #expect(stats["hits"] as? Int == 0 && stats["misses"] as? Int == 0 && stats["evictions"] as? Int == 0)
        #expect(stats["size_limit"] is NSNull)  // the tool writes without a limit
        // And the text form names the same numbers
        let text = try succeed("stats").output
        #expect(text.contains("3 live"))
        #expect(text.contains("2 inline, 1 in files, 1 gzip"))
    }

    @Test func statsOnAnEmptyCacheHasNullDates() throws {
        try succeed("set", "k", input: Data())
        try succeed("rm", "k")
        let stats = try jsonObject("stats", "--json")
        #expect(stats["entries"] as? Int == 0)
        #expect(stats["oldest_access"] is NSNull)
        #expect(stats["newest_access"] is NSNull)
    }

    @Test func listJSONDescribesEachEntryInKeyOrder() throws {
        try succeed("set", "b/file", input: Self.randomBytes(20_000))
        try succeed("set", "a/inline", input: Data("small".utf8))
        try succeed("set", "c/gzip", "--gzip", input: Data(String(repeating: "z", count: 5_000).utf8))
        let list = try jsonObject("list", "--json")
        #expect(list["total"] as? Int == 3)
        #expect(list["count"] as? Int == 3)
        let entries = try #require(list["entries"] as? [[String: Any]])
        #expect(entries.map { $0["key"] as? String } == ["a/inline", "b/file", "c/gzip"])
        for entry in entries {
            #expect(Set(entry.keys) == [
                "key", "original_bytes", "stored_bytes", "encoding", "storage", "created", "accessed", "expires",
            ])
        }
        #expect(entries[0]["storage"] as? String == "inline")
        #expect(entries[0]["original_bytes"] as? Int == 5)
        #expect(entries[1]["storage"] as? String == "file")
        #expect(entries[1]["stored_bytes"] as? Int == 20_000)
        #expect(entries[2]["encoding"] as? String == "gzip")
        #expect((entries[2]["stored_bytes"] as? Int ?? .max) < 5_000)
    }

    @Test func listLimitAndPrefix() throws {
        for key in ["img/1", "img/2", "img/3", "txt/1", "txt/2"] {
            try succeed("set", key, input: Data(key.utf8))
        }
        let limited = try jsonObject("list", "--limit", "2", "--json")
        #expect(limited["total"] as? Int == 5)
        #expect(limited["count"] as? Int == 2)
        #expect((limited["entries"] as? [[String: Any]])?.map { $0["key"] as? String } == ["img/1", "img/2"])
        let prefixed = try jsonObject("list", "--prefix", "txt/", "--json")
        #expect((prefixed["entries"] as? [[String: Any]])?.map { $0["key"] as? String } == ["txt/1", "txt/2"])
        // The text form lists as many rows as the limit, plus a header and a footer
        let text = try succeed("list", "--limit", "3").output.split(separator: "\n")
        #expect(text.count == 1 + 3 + 1)
        #expect(text.first?.hasPrefix("KEY") == true)
        #expect(text.last == "(3 of 5 entries shown)")
    }

    // MARK: - stats --watch

    @Test func statsWatchRedrawsInPlaceOnATerminalAndPrintsLinesIntoAPipe() throws {
        // Given a cache where other processes read two hits and a miss, and a trim evicted one
        try succeed("set", "a", input: Data("1".utf8))
        try succeed("set", "b", input: Data("2".utf8))
        try succeed("get", "a")
        try succeed("get", "a")
        #expect(try larder("get", "missing").status != 0)
        try succeed("trim", "--count", "1")

        // When the cache is watched into a pipe, twice
        let piped = try succeed("stats", "--watch", "--interval", "0.1", "--refreshes", "2")

        // Then each refresh is one line of the directory's counts, with no terminal codes
        let lines = piped.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        for line in lines {
            #expect(line.contains(" hits=2 misses=1 hit_ratio=0.6667 entries=1 "), "\(line)")
            #expect(line.hasSuffix(" evictions=1"), "\(line)")
        }
        #expect(!piped.output.contains("\u{1B}"))

        // When it is watched on a pseudo-terminal (util-linux's `script`), three times
        let command = "'\(try LarderProcess.executableURL.path)' stats --watch --interval 0.1 --refreshes 3"
        var environment = ProcessInfo.processInfo.environment
        environment["LARDER_DIRECTORY"] = cache.path
        let terminal = try LarderProcess.run(
            ["-q", "-e", "-c", command, "/dev/null"], environment: environment, executable: "/usr/bin/script")

        // Then the view is drawn once and redrawn in place twice (the cursor goes back up over
        // its five lines), with the hit ratio and the evictions
        try #require(terminal.status == 0, "\(terminal)")
        #expect(terminal.output.components(separatedBy: "\u{1B}[5A").count - 1 == 2, "\(terminal.output)")
        #expect(terminal.output.contains("66.7% (2 hits, 1 misses)"), "\(terminal.output)")
        #expect(terminal.output.contains("Evictions"))

        // And plain `stats --json` reports the same counts
        let stats = try jsonObject("stats", "--json")
        #expect(stats["hits"] as? Int == 2 && stats["misses"] as? Int == 1 && stats["evictions"] as? Int == 1)
    }

    @Test func statsWatchRefusesABadInterval() throws {
        // Given a cache
        try succeed("set", "a", input: Data("1".utf8))

        // When the interval is zero, or --watch is combined with --json
        let zero = try larder("stats", "--watch", "--interval", "0")
        let both = try larder("stats", "--watch", "--json")

        // Then each is refused with a message naming the option
        #expect(zero.status != 0 && zero.errors.contains("--interval"), "\(zero)")
        #expect(both.status != 0 && both.errors.contains("--watch"), "\(both)")
    }

    // MARK: - trim

    /// Writes `count` 1,000-byte inline entries `k0`, `k1`, … in order.
    func fillThousandByteEntries(_ count: Int) throws {
        for index in 0..<count { try succeed("set", "k\(index)", input: Data(repeating: UInt8(index), count: 1_000)) }
    }

    func liveKeys() throws -> [String] {
        let list = try jsonObject("list", "--json")
        return (list["entries"] as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
    }

    @Test func trimCountKeepsTheMostRecentlyUsed() throws {
        // Given five entries, the oldest of which is read again
        try fillThousandByteEntries(5)
        try succeed("get", "k0")
        // When trimmed to two entries
        let trim = try jsonObject("trim", "--count", "2", "--json")
        // Then the two most recently used remain
        #expect(try liveKeys() == ["k0", "k4"])
        #expect(trim["removed_entries"] as? Int == 3)
        #expect(trim["evicted"] as? Int == 3)
        #expect((trim["before"] as? [String: Any])?["entries"] as? Int == 5)
        #expect((trim["after"] as? [String: Any])?["stored_bytes"] as? Int == 2_000)
    }

    @Test func trimSizeAcceptsSuffixesAndShrinksTheTotal() throws {
        try fillThousandByteEntries(5)
        try succeed("trim", "--size", "2500")
        #expect(try liveKeys() == ["k3", "k4"])
        try succeed("set", "big", input: Self.randomBytes(3 << 10))
        try succeed("trim", "--size", "3K")
        let stats = try jsonObject("stats", "--json")
        #expect((stats["stored_bytes"] as? Int ?? .max) <= 3 << 10)
        #expect(try liveKeys() == ["big"])
    }

    @Test func trimPercentRemovesThatShareLeastRecentlyUsedFirst() throws {
        try fillThousandByteEntries(10)
        try succeed("get", "k1")
        let text = try succeed("trim", "--percent", "40").output
        #expect(text.contains("Removed"))
        #expect(text.contains("4 entries"))
        // k0 and k2…k4 were the least recently used; k1 was read last
        #expect(try liveKeys() == ["k1", "k5", "k6", "k7", "k8", "k9"])
    }

    @Test func trimCountOfZeroEmptiesTheCache() throws {
        try fillThousandByteEntries(3)
        try succeed("trim", "--count", "0")
        #expect(try liveKeys().isEmpty)
    }

    // MARK: - verify

    @Test func verifyReportsDamageWithoutChangingAnythingThenRepairRemovesIt() throws {
        // Given two inline entries and three blobs, one flipped and one deleted
        try succeed("set", "inline-1", input: Data("one".utf8))
        try succeed("set", "inline-2", input: Data("two".utf8))
        let values = (1...3).map { _ in Self.randomBytes(20_000) }
        let flippedFile = try setBlob("blob-1", values[0])
        let deletedFile = try setBlob("blob-2", values[1])
        _ = try setBlob("blob-3", values[2])
        var bytes = try Data(contentsOf: URL(fileURLWithPath: flippedFile))
        bytes[12_345] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: flippedFile))
        try FileManager.default.removeItem(atPath: deletedFile)

        // When verified without repair: exit 2 and the counts
        let check = try larder("verify", "--json")
        #expect(check.status == 2, "\(check)")
        let report = try #require(try check.json() as? [String: Any])
        #expect(report["checked"] as? Int == 5)
        #expect(report["good"] as? Int == 3)
        #expect(report["damaged"] as? Int == 2)
        #expect(report["removed"] as? Int == 0)
        #expect(report["remaining"] as? Int == 2)
        let damaged = try #require(report["damaged_entries"] as? [[String: String]])
        #expect(damaged == [["key": "blob-1", "damage": "checksum-mismatch"], ["key": "blob-2", "damage": "missing-file"]])
        // and nothing changed
        #expect(try liveKeys().count == 5)
        #expect(FileManager.default.fileExists(atPath: flippedFile))
        let text = try larder("verify")
        #expect(text.status == 2)
        #expect(text.output.contains("Good     3"))
        #expect(text.output.contains("Damaged  2"))
        #expect(text.output.contains("\"blob-1\"  checksum mismatch"))

        // When verified with repair: exit 0, the damaged entries and their files are gone
        let repair = try larder("verify", "--repair", "--json")
        #expect(repair.status == 0, "\(repair)")
        let repaired = try #require(try repair.json() as? [String: Any])
        #expect(repaired["removed"] as? Int == 2)
        #expect(repaired["remaining"] as? Int == 0)
        #expect(try liveKeys() == ["blob-3", "inline-1", "inline-2"])
        #expect(!FileManager.default.fileExists(atPath: flippedFile))
        expectCleanFailure(try larder("get", "blob-1"), status: 1)
        #expect(try succeed("get", "blob-3").standardOutput == values[2])
        // And a new check is clean
        let again = try succeed("verify")
        #expect(again.output.contains("The cache is healthy."))
    }

    @Test func verifyOfAHealthyCacheExitsZero() throws {
        try succeed("set", "a", input: Self.randomBytes(30_000))
        try succeed("set", "b", "--gzip", input: Data(String(repeating: "b", count: 30_000).utf8))
        let result = try succeed("verify", "--json")
        let report = try #require(try result.json() as? [String: Any])
        #expect(report["checked"] as? Int == 2 && report["good"] as? Int == 2 && report["damaged"] as? Int == 0)
        // Progress is plain lines on stderr when it is not a terminal
        #expect(result.errors.contains("2 of 2 entries checked"))
        #expect(!result.errors.contains("\r"))
    }

    // MARK: - image inspect

    static let png = Data([
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
        0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x18, 0x08, 0x02, 0x00, 0x00, 0x00, 0x14, 0x31, 0x68,
        0x63, 0x00, 0x00, 0x00, 0x30, 0x49, 0x44, 0x41, 0x54, 0x78, 0xDA, 0x63, 0x90, 0xC3, 0x01, 0xFE,
        0xF7, 0x30, 0x60, 0x45, 0xA4, 0xAA, 0x67, 0x18, 0xB5, 0x60, 0xD4, 0x82, 0x21, 0x60, 0x01, 0xB5,
        0x0C, 0xC2, 0xA5, 0x7E, 0xD4, 0x82, 0x51, 0x0B, 0x86, 0x82, 0x05, 0xA3, 0x45, 0xC5, 0xA8, 0x05,
        0xA3, 0x16, 0x30, 0x00, 0x00, 0xFD, 0x12, 0xD7, 0x9F, 0xE0, 0x00, 0x16, 0x27, 0x00, 0x00, 0x00,
        0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ])

    /// A GIF89a of `width` × `height` with `frames` one-pixel-wide frames (header and blocks only).
    static func gif(width: UInt16, height: UInt16, frames: Int) -> Data {
        var data = Data("GIF89a".utf8)
        data += [UInt8(width & 0xFF), UInt8(width >> 8), UInt8(height & 0xFF), UInt8(height >> 8), 0x80, 0, 0]
        data += [0, 0, 0, 255, 255, 255]
        for _ in 0..<frames {
            data += [0x21, 0xF9, 0x04, 0x04, 0x0A, 0x00, 0x00, 0x00]          // graphic control
            data += [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0]                          // 1×1 descriptor
            data += [0x02, 0x02, 0x44, 0x01, 0x00]                             // LZW data
        }
        data += [0x3B]
        return data
    }

    /// A 24-bit BMP header of `width` × `height` (top-down when `height` is negative).
    static func bmp(width: Int32, height: Int32) -> Data {
        func le32(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        var data = Data("BM".utf8)
        data += le32(54) + [0, 0, 0, 0] + le32(54)
        data += le32(40) + le32(width) + le32(height) + [1, 0, 24, 0] + le32(0) + le32(0) + le32(2_835) + le32(2_835) + le32(0) + le32(0)
        return data
    }

    @Test func imageInspectReportsFormatSizeFramesAndBytes() throws {
        let png = folder.appendingPathComponent("logo.png")
        let gif = folder.appendingPathComponent("spinner.gif")
        let bmp = folder.appendingPathComponent("photo.bmp")
        let text = folder.appendingPathComponent("notes.txt")
        try Self.png.write(to: png)
        try Self.gif(width: 300, height: 200, frames: 3).write(to: gif)
        try Self.bmp(width: 640, height: -480).write(to: bmp)
        try Data("just text".utf8).write(to: text)

        let result = try succeed("image", "inspect", "--json", png.path, gif.path, bmp.path, text.path)
        let items = try #require(try result.json() as? [[String: Any]])
        try #require(items.count == 4)
        #expect(items[0]["file"] as? String == png.path)
        #expect(items[0]["format"] as? String == "png")
        #expect(items[0]["mime_type"] as? String == "image/png")
        #expect(items[0]["width"] as? Int == 32 && items[0]["height"] as? Int == 24)
        #expect(items[0]["frames"] as? Int == 1)
        #expect(items[0]["bytes"] as? Int == Self.png.count)
        #expect(items[0]["animated"] as? Bool == false)
        #expect(items[1]["format"] as? String == "gif")
        #expect(items[1]["width"] as? Int == 300 && items[1]["height"] as? Int == 200)
        #expect(items[1]["frames"] as? Int == 3)
        #expect(items[1]["animated"] as? Bool == true)
        #expect(items[2]["format"] as? String == "bmp")
        #expect(items[2]["width"] as? Int == 640 && items[2]["height"] as? Int == 480)
        #expect(items[3]["format"] is NSNull)
        #expect(items[3]["width"] is NSNull)
        #expect(items[3]["bytes"] as? Int == 9)

        let table = try succeed("image", "inspect", png.path, gif.path).output
        #expect(table.contains("png"))
        #expect(table.contains("32×24"))
        #expect(table.contains("300×200"))
    }

    /// A JPEG header of `width` × `height` whose Exif says `orientation` (no pixel data).
    static func orientedJPEG(width: UInt16, height: UInt16, orientation: UInt16) -> Data {
        func be16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
        // TIFF (little-endian): header, IFD0 with one entry (0x0112, SHORT, 1, orientation), next 0.
        let tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00,
                             0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00,
                             UInt8(orientation & 0xFF), UInt8(orientation >> 8), 0x00, 0x00,
                             0x00, 0x00, 0x00, 0x00]
        var data = Data([0xFF, 0xD8, 0xFF, 0xE1])
        data.append(contentsOf: be16(UInt16(2 + 6 + tiff.count)))
        data.append(contentsOf: Array("Exif".utf8) + [0, 0])
        data.append(contentsOf: tiff)
        data.append(contentsOf: [0xFF, 0xC0] + be16(11) + [8])
        data.append(contentsOf: be16(height) + be16(width))
        data.append(contentsOf: [1, 1, 0x11, 0])
        data.append(contentsOf: [0xFF, 0xD9])
        return data
    }

    @Test func imageInspectReportsOrientationOrientedSizeAndCompleteness() throws {
        let photo = folder.appendingPathComponent("photo.jpg")
        try Self.orientedJPEG(width: 40, height: 30, orientation: 6).write(to: photo)
        let cut = folder.appendingPathComponent("cut.png")
        try Self.png.prefix(Self.png.count - 12).write(to: cut)
        let items = try #require(try succeed("image", "inspect", "--json", photo.path, cut.path).json() as? [[String: Any]])
        try #require(items.count == 2)
        #expect(items[0]["width"] as? Int == 40 && items[0]["height"] as? Int == 30)
        #expect(items[0]["orientation"] as? Int == 6)
        #expect(items[0]["oriented_width"] as? Int == 30 && items[0]["oriented_height"] as? Int == 40)
        #expect(items[0]["complete"] as? Bool == false)   // a header only: no scan, no EOI after it
        #expect(items[1]["complete"] as? Bool == false)
        let table = try succeed("image", "inspect", photo.path).output
        #expect(table.contains("6 → 30×40"))
    }

    @Test func imageInspectListsReadableFilesAndFailsForTheUnreadableOne() throws {
        let png = folder.appendingPathComponent("logo.png")
        try Self.png.write(to: png)
        let missing = folder.appendingPathComponent("missing.png").path
        let result = try larder("image", "inspect", "--json", png.path, missing)
        expectCleanFailure(result, status: 1, mentioning: "missing.png")
        let items = try #require(try result.json() as? [[String: Any]])
        #expect(items.map { $0["file"] as? String } == [png.path])
    }

    // MARK: - demo

    @Test func demoRunsTheWorkloadAndPrintsEverySection() throws {
        let result = try succeed("demo")
        let output = result.output
        for section in ["1. Writes", "2. Reads", "3. Expiry", "4. Eviction", "5. Image", "6. Statistics"] {
            #expect(output.contains(section), "missing \(section)")
        }
        #expect(output.contains("inline, gzip"))
        #expect(output.contains("file"))
        #expect(output.contains("memory hit"))
        #expect(output.contains("disk hit, promoted to memory"))
        #expect(output.contains("miss: expired in memory and on disk"))
        #expect(output.contains("expired first: feed/latest.json"))
        #expect(output.contains("least recently used"))
        #expect(output.contains("trimmed to at most 80%"))
        #expect(output.contains("32×24"))
        #expect(output.contains("no: not a known image format"))
        #expect(output.contains("Done in"))
        #expect(result.errors.isEmpty, "\(result.errors)")
        // The temporary directory is gone afterwards
        let path = try #require(output.split(separator: "\n").first { $0.hasPrefix("directory") })
            .split(separator: " ", omittingEmptySubsequences: true)[1]
        #expect(!FileManager.default.fileExists(atPath: String(path)))
    }

    @Test func demoInADirectoryLeavesAHealthyCacheBelowTheLimit() throws {
        let directory = folder.appendingPathComponent("demo")
        let result = try succeed("demo", "--directory", directory.path, "--no-gzip", "--hash", "md5")
        #expect(result.output.contains("md5 file names; no compression"))
        let stats = try jsonObject("stats", "--json", "--directory", directory.path)
        let stored = try #require(stats["stored_bytes"] as? Int)
        #expect(stored > 0 && stored <= (1 << 20) * 8 / 10)
        #expect(stats["expired_entries"] as? Int == 0)
        try succeed("verify", "--directory", directory.path)
        let images = try jsonObject("list", "--json", "--directory", directory.appendingPathComponent("images").path)
        #expect((images["entries"] as? [[String: Any]])?.map { $0["key"] as? String } == ["image/logo.png", "image/spinner.gif"])
        // A second run refuses the now non-empty directory
        expectCleanFailure(try larder("demo", "--directory", directory.path), status: 1, mentioning: "not empty")
    }

    // MARK: - Directory resolution

    @Test func defaultDirectoryFollowsLarderDirectoryThenXDGCacheHome() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["LARDER_DIRECTORY"] = nil
        environment["XDG_CACHE_HOME"] = folder.appendingPathComponent("xdg").path
        let set = try larder(["set", "k"], input: Data("xdg".utf8), environment: environment)
        #expect(set.status == 0, "\(set)")
        #expect(exists(folder.appendingPathComponent("xdg/larder/index.sqlite")))

        environment["XDG_CACHE_HOME"] = nil
        environment["HOME"] = folder.appendingPathComponent("home").path
        try larder(["set", "k"], input: Data("home".utf8), environment: environment)
        #expect(exists(folder.appendingPathComponent("home/.cache/larder/index.sqlite")))

        environment["LARDER_DIRECTORY"] = folder.appendingPathComponent("explicit").path
        try larder(["set", "k"], input: Data("env".utf8), environment: environment)
        let get = try larder(["get", "k"], environment: environment)
        #expect(get.output == "env")
        // --directory wins over the environment
        let other = try larder(["get", "k", "--directory", folder.appendingPathComponent("xdg/larder").path], environment: environment)
        #expect(other.output == "xdg")
    }

    @Test func helpExitsZeroAndListsTheCommands() throws {
        let result = try succeed("--help")
        for command in ["demo", "set", "get", "rm", "clear", "stats", "list", "trim", "verify", "image"] {
            #expect(result.output.contains("  \(command)"), "missing \(command)")
        }
    }

    // MARK: - Bad input

    /// A command that must fail cleanly; `{cache}`, `{missing}`, `{file}`, `{folder}` and
    /// `{foreign}` stand for paths the test prepares.
    struct BadInput: CustomTestStringConvertible, Sendable {
        var arguments: [String]
        var mentioning: String
        var status: Int32?

        init(_ arguments: String..., mentioning: String, status: Int32? = nil) {
            self.arguments = arguments
            self.mentioning = mentioning
            self.status = status
        }

        var testDescription: String { arguments.joined(separator: " ") }
    }

    static let badInputs: [BadInput] = [
        BadInput("stats", "--directory", "{missing}", mentioning: "does not exist", status: 1),
        BadInput("get", "k", "--directory", "{missing}", mentioning: "does not exist", status: 1),
        BadInput("list", "--directory", "{missing}", mentioning: "does not exist", status: 1),
        BadInput("verify", "--directory", "{missing}", mentioning: "does not exist", status: 1),
        BadInput("trim", "--count", "1", "--directory", "{missing}", mentioning: "does not exist", status: 1),
        BadInput("clear", "--directory", "{missing}", mentioning: "does not exist", status: 1),
        BadInput("stats", "--directory", "{file}", mentioning: "is not a directory", status: 1),
        BadInput("set", "k", "{file}", "--directory", "{file}", mentioning: "is not a directory", status: 1),
        BadInput("set", "k", "{file}", "--directory", "{file}/sub", mentioning: "Not a directory", status: 1),
        BadInput("stats", "--directory", "{folder}", mentioning: "not a larder cache", status: 1),
        BadInput("set", "k", "{file}", "--directory", "{foreign}", mentioning: "refusing", status: 1),
        BadInput("get", "absent", "--directory", "{cache}", mentioning: "no entry for key \"absent\"", status: 1),
        BadInput("rm", "absent", "--directory", "{cache}", mentioning: "no entry", status: 1),
        BadInput("set", "k", "{missing}/value.bin", mentioning: "No such file or directory", status: 1),
        BadInput("set", "k", "{folder}", mentioning: "Is a directory", status: 1),
        BadInput("set", "k", "--ttl", "0", mentioning: "--ttl", status: 64),
        BadInput("set", "k", "--ttl", "-5", mentioning: "--ttl", status: 64),
        BadInput("set", "k", "--ttl", "soon", mentioning: "--ttl", status: 64),
        BadInput("set", "k", "--hash", "sha512", mentioning: "sha512", status: 64),
        BadInput("trim", "--size", "10", "--percent", "5", mentioning: "cannot be combined", status: 64),
        BadInput("trim", "--count", "3", "--percent", "5", mentioning: "cannot be combined", status: 64),
        BadInput("trim", "--size", "ten", mentioning: "'ten'", status: 64),
        BadInput("trim", "--size", "-1", mentioning: "'-1'", status: 64),
        BadInput("trim", "--size", "99999999999999999999", mentioning: "--size", status: 64),
        BadInput("trim", "--count", "1.5", mentioning: "'1.5'", status: 64),
        BadInput("trim", "--percent", "101", mentioning: "between 0 and 100", status: 64),
        BadInput("trim", "--percent", "nan", mentioning: "between 0 and 100", status: 64),
        BadInput("trim", mentioning: "nothing to trim", status: 64),
        BadInput("list", "--limit", "0", mentioning: "--limit", status: 64),
        BadInput("list", "--limit", "-2", mentioning: "'-2'", status: 64),
        BadInput("list", "--limit", "many", mentioning: "'many'", status: 64),
        BadInput("get", mentioning: "<key>", status: 64),
        BadInput("image", "inspect", mentioning: "<files>", status: 64),
        BadInput("image", "inspect", "{missing}", mentioning: "No such file or directory", status: 1),
        BadInput("frobnicate", mentioning: "frobnicate", status: 64),
        BadInput("get", "k", "--gzip", mentioning: "--gzip", status: 64),
        BadInput("demo", "--directory", "{file}", mentioning: "is not a directory", status: 1),
    ]

    @Test(arguments: badInputs)
    func badInputFailsWithOneClearLine(_ input: BadInput) throws {
        // Given a cache, a plain file, a foreign non-empty folder and a path that does not exist
        try succeed("set", "present", input: Data("x".utf8))
        let file = folder.appendingPathComponent("plain.txt")
        try Data("plain".utf8).write(to: file)
        let foreign = folder.appendingPathComponent("foreign")
        try FileManager.default.createDirectory(at: foreign, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: foreign.appendingPathComponent("notes.txt"))
        let missing = folder.appendingPathComponent("missing")
        let arguments = input.arguments.map {
            $0.replacingOccurrences(of: "{cache}", with: cache.path)
                .replacingOccurrences(of: "{missing}", with: missing.path)
                .replacingOccurrences(of: "{file}", with: file.path)
                .replacingOccurrences(of: "{folder}", with: folder.path)
                .replacingOccurrences(of: "{foreign}", with: foreign.path)
        }
        // When the command runs
        let result = try larder(arguments, input: Data("value".utf8))
        // Then it fails with one clear line and creates nothing
        expectCleanFailure(result, status: input.status, mentioning: input.mentioning)
        #expect(!exists(missing), "a failing command created \(missing.path)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: foreign.path) == ["notes.txt"])
        #expect(try succeed("get", "present").output == "x")
    }
}
