import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Promises 1 and 3 against damage to every kind of file in the directory: the index, its
/// WAL, a blob and a leftover temporary file are truncated, zeroed, byte-flipped, deleted or
/// replaced by a directory in a crash image of a live store; the reopened store must return
/// exact bytes or a miss for every key, keep taking writes, and keep its totals equal to a
/// recount of `keys()`.
///
/// `LARDER_CORRUPTION_SEEDS` sets the seeds per byte-flip case (default 6).
@Suite(.timeLimit(.minutes(5)))
struct ReliabilityCorruptionTests {
    enum FileKind: String, CaseIterable, Sendable {
        case index = "index.sqlite", wal = "index.sqlite-wal", blob, tmp
    }

    enum Damage: String, CaseIterable, Sendable {
        case truncate, zero, flip, delete, directory
    }

    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-corruption")
    }

    /// Builds a crash image: half the values checkpointed into `index.sqlite`, half only in
    /// the WAL, blobs and inline rows, gzip and raw, plus a temporary file a killed write left.
    /// Returns the image's directory and the exact value of every key.
    func makeCrashImage(name: String) throws -> (URL, [String: Data]) {
        let source = folder.url.appendingPathComponent("source-\(name)")
        var values: [String: Data] = [:]
        let configuration = Reliability.configuration { $0.inlineThreshold = 4_096; $0.compression = .gzip(level: 1) }
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
            let image = folder.url.appendingPathComponent("image-\(name)")
            try FileManager.default.copyItem(at: source, to: image)
            store.close()
            return (image, values)
        }
        fatalError("unreachable")
    }

    func target(_ kind: FileKind, in image: URL, seed: UInt64) throws -> String {
        switch kind {
        case .index, .wal:
            return image.appendingPathComponent(kind.rawValue).path
        case .tmp:
            return image.appendingPathComponent("tmp/ab_deadbeef-1").path
        case .blob:
            let blobs = Reliability.tree(image.appendingPathComponent("blobs")).filter { !$0.isDirectory }.map(\.path).sorted()
            return blobs[Int(seed % UInt64(blobs.count))]
        }
    }

    static func damage(_ path: String, _ damage: Damage, seed: UInt64) throws {
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

    static let cases: [(FileKind, Damage)] = FileKind.allCases.flatMap { kind in Damage.allCases.map { (kind, $0) } }

    @Test(arguments: cases)
    func damagedFileNeverYieldsWrongBytesAndTheStoreKeepsWorking(kind: FileKind, damage: Damage) throws {
        let seeds = damage == .flip || damage == .zero || damage == .truncate
            ? Reliability.environment("LARDER_CORRUPTION_SEEDS", default: 6) : 1
        var hits = 0
        var misses = 0
        var thrown = 0
        for seed in 1...UInt64(seeds) {
            let context = "\(kind.rawValue) \(damage.rawValue) seed \(seed)"
            // Given a crash image of a live store
            let (image, values) = try makeCrashImage(name: "\(kind)-\(damage)-\(seed)")
            // When one of its files is damaged
            try Self.damage(try target(kind, in: image, seed: seed), damage, seed: seed)
            // Then the store opens…
            let store: DiskStore
            do {
                store = try DiskStore(directory: image, configuration: Reliability.configuration())
            } catch {
                Issue.record("\(context): the store did not open: \(error)")
                continue
            }
            // …every key reads as its exact bytes or a miss (a thrown error is allowed, wrong
            // bytes never are)…
            for (key, value) in values {
                do {
                    if let read = try store.value(forKey: key) {
                        #expect(read == value, "\(context): \(key) returned \(read.count) wrong bytes")
                        hits += 1
                    } else {
                        misses += 1
                    }
                } catch {
                    thrown += 1
                }
            }
            // …and afterwards it takes writes, reads them back and keeps exact totals.
            Reliability.expectStillWorks(store, context)
            do {
                let survivors = try Reliability.expectTotalsExact(store, context)
                for key in survivors {
                    let again = try store.value(forKey: key)
                    #expect(again == values[key], "\(context): \(key) changed \(again?.count ?? -1)")
                }
                try store.setValue(Data("after".utf8), forKey: "after")
                #expect(try store.value(forKey: "after") == Data("after".utf8))
            } catch {
                Issue.record("\(context): the store failed after the damage: \(error)")
            }
            store.close()
            try? FileManager.default.removeItem(at: image)
        }
        print("reliability.corruption \(kind.rawValue) \(damage.rawValue): \(seeds) images, \(hits) exact hits, \(misses) misses, \(thrown) thrown reads")
    }
}
