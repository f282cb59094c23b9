import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Shared checks for the reliability suites: the five promises are stated once, in
/// `LarderTestSupport/Reliability` (which `larder-torture` runs at full size); these wrappers
/// turn what they find into Swift Testing issues.
enum Reliability {
    /// A quiet configuration (no log output) edited by `configure`.
    static func configuration(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) -> DiskStore.Configuration {
        StoreChecks.configuration(configure)
    }

    /// An integer from the environment, for the suites' "more behind an env var" sizes.
    static func environment(_ name: String, default fallback: Int) -> Int {
        StoreChecks.environment(name, default: fallback)
    }

    /// A time limit that follows the requested size: `minimum` minutes at CI scale, and
    /// `secondsPerUnit` for each unit (kill, image, 1,000 operations) beyond what `minimum`
    /// covers, so a run asking for more (`LARDER_CRASH_KILLS=1000`) is not failed by a limit
    /// set for 25. Large sizes belong to `larder-torture`; this keeps them from failing here.
    static func timeLimit(minimum: Int, units: Int, secondsPerUnit: Int) -> TimeLimitTrait.Duration {
        .minutes(max(minimum, (units * secondsPerUnit + 59) / 60 + 2))
    }

    /// Promise 5 and index consistency: totals equal a recount of the live entries, and are
    /// within the configured limits. Returns the live keys.
    @discardableResult
    static func expectTotalsExact(_ store: DiskStore, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        var findings = Findings()
        let keys = try StoreChecks.totalsExact(store, context, into: &findings)
        findings.expectNone(sourceLocation: sourceLocation)
        return keys
    }

    /// Promise 3: the store still takes a write, returns it exactly and removes it.
    static func expectStillWorks(_ store: DiskStore, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        var findings = Findings()
        StoreChecks.stillWorks(store, context, into: &findings)
        findings.expectNone(sourceLocation: sourceLocation)
    }

    /// Every file and directory under `root` (not following symbolic links), with its mode.
    static func tree(_ root: URL) -> [(path: String, isDirectory: Bool, mode: Int)] {
        StoreChecks.tree(root)
    }

    /// Promise 4 on the file system: everything under `root` is a regular file (0600) or a
    /// directory (0700); symbolic links or other kinds would be reported.
    static func expectOwnerOnly(_ root: URL, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for entry in tree(root) {
            var info = stat()
            lstat(entry.path, &info)
            let kind = info.st_mode & S_IFMT
            #expect(kind == S_IFREG || kind == S_IFDIR, "\(context): \(entry.path) is neither a file nor a directory",
                    sourceLocation: sourceLocation)
            let expected = entry.isDirectory ? 0o700 : 0o600
            #expect(entry.mode == expected, "\(context): \(entry.path) has mode \(String(entry.mode, radix: 8))",
                    sourceLocation: sourceLocation)
        }
    }
}

extension Findings {
    /// Records one issue per violation.
    func expectNone(sourceLocation: SourceLocation = #_sourceLocation) {
        for violation in violations {
            Issue.record(Comment(rawValue: violation.description), sourceLocation: sourceLocation)
        }
    }
}

/// The sizes the suites run at (CI scale by default, more behind env vars) and the time limits
/// that follow them. Kept outside the suites: a `@Suite` trait cannot name its own type.
enum ReliabilitySize {
    /// `LARDER_CRASH_KILLS`: kills per durability (default 25).
    static let kills = Reliability.environment("LARDER_CRASH_KILLS", default: 25)
    /// `LARDER_POWER_LOSS_ROUNDS` (default 10).
    static let powerLossRounds = Reliability.environment("LARDER_POWER_LOSS_ROUNDS", default: 10)
    /// `LARDER_CORRUPTION_SEEDS`: seeds per seeded damage (default 6).
    static let corruptionSeeds = Reliability.environment("LARDER_CORRUPTION_SEEDS", default: 6)
    /// `LARDER_LOAD_OPERATIONS` (default 100,000).
    static let loadOperations = Reliability.environment("LARDER_LOAD_OPERATIONS", default: 100_000)

    /// About 3 s a round in a debug build on a busy 2-core machine; 10 minutes at CI scale.
    static var crashTimeLimit: TimeLimitTrait.Duration {
        Reliability.timeLimit(minimum: 10, units: max(kills, powerLossRounds), secondsPerUnit: 3)
    }
    /// About 10 s a seed for the slowest case; 10 minutes at CI scale.
    static var corruptionTimeLimit: TimeLimitTrait.Duration {
        Reliability.timeLimit(minimum: 10, units: corruptionSeeds, secondsPerUnit: 10)
    }
    /// About 6 s per 1,000 operations; 10 minutes at CI scale.
    static var loadTimeLimit: TimeLimitTrait.Duration {
        Reliability.timeLimit(minimum: 10, units: loadOperations / 1_000, secondsPerUnit: 6)
    }
}
