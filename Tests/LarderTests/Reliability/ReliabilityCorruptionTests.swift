import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Promises 1 and 3 against damage to every kind of file in the directory: the index, its
/// WAL, a blob and a leftover temporary file are truncated, zeroed, byte-flipped, deleted or
/// replaced by a directory in a crash image of a live store; the reopened store must return
/// exact bytes or a miss for every key, keep taking writes, and keep its totals equal to a
/// recount of `keys()` (`CorruptionMatrix` in LarderTestSupport, shared with `larder-torture`).
///
/// `LARDER_CORRUPTION_SEEDS` sets the seeds per byte-flip case (default 6); the time limit
/// follows it.
@Suite(.timeLimit(ReliabilitySize.corruptionTimeLimit))
struct ReliabilityCorruptionTests {
    typealias FileKind = CorruptionMatrix.FileKind
    typealias Damage = CorruptionMatrix.Damage

    static let seeds = ReliabilitySize.corruptionSeeds

    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-corruption")
    }

    static let cases = CorruptionMatrix.cases

    @Test(arguments: cases)
    func damagedFileNeverYieldsWrongBytesAndTheStoreKeepsWorking(kind: FileKind, damage: Damage) async throws {
        // Off the cooperative pool: twenty cases of blocking file work would otherwise hold
        // both of its threads (on a 2-core machine) and starve every other suite's tasks.
        let workspace = folder.url
        let result = try await OffPool.run { try CorruptionMatrix.run(kind, damage, seeds: 1...UInt64(Self.seeds), in: workspace) }
        result.findings.expectNone()
        #expect(result.images == (damage.isSeeded ? Self.seeds : 1))
        #expect(result.hits + result.misses + result.thrown == result.images * 80, "not every key was read")
        print("reliability.corruption \(kind.rawValue) \(damage.rawValue): \(result.images) images, \(result.hits) exact hits, \(result.misses) misses, \(result.thrown) thrown reads")
    }

    /// The check itself must be able to fail: a flipped byte inside a stored value that the
    /// store did not catch would be reported as wrong bytes. Damage applied to the expected
    /// values instead of the files shows the comparison is exact.
    @Test func damageChangesTheFileItNames() throws {
        let (image, _) = try CorruptionMatrix.makeCrashImage(in: folder.url, name: "self-check")
        let index = image.appendingPathComponent(FileKind.index.rawValue).path
        let before = try Data(contentsOf: URL(fileURLWithPath: index))
        for damage in [Damage.truncate, .flip] {
            try Data(before).write(to: URL(fileURLWithPath: index))
            try CorruptionMatrix.damage(index, damage, seed: 3)
            #expect(try Data(contentsOf: URL(fileURLWithPath: index)) != before, "\(damage) left the file unchanged")
        }
    }
}
