import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// A full disk without mount privileges: the helper's `full-disk` mode runs under
/// `RLIMIT_FSIZE` with SIGXFSZ ignored, so `write(2)` fails with EFBIG exactly where a full disk
/// fails with ENOSPC — in blob files and in the index's database and WAL files.
@Suite(.timeLimit(.minutes(10)))
struct ReliabilityFullDiskTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-full-disk")
    }

    @Test func failedWritesThrowStayConsistentAndSucceedOnceSpaceIsFreed() async throws {
        // Given a store in a process that cannot grow any file past 1 MiB
        let directory = folder.url.appendingPathComponent("store")
        let (process, report) = try await withChildProcesses { scope in
            let process = try CrashHelper.start(in: scope, ["full-disk", directory.path, "\(1 << 20)"])
            await process.waitForOutput()
            return (process, process.standardOutput)
        }
        #expect(process.exitedCleanly, "helper: \(report) \(process.standardError)")
        // Then each write that could not be stored threw a clear error, every check after it held
        // (no partial entry, exact totals, earlier values intact, no temporary file left), and
        // writes succeeded again once the limit was lifted
        let checks = report.split(separator: "\n").filter { $0.hasPrefix("check ") }
        #expect(checks.count >= 10, "too few checks ran: \(report)")
        for check in checks {
            #expect(check.hasSuffix(" ok"), "\(check)")
        }
        for name in ["blob.oversized-write-throws", "index.write-throws", "freed.writes-succeed", "index.totals-exact"] {
            #expect(checks.contains { $0.hasPrefix("check \(name) ") }, "\(name) did not run")
        }
        let errors = report.split(separator: "\n").filter { $0.hasPrefix("error ") }
        #expect(errors.contains { $0.contains("File too large") }, "errors should name the cause: \(errors)")
        print("reliability.full-disk: \(checks.count) checks; \(errors.joined(separator: " | "))")

        // And a fresh process sees a consistent store with intact values
        let store = try DiskStore(directory: directory, configuration: Reliability.configuration())
        let keys = try Reliability.expectTotalsExact(store, "after full disk")
        for key in keys {
            let data = try #require(try store.value(forKey: key))
            #expect(CrashPayload.verify(data)?.key == key)
        }
        Reliability.expectStillWorks(store, "after full disk")
    }
}
