import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Two helper processes and this one on one directory at the same time: disjoint keys, the
/// same keys, removes and cross-process eviction. Every read during the run returns intact
/// bytes of its own key; afterwards every key holds the last write of some process
/// (`TwoProcess` in LarderTestSupport, which `larder-torture` repeats).
@Suite(.serialized, .timeLimit(.minutes(10)))
struct ReliabilityTwoProcessTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-two-process")
    }

    @discardableResult
    func run(_ scenario: String) async throws -> TwoProcess.Result {
        let result = try await TwoProcess.run(scenario, in: folder.url)
        result.findings.expectNone()
        #expect(result.findings.keysChecked > 0)
        print("reliability.two-process \(scenario): \(result.helperOperations) helper operations, \(result.concurrentReads) concurrent reads checked, \(result.findings.keysChecked) keys checked")
        return result
    }

    @Test func disjointWritersEachKeepTheirLastWrite() async throws {
        let result = try await run("disjoint")
        #expect(result.helperOperations == 800)
    }

    @Test func writersOfTheSameKeysLeaveOneOfTheirLastWrites() async throws {
        let result = try await run("shared")
        #expect(result.helperOperations == 800)
    }

    @Test func evictionAcrossProcessesKeepsTheLimits() async throws {
        try await run("evicting")
    }

    @Test func evictionAcrossProcessesKeepsTheLimitsUnderS3FIFO() async throws {
        try await run("evicting-s3fifo")
        // And the queue totals three processes kept equal a recount, with no access row or
        // ghost beyond its bounds
        let connection = try SQLiteConnection(path: folder.url.appendingPathComponent("evicting-s3fifo/index.sqlite").path)
        defer { connection.close() }
        let recount = """
            SELECT (SELECT small_count FROM totals) - (SELECT count(*) FROM access WHERE queue = 1),
                (SELECT small_size FROM totals) - (SELECT coalesce(sum(e.size), 0) FROM access AS a JOIN entries AS e
                    ON e.rowid = a.entry WHERE a.queue = 1),
                (SELECT ghost_count FROM totals) - (SELECT count(*) FROM ghost),
                (SELECT count(*) FROM access WHERE entry NOT IN (SELECT rowid FROM entries)),
                (SELECT count(*) FROM ghost)
            """
        let values = try connection.statement(recount).withReset { statement in
            _ = try statement.step()
            return (0..<5).map { statement.int64($0) }
        }
        #expect(Array(values[0..<4]) == [0, 0, 0, 0], "small count, small size, ghost count drift; orphan access rows")
        #expect(values[4] > 0 && values[4] <= 22, "ghost of \(values[4]) keys (90% of the count limit 25 is 22)")
    }

    @Test func processesOpeningANewDirectoryTogetherShareOneIndex() async throws {
        let result = try await run("fresh")
        #expect(result.helperOperations == 200)
    }
}
