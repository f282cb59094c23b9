public import Foundation
import Larder

/// Promises 1 and 3 against damage to every kind of file in the directory: the index, its WAL,
/// a blob and a leftover temporary file are truncated, zeroed, byte-flipped, deleted or replaced
/// by a directory in a crash image of a live store; the reopened store must return exact bytes
/// or a miss for every key, keep taking writes, and keep its totals equal to a recount.
public enum CorruptionMatrix {
    public enum FileKind: String, CaseIterable, Sendable {
        case index = "index.sqlite", wal = "index.sqlite-wal", blob, tmp
    }

    public enum Damage: String, CaseIterable, Sendable {
        case truncate, zero, flip, delete, directory

        /// Whether the seed changes what this damage does (where and how much).
        public var isSeeded: Bool { self == .truncate || self == .zero || self == .flip }
    }

    /// Every (file, damage) pair: 20 cases.
    public static let cases: [(FileKind, Damage)] = FileKind.allCases.flatMap { kind in Damage.allCases.map { (kind, $0) } }

    public struct Result: Sendable {
        public var images = 0
        public var hits = 0
        public var misses = 0
        public var thrown = 0
        public var findings = Findings()
    }

    /// Builds a crash image: half the values checkpointed into `index.sqlite`, half only in
    /// the WAL, blobs and inline rows, gzip and raw, plus a temporary file a killed write left.
    /// Returns the image's directory and the exact value of every key.
    public static func makeCrashImage(in workspace: URL, name: String) throws -> (URL, [String: Data]) {
        let source = workspace.appendingPathComponent("source-\(name)")
        defer { try? FileManager.default.removeItem(at: source) }
        var values: [String: Data] = [:]
        let configuration = StoreChecks.configuration { $0.inlineThreshold = 4_096; $0.compression = .gzip(level: 1) }
        for half in 0..<2 {
            let store = try DiskStore(directory: source, configuration: configuration)
            for index in 0..<40 {
                let key = "h\(half)-\(index)"
                let value = CrashPayload.make(key: key, generation: index + 1, size: index % 2 == 0 ? 200 + index : 9_000 + index * 300)
                try store.setValue(value, forKey: key, isCompressible: index % 4 != 1)
                values[key] = value
            }
            if half == 0 {
                store.close()
                continue
            }
            // A write killed between creating its temporary file and the rename.
            try CrashPayload.make(key: "tmp", generation: 1, size: 5_000)
                .write(to: source.appendingPathComponent("tmp/ab_deadbeef-1"))
            // The crash image: the files as a SIGKILL would leave them, WAL included.
            let image = workspace.appendingPathComponent("image-\(name)")
            try FileManager.default.copyItem(at: source, to: image)
            store.close()
            return (image, values)
        }
        fatalError("unreachable")
    }

    static func target(_ kind: FileKind, in image: URL, seed: UInt64) throws -> String {
        switch kind {
        case .index, .wal:
            return image.appendingPathComponent(kind.rawValue).path
        case .tmp:
            return image.appendingPathComponent("tmp/ab_deadbeef-1").path
        case .blob:
            let blobs = StoreChecks.tree(image.appendingPathComponent("blobs")).filter { !$0.isDirectory }.map(\.path).sorted()
            return blobs[Int(seed % UInt64(blobs.count))]
        }
    }

    /// Damages the file at `path`.
    public static func damage(_ path: String, _ damage: Damage, seed: UInt64) throws {
        let url = URL(fileURLWithPath: path)
        let original = try Data(contentsOf: url)
        var random = CrashPayload.Generator(seed: seed)
        switch damage {
        case .truncate:
            try original.prefix(Int(random.next() % UInt64(max(original.count, 1)))).write(to: url)
        case .zero:
            // A zeroed run of 4 KiB (a lost page) somewhere in the file.
            var bytes = original
            let start = Int(random.next() % UInt64(max(bytes.count, 1)))
            let end = min(bytes.count, start + 4_096)
            if start < end { bytes.replaceSubrange(start..<end, with: Data(count: end - start)) }
            try bytes.write(to: url)
        case .flip:
            var bytes = original
            guard !bytes.isEmpty else { return }
            for _ in 0..<8 {
                bytes[Int(random.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: random.next() | 1)
            }
            try bytes.write(to: url)
        case .delete:
            try FileManager.default.removeItem(at: url)
        case .directory:
            try FileManager.default.removeItem(at: url)
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
        }
    }

    /// Damages `kind` with `damage` in a fresh crash image for each seed and checks the
    /// reopened store; seeds only matter for seeded damages (one image otherwise).
    public static func run(_ kind: FileKind, _ damage: Damage, seeds: ClosedRange<UInt64>, in workspace: URL) throws -> Result {
        var result = Result()
        for seed in damage.isSeeded ? seeds : seeds.lowerBound...seeds.lowerBound {
            let context = "\(kind.rawValue) \(damage.rawValue) seed \(seed)"
            // Given a crash image of a live store
            let (image, values) = try makeCrashImage(in: workspace, name: "\(kind)-\(damage)-\(seed)")
            defer { try? FileManager.default.removeItem(at: image) }
            result.images += 1
            // When one of its files is damaged
            try Self.damage(try target(kind, in: image, seed: seed), damage, seed: seed)
            // Then the store opens…
            let store: DiskStore
            do {
                store = try DiskStore(directory: image, configuration: StoreChecks.configuration())
            } catch {
                result.findings.record(.broken, "\(context): the store did not open: \(error)")
                continue
            }
            defer { store.close() }
            // …every key reads as its exact bytes or a miss (a thrown error is allowed, wrong
            // bytes never are)…
            for (key, value) in values {
                result.findings.keysChecked += 1
                do {
                    if let read = try store.value(forKey: key) {
                        result.findings.check(read == value, .wrongBytes, "\(context): \(key) returned \(read.count) wrong bytes")
                        result.hits += 1
                    } else {
                        result.misses += 1
                    }
                } catch {
                    result.thrown += 1
                }
            }
            // …and afterwards it takes writes, reads them back and keeps exact totals.
            StoreChecks.stillWorks(store, context, into: &result.findings)
            do {
                let survivors = try StoreChecks.totalsExact(store, context, into: &result.findings)
                for key in survivors {
                    let again = try store.value(forKey: key)
                    result.findings.keysChecked += 1
                    result.findings.check(again == values[key], .wrongBytes, "\(context): \(key) changed \(again?.count ?? -1)")
                }
                try store.setValue(Data("after".utf8), forKey: "after")
                result.findings.check(try store.value(forKey: "after") == Data("after".utf8), .broken, "\(context): a write after the damage did not read back")
            } catch {
                result.findings.record(.broken, "\(context): the store failed after the damage: \(error)")
            }
        }
        return result
    }
}
