import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Load: 8 threads of mixed operations on one `Storage` (memory + disk) whose limits are small
/// enough that both tiers evict all the time. A watchdog fails the test on a deadlock; the
/// invariants are checked afterwards (`LoadRun` in LarderTestSupport, shared with
/// `larder-torture`).
///
/// `LARDER_LOAD_OPERATIONS` sets the total operations (default 100,000; 800,000 is the full
/// 8 × 100,000 run); the watchdog and the time limit follow it.
@Suite(.timeLimit(ReliabilitySize.loadTimeLimit))
struct ReliabilityLoadTests {
    static let operations = ReliabilitySize.loadOperations

    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-load")
    }

    @Test func eightThreadsOfMixedOperationsKeepEveryInvariant() async throws {
        let total = Self.operations
        let directory = folder.url.appendingPathComponent("store")
        let watchdog = Reliability.environment("LARDER_LOAD_WATCHDOG_SECONDS", default: max(420, total * 42 / 10_000))
        let result = try await OffPool.run {
            try LoadRun.run(directory: directory, total: total, threads: 8, watchdog: .seconds(watchdog),
                            progressInterval: .seconds(30), progress: { print("reliability.\($0)") })
        }
        result.findings.expectNone()
        #expect(result.finished && result.operations == total)
        print("reliability.load: \(result.operations) operations on \(result.threads) threads in \(result.elapsed); memory evictions \(result.memoryEvictions), disk evictions \(result.diskEvictions), disk \(result.diskEntries) entries")
    }
}
