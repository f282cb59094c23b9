import ArgumentParser
import Foundation
import Larder
import LarderImage

/// `larder demo`: a short, realistic workload through `Storage`, reported step by step.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run a short workload through Storage and show what the cache did.",
        discussion: """
            Writes values of mixed sizes (inline rows and blob files), reads them back from \
            memory and disk, lets a TTL expire on an injected clock (no sleeping), overflows the \
            disk limit to show the 20% trim, caches two embedded images, and prints the \
            statistics. Takes well under a second; needs no network and no files.

            By default the demo uses a fresh temporary directory and removes it afterwards. With \
            --directory (a new or empty directory) or --keep, the cache stays for `larder list`, \
            `larder stats` and the other commands.
            """)

    @Option(help: ArgumentHelp("Run in this new or empty directory and keep it.", valueName: "dir"))
    var directory: String?

    @Flag(help: "Keep the temporary directory and print its path.")
    var keep = false

    @Option(help: "The digest that names blob files: md5, sha1 or sha256.")
    var hash: HashName = .sha1

    @Flag(inversion: .prefixedNo, help: "Gzip values that shrink.")
    var gzip = true

    func run() throws {
        let (url, isTemporary) = try prepareDirectory()
        let started = ContinuousClock.now
        let simulated: TimeInterval
        do {
            defer { if isTemporary && !keep { try? FileManager.default.removeItem(at: url) } }
            let workload = try DemoWorkload(directory: url, hashing: hash.keyHashing, gzip: gzip)
            try workload.run(isTemporary: isTemporary && !keep)
            simulated = workload.clock.elapsed
            workload.close()
        }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("")
        print(String(format: "Done in %.2f s of real time (%.0f s on the demo's clock).", seconds, simulated))
        if !isTemporary || keep {
            print("The cache is in \(url.path); try `larder list --directory \(url.path)`.")
        }
    }

    /// The directory to run in: `--directory` (created when missing, must be empty), or a
    /// fresh temporary one.
    private func prepareDirectory() throws -> (URL, isTemporary: Bool) {
        guard let directory else {
            let url = FileManager.default.temporaryDirectory
                .appendingPathComponent("larder-demo-\(UUID().uuidString.prefix(8).lowercased())")
            try makeDirectories(url.path)
            return (url, true)
        }
        let url = URL(fileURLWithPath: directory).standardizedFileURL
        switch fileKind(url.path) {
        case .missing:
            try makeDirectories(url.path)
        case .directory:
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
            guard contents.isEmpty else {
                throw ToolError("\(url.path) is not empty; the demo needs a new or empty directory")
            }
        case .other:
            throw ToolError("\(url.path) is not a directory")
        }
        return (url, false)
    }
}

/// The demo's workload and report.
final class DemoWorkload {
    let directory: URL
    let clock = DemoClock()
    let storage: Storage<String, Data>
    let disk: DiskStore
    let images: DemoImageCache
    private var bytes = DemoBytes(seed: 2026)

    /// The disk tier's size limit: small, so the workload overflows it.
    static let diskLimit = 1 << 20
    static let trimRatio = 0.2
    static let memoryBuckets = [
        SizeBucket(maxEntryCost: 16 << 10, countLimit: 64),
        SizeBucket(maxEntryCost: 64 << 10, countLimit: 4),
        SizeBucket(maxEntryCost: .max, countLimit: 1),
    ]

    /// Keys read from disk in step 2, to show in step 4 that LRU eviction spared them.
    private var diskHitKeys: [String] = []
    /// Keys written with a TTL in step 1, to name the expired ones step 4 removes first.
    private var keysWithTTL: [String] = []

    init(directory: URL, hashing: KeyHashing, gzip: Bool) throws {
        self.directory = directory
        var disk = DiskStore.Configuration()
        disk.sizeLimit = Self.diskLimit
        disk.overflowTrimRatio = Self.trimRatio
        disk.keyHashing = hashing
        disk.compression = gzip ? .gzip(level: 6) : .none

        var configuration = Storage<String, Data>.Configuration(directory: directory, disk: disk)
        configuration.memory.sizeBuckets = Self.memoryBuckets
        configuration.now = clock.function
        configuration.logHandler = { printError("larder: warning: \($0)") }
        storage = try Storage(configuration: configuration, transformer: .data)
        guard let store = storage.disk else { throw ToolError("the demo storage has no disk tier") }
        self.disk = store
        images = try DemoImageCache(
            directory: directory.appendingPathComponent("images"), disk: disk, clock: clock)
    }

    func close() {
        disk.close()
        images.storage.disk?.close()
    }

    func run(isTemporary: Bool) throws {
        printHeader(isTemporary: isTemporary)
        try writes()
        try reads()
        try expiry()
        try eviction()
        try imageCaching()
        printStatistics()
    }

    // MARK: - Steps

    private func printHeader(isTemporary: Bool) {
        let configuration = disk.configuration
        let compression: String
        if case .gzip(let level) = configuration.compression { compression = "gzip level \(level)" } else {
            compression = "no compression"
        }
        print("Larder demo")
        print("===========")
        var table = Table([.left, .left])
        table.append("directory", directory.path + (isTemporary ? "  (temporary, removed at exit; --keep keeps it)" : ""))
        table.append(
            "disk tier",
            "\(formatBytes(Self.diskLimit)) limit, \(Int(Self.trimRatio * 100))% trimmed on overflow; "
                + "values under \(formatBytes(configuration.inlineThreshold)) inline; "
                + "\(configuration.keyHashing.rawValue) file names; \(compression)")
        table.append("memory tier", "LRU with size buckets: 64 entries ≤ 16 KiB, 4 ≤ 64 KiB, 1 larger")
        table.append("clock", "injected: the demo moves time forward instead of sleeping")
        table.print()
    }

    private func writes() throws {
        heading(1, "Writes", "mixed sizes: inline rows and blob files")
        let settings = Data("""
            {"theme":"dark","language":"en","sync":{"interval":300,"wifiOnly":true},\
            "features":["offline","prefetch","thumbnails"],"lastOpened":"2026-05-01T09:30:00Z"}
            """.utf8)
        var plan: [(key: String, data: Data, ttl: TimeInterval?)] = [
            ("config/settings.json", settings, nil),
            ("text/readme.md", DemoBytes.text(6_000), nil),
            ("text/manual.md", DemoBytes.text(48_000), nil),
            ("feed/latest.json", DemoBytes.text(2_500), 30),
        ]
        for index in 1...6 { plan.append(("avatar/\(index).bin", bytes.random(40_000), nil)) }
        for index in 1...4 { plan.append(("photo/\(index).bin", bytes.random(160_000), nil)) }

        var table = Table([.left, .right, .right, .left, .left], indent: 3)
        table.append("KEY", "SIZE", "STORED", "WHERE", "TTL")
        for item in plan {
            try storage.setValue(item.data, forKey: item.key, expiry: item.ttl.map(Expiry.seconds))
            if item.ttl != nil { keysWithTTL.append(item.key) }
            table.append(
                item.key, formatBytes(item.data.count), try storedSize(item.key), try placement(item.key),
                item.ttl.map { "\(Int($0)) s" } ?? "-")
            clock.advance(by: 1)
        }
        table.print()
        let memory = storage.memory
        print("   disk: \(entries(disk.totalCount)), \(formatBytes(disk.totalSize)) stored (\(percentOfLimit(disk.totalSize)) of the limit)")
        print("   memory: \(entries(memory.totalCount)), \(formatBytes(memory.totalCost)); the size buckets kept the 4 newest avatars and the newest photo")
    }

    private func reads() throws {
        heading(2, "Reads", "memory hits, disk hits and promotion")
        var table = Table([.left, .left, .right], indent: 3)
        table.append("KEY", "RESULT", "BYTES")
        for key in ["config/settings.json", "avatar/1.bin", "avatar/1.bin", "photo/1.bin", "text/manual.md", "nothing/here"] {
            let promotionsBefore = storage.statistics[.memory].promotions
            guard let entry = try storage.entry(forKey: key) else {
                table.append(key, "miss", "-")
                continue
            }
            var result: String
            if entry.tier == .memory {
                result = "memory hit"
            } else {
                result = "\(entry.tier) hit"
                if storage.statistics[.memory].promotions > promotionsBefore { result += ", promoted to memory" }
                diskHitKeys.append(key)
            }
            table.append(key, result, formatBytes(entry.value.count))
            clock.advance(by: 1)
        }
        table.print()
        print("   avatar/1.bin and photo/1.bin had left memory (their size buckets were full); text/manual.md shares")
        print("   the ≤ 64 KiB bucket with the avatars. Each disk hit is decoded once and promoted.")
    }

    private func expiry() throws {
        heading(3, "Expiry", "a 60 s TTL on the injected clock")
        let key = "session/token"
        let start = clock.now
        func time() -> String { "t+\(Int(clock.now.timeIntervalSince(start))) s" }
        var table = Table([.left, .left, .left], indent: 3)
        try storage.setValue(Data("token-7f3a9c".utf8), forKey: key, expiry: .seconds(60))
        table.append(time(), "write \(key)", "TTL 60 s")
        clock.advance(by: 30)
        if let entry = try storage.entry(forKey: key) {
            let remaining = entry.expirationDate.map { Int($0.timeIntervalSince(clock.now).rounded()) } ?? 0
            table.append(time(), "read", "\(entry.tier == .memory ? "memory" : "disk") hit, expires in \(remaining) s")
        } else {
            table.append(time(), "read", "miss (unexpected)")
        }
        clock.advance(by: 31)
        let found = try storage.entry(forKey: key)
        table.append(time(), "read", found == nil ? "miss: expired in memory and on disk" : "hit (unexpected)")
        let onDisk = try disk.containsValue(forKey: key)
        table.append(time(), "disk check", onDisk ? "still on disk (unexpected)" : "gone from the disk index too")
        table.print()
        let expiredRows = disk.totalCount - (try disk.keys().count)
        print("   feed/latest.json (TTL 30 s, never read) has expired as well: \(entries(expiredRows)) expired but still")
        print("   in the index, never returned, and removed first by the next trim.")
    }

    private func eviction() throws {
        heading(4, "Eviction", "overflowing the disk limit trims \(Int(Self.trimRatio * 100))% at once")
        let keysBefore = Set(try disk.keys())
        var accessDates: [String: Date] = [:]
        for key in keysBefore { accessDates[key] = try disk.attributes(forKey: key)?.accessDate }
        let countBefore = disk.totalCount
        let sizeBefore = disk.totalSize
        let statisticsBefore = disk.statistics
        let key = "archive/backup.bin"
        let value = bytes.random(200_000)

        try storage.setValue(value, forKey: key)

        let keysAfter = Set(try disk.keys())
        let statistics = disk.statistics
        let target = Int(Double(Self.diskLimit) * (1 - Self.trimRatio))
        var table = Table([.left, .right, .right, .left], indent: 3)
        table.append("before", entries(countBefore), formatBytes(sizeBefore), "\(percentOfLimit(sizeBefore)) of \(formatBytes(Self.diskLimit))")
        table.append(
            "write", "+1 entry", formatBytes(value.count),
            "\(key) → \(percentOfLimit(sizeBefore + value.count)) of the limit: over it")
        table.append(
            "after", entries(disk.totalCount), formatBytes(disk.totalSize),
            "\(percentOfLimit(disk.totalSize)), trimmed to at most \(100 - Int(Self.trimRatio * 100))% (\(formatBytes(target)))")
        table.print()

        let expired = keysWithTTL.filter { !keysBefore.contains($0) && !keysAfter.contains($0) }
        let expiredCount = statistics.expirations - statisticsBefore.expirations
        let evicted = keysBefore.subtracting(keysAfter).sorted {
            (accessDates[$0] ?? .distantPast, $0) < (accessDates[$1] ?? .distantPast, $1)
        }
        var removed = Table([.left, .left], indent: 3)
        if expiredCount > 0 {
            removed.append("removed", "\(entries(expiredCount)) expired first: \(expired.joined(separator: ", "))")
        }
        removed.append(
            expiredCount > 0 ? "" : "removed",
            "\(statistics.evictions - statisticsBefore.evictions) least recently used: \(evicted.joined(separator: ", "))")
        let spared = diskHitKeys.filter { keysAfter.contains($0) }
        if !spared.isEmpty {
            removed.append("kept", "\(Array(Set(spared)).sorted().joined(separator: ", ")): their disk hits in step 2 made them recent")
        }
        removed.print()
    }

    private func imageCaching() throws {
        heading(5, "Image", "format sniffing and header parsing, without decoding")
        let samples: [(key: String, data: Data)] = [
            ("image/logo.png", DemoImages.png),
            ("image/spinner.gif", DemoImages.gif),
            ("image/broken.png", Data("<html><body>404 Not Found</body></html>".utf8)),
        ]
        var table = Table([.left, .left, .right, .right, .right, .left], indent: 3)
        table.append("KEY", "FORMAT", "PIXELS", "FRAMES", "BYTES", "CACHED")
        for sample in samples {
            switch try images.store(sample.data, forKey: sample.key) {
            case .stored(let header):
                table.append(
                    sample.key, header.format.identifier, "\(header.pixelWidth)×\(header.pixelHeight)",
                    header.frameCount.map(String.init) ?? "?", formatCount(sample.data.count),
                    "yes, memory cost \(formatBytes(header.estimatedDecodedCost)) decoded")
            case .rejected(let reason):
                table.append(sample.key, "-", "-", "-", formatCount(sample.data.count), "no: \(reason)")
            }
        }
        table.print()
        if let image = try images.image(forKey: "image/logo.png", tiers: .disk), let header = image.header {
            print("   read back from disk: image/logo.png is \(header.format.mimeType), \(header.pixelWidth)×\(header.pixelHeight), \(image.data.count) bytes intact")
        }
    }

    private func printStatistics() {
        heading(6, "Statistics", "Storage.statistics after the workload")
        let statistics = storage.statistics
        var table = Table([.left, .right, .right], indent: 3)
        table.append("", "MEMORY", "DISK")
        table.append("hits", formatCount(statistics[.memory].hits), formatCount(statistics[.disk].hits))
        table.append("misses", formatCount(statistics[.memory].misses), formatCount(statistics[.disk].misses))
        table.append("evictions", formatCount(statistics[.memory].evictions), formatCount(statistics[.disk].evictions))
        table.append("expirations", formatCount(statistics[.memory].expirations), formatCount(statistics[.disk].expirations))
        table.append("entries", formatCount(statistics[.memory].totalCount), formatCount(statistics[.disk].totalCount))
        table.append("bytes", formatBytes(statistics[.memory].totalSize), formatBytes(statistics[.disk].totalSize))
        table.print()
        let hits = statistics[.memory].hits + statistics[.disk].hits
        let reads = hits + statistics.misses
        let ratio = reads == 0 ? 0 : Double(hits) / Double(reads) * 100
        print(String(
            format: "   reads %d: %d hits, %d misses (hit ratio %.0f%%); %d promotions; %d writes",
            reads, hits, statistics.misses, ratio, statistics[.memory].promotions, statistics.writes))
    }

    // MARK: - Helpers

    private func heading(_ number: Int, _ title: String, _ subtitle: String) {
        print("")
        print("\(number). \(title) — \(subtitle)")
    }

    private func entries(_ count: Int) -> String {
        "\(formatCount(count)) \(count == 1 ? "entry" : "entries")"
    }

    private func percentOfLimit(_ size: Int) -> String {
        "\(Int((Double(size) / Double(Self.diskLimit) * 100).rounded()))%"
    }

    private func storedSize(_ key: String) throws -> String {
        guard let entry = try disk.attributes(forKey: key) else { return "-" }
        return formatBytes(entry.size)
    }

    private func placement(_ key: String) throws -> String {
        guard let entry = try disk.attributes(forKey: key) else { return "-" }
        return (entry.isInline ? "inline" : "file") + (entry.encoding == .gzip ? ", gzip" : "")
    }
}
