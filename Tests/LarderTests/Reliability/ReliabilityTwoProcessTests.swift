import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Two helper processes and this one on one directory at the same time: disjoint keys, the
/// same keys, removes and cross-process eviction. Every read during the run returns intact
/// bytes of its own key; afterwards every key holds the last write of some process
/// (`TwoProcess` in LarderTestSupport, which `larder-torture` repeats).
@Suite(.serialized, .timeLimit(.minutes(5)))
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

    @Test func processesOpeningANewDirectoryTogetherShareOneIndex() async throws {
        let result = try await run("fresh")
        #expect(result.helperOperations == 200)
    }
}
