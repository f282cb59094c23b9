import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Two and four real processes on one directory (the crash helper's `coherence` modes), each
/// with a `Storage` whose memory follows the directory: after every completed write or removal
/// in one process, the next read of that key in every other process returns the new state, and
/// `insertValue` over stale memory copies has exactly one winner per key.
///
/// `LARDER_COHERENCE_OPERATIONS` sets the operations of each run, shared among its processes
/// (default 50,000: 100,000 over the two runs).
@Suite(.serialized, .timeLimit(.minutes(10)))
struct StorageCoherenceProcessTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("coherence-processes")
    }

    static var operationsPerRun: Int {
        ProcessInfo.processInfo.environment["LARDER_COHERENCE_OPERATIONS"].flatMap(Int.init) ?? 50_000
    }

    /// What one helper reported.
    struct Report {
        var operations = 0, reads = 0, memory = 0, stale = 0, wrong = 0
        var details: [String] = []

        init(_ output: String) {
            for line in output.split(separator: "\n") {
                if line.hasPrefix("stale ") || line.hasPrefix("wrong ") { details.append(String(line)) }
                guard line.hasPrefix("done ") else { continue }
                for field in line.dropFirst(5).split(separator: " ") {
                    let parts = field.split(separator: "=")
                    guard parts.count == 2, let value = Int(parts[1]) else { continue }
                    switch parts[0] {
                    case "operations": operations = value
                    case "reads": reads = value
                    case "memory": memory = value
                    case "stale": stale = value
                    case "wrong": wrong = value
                    default: break
                    }
                }
            }
        }
    }

    func runMixed(processes: Int) async throws {
        let directory = folder.url.appendingPathComponent("mixed-\(processes)")
        let board = folder.url.appendingPathComponent("board-\(processes)")
        let keys = 32
        #expect(FileManager.default.createFile(atPath: board.path, contents: Data(count: processes * keys * 8)))
        // The directory exists with its index before the helpers race to open it.
        try DiskStore(directory: directory).close()
        let operations = max(1, Self.operationsPerRun / processes)
        let reports = try await withChildProcesses { scope in
            let children = try (0..<processes).map { index in
                try CrashHelper.start(in: scope, [
                    "coherence", directory.path, board.path, "\(index)", "\(processes)", "\(operations)", "\(keys)",
                ])
            }
            for child in children {
                #expect(await child.waitForOutputLine(prefix: "ready", timeout: .seconds(300)) != nil, "\(child.standardError)")
            }
            #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("go").path, contents: Data()))
            for child in children {
                #expect(await child.waitForExit(timeout: .seconds(540)))
                #expect(child.exitedCleanly, "\(child.standardError)")
            }
            return children.map { Report($0.standardOutput) }
        }
        let total = reports.reduce(into: (operations: 0, reads: 0, memory: 0, stale: 0, wrong: 0)) {
            $0.operations += $1.operations
            $0.reads += $1.reads
            $0.memory += $1.memory
            $0.stale += $1.stale
            $0.wrong += $1.wrong
        }
        // Every helper ran to the end, read, and served some reads from memory.
        #expect(total.operations == operations * processes)
        #expect(total.reads > total.operations / 2)
        #expect(total.memory > 0)
        #expect(total.stale == 0, "\(reports.flatMap(\.details).prefix(20))")
        #expect(total.wrong == 0, "\(reports.flatMap(\.details).prefix(20))")
        print("coherence.processes \(processes): \(total.operations) operations, \(total.reads) reads (\(total.memory) from memory), \(total.stale) stale, \(total.wrong) wrong")
    }

    @Test func twoProcessesNeverReadAStateOlderThanTheLastCompletedChange() async throws {
        try await runMixed(processes: 2)
    }

    @Test func fourProcessesNeverReadAStateOlderThanTheLastCompletedChange() async throws {
        try await runMixed(processes: 4)
    }

    @Test func insertsOverStaleMemoryCopiesHaveExactlyOneWinnerPerKey() async throws {
        // Given every helper holds the keys in memory, When this process removes them and the
        // helpers race to insert them, Then each key has exactly one winner (no false duplicate).
        let directory = folder.url.appendingPathComponent("create")
        let keys = 100
        let parent = try Storage<String, String>(configuration: .init(directory: directory), transformer: .string)
        for index in 0..<keys { try await parent.setValue("before", forKey: "c\(index)") }
        let outputs = try await withChildProcesses { scope in
            let children = try (0..<4).map { index in
                try CrashHelper.start(in: scope, ["coherence-create", directory.path, "p\(index)", "\(keys)"])
            }
            for child in children {
                #expect(await child.waitForOutputLine(prefix: "primed", timeout: .seconds(300)) != nil, "\(child.standardError)")
            }
            for index in 0..<keys { #expect(try await parent.removeValue(forKey: "c\(index)")) }
            #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("go").path, contents: Data()))
            for child in children {
                #expect(await child.waitForExit(timeout: .seconds(300)))
                #expect(child.exitedCleanly, "\(child.standardError)")
            }
            return children.map(\.standardOutput)
        }
        var winners: [String: [Int]] = [:]
        for (index, output) in outputs.enumerated() {
            for line in output.split(separator: "\n") where line.hasPrefix("won ") {
                winners[String(line.dropFirst(4)), default: []].append(index)
            }
        }
        #expect(winners.count == keys)
        #expect(winners.values.allSatisfy { $0.count == 1 })
        // And the stored value is the winner's, in this process too.
        for (key, processes) in winners where processes.count == 1 {
            #expect(try await parent.value(forKey: key) == "p\(processes[0])")
        }
    }
}
