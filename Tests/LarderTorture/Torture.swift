// larder-torture: the reliability suites' checks at full size, outside `swift test`'s time
// limits, with a progress line per step and one Markdown report at the end.
//
//   swift run -c release larder-torture [options]      (or Tests/long-run/run [options])
//
// Exits 0 when every invariant held, 1 when any failed, 64 on a usage error.
import Foundation
import LarderTestSupport
#if canImport(Glibc)
import Glibc
#endif

struct Options: Sendable {
    var kills = 1_000
    var powerLossRounds = 200
    var corruptionSeeds = 25
    var loadOperations = 800_000
    var loadThreads = 8
    var twoProcessRounds = 10
    var fuzzSeconds = 900
    /// Fuzz on its own core while the kill phases run (they mostly wait out kill delays).
    var fuzzAlongside = true
    var phases: Set<String> = Set(Phase.allCases.map(\.rawValue))
    var report: String?
    var workspace: String?

    static let usage = """
        usage: larder-torture [--kills N] [--power-loss N] [--corruption-seeds N]
                              [--load-operations N] [--load-threads N] [--two-process-rounds N]
                              [--fuzz-seconds N] [--fuzz-after] [--only phase,phase…] [--report PATH]
                              [--workspace DIR]
          --kills N              SIGKILL rounds per durability, fast and durable (default 1000)
          --power-loss N         simulated power-loss rounds (default 200)
          --corruption-seeds N   seeds per seeded damage in the 20-case corruption matrix (default 25)
          --load-operations N    operations of the load run (default 800000 = 8 × 100,000)
          --load-threads N       threads of the load run (default 8)
          --two-process-rounds N repetitions of the four two-process scenarios (default 10)
          --fuzz-seconds N       libFuzzer time for Fuzz/run (default 900; 0 skips)
          --fuzz-after           fuzz after the other phases (default: alongside them, from the start)
          --only PHASES          comma-separated subset of: \(Phase.allCases.map(\.rawValue).joined(separator: ","))
          --report PATH          the Markdown report (default Tests/long-run/report.md)
          --workspace DIR        where the stores go (default a fresh temporary directory)
        """

    init(_ arguments: [String]) {
        var iterator = arguments.makeIterator()
        func value(_ name: String) -> String {
            guard let value = iterator.next() else { usageError("\(name) needs a value") }
            return value
        }
        func number(_ name: String) -> Int {
            guard let number = Int(value(name)), number >= 0 else { usageError("\(name) needs a non-negative integer") }
            return number
        }
        while let argument = iterator.next() {
            switch argument {
            case "--kills": kills = number(argument)
            case "--power-loss": powerLossRounds = number(argument)
            case "--corruption-seeds": corruptionSeeds = number(argument)
            case "--load-operations": loadOperations = number(argument)
            case "--load-threads": loadThreads = max(1, number(argument))
            case "--two-process-rounds": twoProcessRounds = number(argument)
            case "--fuzz-seconds": fuzzSeconds = number(argument)
            case "--fuzz-after": fuzzAlongside = false
            case "--only":
                phases = Set(value(argument).split(separator: ",").map(String.init))
                for phase in phases where Phase(rawValue: phase) == nil { usageError("unknown phase \(phase)") }
            case "--report": report = value(argument)
            case "--workspace": workspace = value(argument)
            case "--help", "-h":
                print(Self.usage)
                exit(0)
            default: usageError("unknown option \(argument)")
            }
        }
    }
}

func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("larder-torture: \(message)\n\(Options.usage)\n".utf8))
    exit(64)
}

enum Phase: String, CaseIterable, Sendable {
    case fast, durable, powerLoss = "power-loss", corruption, load, twoProcess = "two-process", fuzz
}

/// One phase's figures for the report.
struct PhaseRecord: Sendable {
    var phase: Phase
    var parameters: String
    var kills = 0
    var operations = 0
    var findings = Findings()
    var elapsed: Duration = .zero
    var details: String = ""
    var failed: Bool { !findings.isEmpty }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func clock(_ duration: Duration) -> String {
    let total = Int(seconds(duration).rounded())
    return String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60)
}

func log(_ line: String) {
    let time = ISO8601DateFormatter.string(from: Date(), timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withTime, .withColonSeparatorInTime])
    // Unbuffered, so a terminal or a log file sees each line as it happens.
    FileHandle.standardOutput.write(Data("[\(time)] \(line)\n".utf8))
}

@main
struct Torture {
    static func main() async {
        let options = Options(Array(CommandLine.arguments.dropFirst()))
        let root = packageRoot()
        let started = Date()
        let commit = commit(root: root)
        let start = ContinuousClock.now
        let workspace: URL
        let temporary: TemporaryDirectory?
        if let path = options.workspace {
            workspace = URL(fileURLWithPath: path)
            try? FileManager.default.createDirectory(at: workspace, withIntermediateDirectories: true)
            temporary = nil
        } else {
            do {
                temporary = try TemporaryDirectory("larder-torture")
            } catch {
                usageError("cannot create a temporary directory: \(error)")
            }
            workspace = temporary!.url
        }
        #if DEBUG
        log("warning: this is a debug build; use `swift run -c release larder-torture` for the real run")
        #endif
        log("larder-torture at \(commit): workspace \(workspace.path), phases \(Phase.allCases.filter { options.phases.contains($0.rawValue) }.map(\.rawValue).joined(separator: ", "))")

        // The fuzzer needs one core and the kill phases mostly wait, so by default it starts
        // first and runs alongside them.
        let fuzzAlongside = options.fuzzAlongside && options.phases.contains(Phase.fuzz.rawValue)
        async let alongside: PhaseRecord? = fuzzAlongside
            ? runPhase(.fuzz, options, workspace: workspace, root: root) : nil
        var records: [PhaseRecord] = []
        for phase in Phase.allCases where options.phases.contains(phase.rawValue) {
            if phase == .fuzz && fuzzAlongside { continue }
            records.append(await runPhase(phase, options, workspace: workspace, root: root))
        }
        if let fuzz = await alongside { records.append(fuzz) }
        let elapsed = ContinuousClock.now - start
        let failed = records.contains(where: \.failed)
        let markdown = report(records, options: options, started: started, commit: commit, elapsed: elapsed, workspace: workspace)
        let reportURL = URL(fileURLWithPath: options.report ?? root.appendingPathComponent("Tests/long-run/report.md").path)
        do {
            try FileManager.default.createDirectory(at: reportURL.deletingLastPathComponent(), withIntermediateDirectories: true)
            try markdown.write(to: reportURL, atomically: true, encoding: .utf8)
            log("report: \(reportURL.path)")
        } catch {
            log("cannot write the report to \(reportURL.path): \(error)")
            print(markdown)
        }
        log("\(failed ? "FAILED" : "all invariants held") in \(clock(elapsed))")
        withExtendedLifetime(temporary) {}
        exit(failed ? 1 : 0)
    }

    /// Runs one phase in its own directory and logs its outcome.
    static func runPhase(_ phase: Phase, _ options: Options, workspace: URL, root: URL) async -> PhaseRecord {
        let phaseStart = ContinuousClock.now
        let directory = workspace.appendingPathComponent(phase.rawValue)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var record: PhaseRecord
        do {
            record = try await run(phase, options, in: directory, root: root)
        } catch {
            record = PhaseRecord(phase: phase, parameters: "")
            record.findings.record(.broken, "\(phase.rawValue) stopped: \(error)")
        }
        record.elapsed = ContinuousClock.now - phaseStart
        try? FileManager.default.removeItem(at: directory)
        log("\(phase.rawValue): \(record.failed ? "FAILED" : "ok") in \(clock(record.elapsed)); \(record.details)")
        for violation in record.findings.violations.prefix(20) { log("  \(violation)") }
        return record
    }

    static func run(_ phase: Phase, _ options: Options, in directory: URL, root: URL) async throws -> PhaseRecord {
        switch phase {
        case .fast, .durable, .powerLoss:
            let plan: KillRounds.Plan = switch phase {
            case .fast: .fast(rounds: options.kills)
            case .durable: .durable(rounds: options.kills)
            default: .powerLoss(rounds: options.powerLossRounds)
            }
            var damage = PowerLoss.Damage()
            var random = CrashPayload.Generator(seed: 42)
            let progressEvery = max(10, plan.rounds / 40)
            log("\(phase.rawValue): \(plan.rounds) rounds (\(plan.durability), \(plan.options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")))")
            let result = try await KillRounds.run(plan, in: directory, progressEvery: progressEvery, progress: { log($0) }) { store in
                if phase == .powerLoss { try PowerLoss.simulate(on: store, random: &random, into: &damage) }
            }
            var record = PhaseRecord(phase: phase, parameters: "\(plan.rounds) rounds, durability \(plan.durability)")
            record.kills = result.kills
            record.operations = result.completedOperations
            record.findings = result.findings
            record.findings.check(result.kills == plan.rounds, .helper, "\(plan.rounds - result.kills) helpers exited before their kill")
            record.details = "\(result.kills) kills survived, \(result.completedOperations) completed operations, \(result.findings.keysChecked) key checks"
            if phase == .powerLoss {
                record.findings.check(damage.damagedBlobs > 0, .helper, "the simulation damaged no blob")
                record.details += ", \(damage.truncatedWALs) WAL tails cut, \(damage.damagedBlobs) blobs damaged"
            }
            return record

        case .corruption:
            var record = PhaseRecord(phase: phase, parameters: "20 cases, \(options.corruptionSeeds) seeds per seeded damage")
            var images = 0, hits = 0, misses = 0, thrown = 0
            for (index, (kind, damage)) in CorruptionMatrix.cases.enumerated() {
                let result = try CorruptionMatrix.run(kind, damage, seeds: 1...UInt64(max(options.corruptionSeeds, 1)), in: directory)
                images += result.images
                hits += result.hits
                misses += result.misses
                thrown += result.thrown
                record.findings.merge(result.findings)
                log("corruption \(index + 1)/20 \(kind.rawValue) \(damage.rawValue): \(result.images) images, \(result.hits) exact hits, \(result.misses) misses, \(result.thrown) thrown reads, \(result.findings.violations.count) violations")
            }
            record.operations = hits + misses + thrown
            record.details = "\(images) damaged images, \(hits) exact hits, \(misses) misses, \(thrown) thrown reads, \(record.findings.keysChecked) key checks"
            return record

        case .load:
            log("load: \(options.loadOperations) operations on \(options.loadThreads) threads")
            let result = try await offPool {
                try LoadRun.run(directory: directory.appendingPathComponent("store"), total: options.loadOperations,
                                threads: options.loadThreads, watchdog: .seconds(max(420, options.loadOperations / 200)),
                                progress: { log($0) })
            }
            var record = PhaseRecord(phase: phase, parameters: "\(options.loadThreads) threads × \(options.loadOperations / options.loadThreads) operations")
            record.operations = result.operations
            record.findings = result.findings
            record.details = "\(result.operations) operations in \(clock(result.elapsed)), \(result.damagedReads) damaged reads, \(result.errors) errors, \(result.limitBreaches) limit breaches, memory evictions \(result.memoryEvictions), disk evictions \(result.diskEvictions), \(result.diskEntries) disk entries checked"
            return record

        case .twoProcess:
            var record = PhaseRecord(phase: phase, parameters: "\(options.twoProcessRounds) rounds × \(TwoProcess.scenarios.count) scenarios")
            var reads = 0
            for round in 0..<options.twoProcessRounds {
                for scenario in TwoProcess.scenarios {
                    let workspace = directory.appendingPathComponent("\(round)-\(scenario)")
                    try FileManager.default.createDirectory(at: workspace, withIntermediateDirectories: true)
                    let result = try await TwoProcess.run(scenario, in: workspace, seedOffset: round * 100)
                    record.operations += result.helperOperations
                    reads += result.concurrentReads
                    record.findings.merge(result.findings)
                    try? FileManager.default.removeItem(at: workspace)
                }
                log("two-process: round \(round + 1)/\(options.twoProcessRounds), \(record.operations) helper operations, \(reads) concurrent reads, \(record.findings.violations.count) violations")
            }
            record.details = "\(record.operations) helper operations, \(reads) concurrent reads checked, \(record.findings.keysChecked) key checks"
            return record

        case .fuzz:
            var record = PhaseRecord(phase: phase, parameters: "\(options.fuzzSeconds) s of libFuzzer (Fuzz/run)\(options.fuzzAlongside ? ", alongside the other phases" : "")")
            guard options.fuzzSeconds > 0 else {
                record.details = "skipped"
                return record
            }
            log("fuzz: building and running Fuzz/run \(options.fuzzSeconds)")
            let child = try await withChildProcesses { scope in
                let child = try scope.start(URL(fileURLWithPath: "/bin/bash"),
                                            arguments: [root.appendingPathComponent("Fuzz/run").path, "\(options.fuzzSeconds)"])
                let fuzzStart = ContinuousClock.now
                while !(await child.waitForExit(timeout: .seconds(60))) {
                    log("fuzz: \(clock(ContinuousClock.now - fuzzStart)) elapsed of about \(clock(.seconds(options.fuzzSeconds))) (plus the build)")
                }
                await child.waitForOutput()
                return child
            }
            let output = child.standardOutput + child.standardError
            let executions = output.split(separator: "\n").first { $0.hasPrefix("stat::number_of_executed_units:") }
                .flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") } ?? 0
            let rate = output.split(separator: "\n").first { $0.hasPrefix("stat::average_exec_per_sec:") }
                .flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") } ?? 0
            record.operations = executions
            record.findings.keysChecked = executions
            record.findings.check(child.exitedCleanly, .broken, "Fuzz/run failed (\(child.termination.map { "\($0)" } ?? "?")): \(output.suffix(2_000))")
            record.findings.check(executions > 0, .helper, "the fuzzer reported no executions")
            record.details = "\(executions) inputs, \(rate) per second, under AddressSanitizer"
            return record
        }
    }

    /// Runs blocking work on a thread of its own, not on one of the two cooperative threads.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    static func packageRoot() -> URL {
        let fileManager = FileManager.default
        var candidates = [URL(fileURLWithPath: fileManager.currentDirectoryPath)]
        if let binary = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: binary).deletingLastPathComponent())
        }
        for candidate in candidates {
            var directory = candidate
            for _ in 0..<6 {
                if fileManager.fileExists(atPath: directory.appendingPathComponent("Package.swift").path),
                   fileManager.fileExists(atPath: directory.appendingPathComponent("Fuzz/run").path) {
                    return directory
                }
                directory = directory.deletingLastPathComponent()
            }
        }
        return URL(fileURLWithPath: fileManager.currentDirectoryPath)
    }
}
