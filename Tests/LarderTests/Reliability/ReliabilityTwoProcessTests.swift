import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Two helper processes and this one on one directory at the same time: disjoint keys, the
/// same keys, removes and cross-process eviction. Every read during the run returns intact
/// bytes of its own key; afterwards every key holds the last write of some process.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ReliabilityTwoProcessTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-two-process")
    }

    /// Reads and writes from this process until both helpers exit; returns the reads checked.
    func interleave(_ store: DiskStore, with helpers: [Process], keys: [String]) async throws -> Int {
        var step = 0
        var reads = 0
        while helpers.contains(where: \.isRunning) {
            try store.setValue(CrashPayload.make(key: "local", generation: step + 1, size: step % 5_000), forKey: "local")
            let key = keys[step % keys.count]
            if let data = try store.value(forKey: key) {
                #expect(CrashPayload.verify(data)?.key == key, "a concurrent read of \(key) returned damaged or foreign bytes")
                reads += 1
            }
            step += 1
        }
        for helper in helpers {
            await helper.waitForExit()
            #expect(helper.terminationReason == .exit && helper.terminationStatus == 0, "a helper failed")
        }
        #expect(try store.value(forKey: "local") == CrashPayload.make(key: "local", generation: step, size: (step - 1) % 5_000))
        return reads
    }

    @Test func disjointWritersEachKeepTheirLastWrite() async throws {
        // Given two helpers writing disjoint keys, and this process reading theirs
        let directory = folder.url.appendingPathComponent("disjoint")
        let logs = ["a", "b"].map { folder.url.appendingPathComponent("log-\($0)") }
        let helpers = try zip(["a", "b"], logs).enumerated().map { index, pair in
            try CrashHelper.startWriter(directory: directory, log: pair.1,
                                        ["seed": "\(index + 11)", "prefix": pair.0, "keys": "30", "iterations": "400"])
        }
        let store = try DiskStore(directory: directory, configuration: Reliability.configuration())
        let reads = try await interleave(store, with: helpers, keys: (0..<30).flatMap { ["a\($0)", "b\($0)"] })
        // Then every key holds exactly the last write of the process that owns it
        for log in logs {
            let state = try CrashHelper.readLog(log)
            #expect(state.completedWrites == 400 && state.inFlight.isEmpty)
            for (key, generation) in state.completed {
                let data = try #require(try store.value(forKey: key))
                #expect(CrashPayload.verify(data)?.generation == generation)
            }
        }
        try Reliability.expectTotalsExact(store, "disjoint")
        print("reliability.two-process disjoint: 800 helper writes, \(reads) concurrent reads checked")
    }

    @Test func writersOfTheSameKeysLeaveOneOfTheirLastWrites() async throws {
        // Given two helpers writing and removing the same keys
        let directory = folder.url.appendingPathComponent("shared")
        let logs = ["a", "b"].map { folder.url.appendingPathComponent("shared-log-\($0)") }
        let helpers = try logs.enumerated().map { index, log in
            try CrashHelper.startWriter(directory: directory, log: log,
                                        ["seed": "\(index + 21)", "prefix": "s", "keys": "20", "iterations": "400", "removeEvery": "6"])
        }
        let store = try DiskStore(directory: directory, configuration: Reliability.configuration())
        let reads = try await interleave(store, with: helpers, keys: (0..<20).map { "s\($0)" })
        // Then each key holds the last completed operation of one of the two processes
        let states = try logs.map(CrashHelper.readLog)
        for index in 0..<20 {
            let key = "s\(index)"
            let allowed = Set(states.compactMap { $0.completed[key] })
            let data = try store.value(forKey: key)
            let generation = data.map { CrashPayload.verify($0)?.key == key ? CrashPayload.verify($0)?.generation ?? -1 : -1 } ?? 0
            #expect(allowed.contains(generation), "\(key) holds \(generation), allowed \(allowed.sorted())")
        }
        try Reliability.expectTotalsExact(store, "shared")
        print("reliability.two-process shared: 800 helper operations, \(reads) concurrent reads checked")
    }

    @Test func evictionAcrossProcessesKeepsTheLimits() async throws {
        // Given two helpers whose writes overflow a shared count limit
        let directory = folder.url.appendingPathComponent("evicting")
        let helpers = try (0..<2).map { index in
            try CrashHelper.startWriter(directory: directory, log: folder.url.appendingPathComponent("evict-log-\(index)"),
                                        ["seed": "\(index + 31)", "prefix": "e\(index)-", "keys": "40", "iterations": "300",
                                         "countLimit": "25"])
        }
        let store = try DiskStore(directory: directory, configuration: Reliability.configuration { $0.countLimit = 25 })
        let reads = try await interleave(store, with: helpers, keys: (0..<40).flatMap { ["e0-\($0)", "e1-\($0)"] })
        // Then the totals are exact and within the limit, and every survivor is intact
        let keys = try Reliability.expectTotalsExact(store, "evicting")
        #expect(keys.count <= 25)
        for key in keys {
            let data = try #require(try store.value(forKey: key))
            #expect(CrashPayload.verify(data)?.key == key)
        }
        print("reliability.two-process evicting: 600 helper writes, \(reads) concurrent reads checked")
    }

    @Test func processesOpeningANewDirectoryTogetherShareOneIndex() async throws {
        // Given two helpers creating the same new directory at the same moment (five times)
        for round in 0..<5 {
            let directory = folder.url.appendingPathComponent("fresh-\(round)")
            let helpers = try (0..<2).map { index in
                try CrashHelper.startWriter(directory: directory, log: folder.url.appendingPathComponent("fresh-\(round)-\(index)"),
                                            ["seed": "\(index + 1)", "prefix": "f\(index)-", "keys": "5", "iterations": "20"])
            }
            for helper in helpers {
                await helper.waitForExit()
                // Both could open the new store (switching it to WAL raced: SQLITE_BUSY)
                #expect(helper.terminationReason == .exit && helper.terminationStatus == 0,
                        "round \(round): a helper could not open the new store")
            }
            // Then neither took the other's new index for a foreign one and moved it aside:
            // both processes' writes are in the one index
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            #expect(!names.contains { $0.contains(".corrupt-") }, "round \(round): \(names.sorted())")
            let store = try DiskStore(directory: directory, configuration: Reliability.configuration())
            let keys = try store.keys()
            #expect(keys.contains { $0.hasPrefix("f0-") } && keys.contains { $0.hasPrefix("f1-") }, "round \(round): \(keys)")
        }
    }
}
