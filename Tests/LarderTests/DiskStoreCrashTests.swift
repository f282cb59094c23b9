import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Real child processes, killed with SIGKILL in the middle of their write loops.
@Suite(.timeLimit(.minutes(5)), .serialized)
struct DiskStoreCrashTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("disk-crash")
    }

    /// Checks promise 1 for every key in the log: a read returns the last completed write or
    /// the write that was in flight at the kill — never other bytes. A miss is allowed only
    /// for a key with no completed write.
    static func verify(_ store: DiskStore, against log: CrashHelper.LogState, seed: UInt64) throws {
        let keys = Set(log.completed.keys).union(log.inFlight.keys)
        for key in keys {
            let data = try store.data(forKey: key)
            guard let data else {
                #expect(log.completed[key] == nil, "seed \(seed): \(key) lost its completed write \(log.completed[key] ?? -1)")
                continue
            }
            let decoded = CrashPayload.verify(data)
            #expect(decoded?.key == key, "seed \(seed): \(key) returned damaged or foreign bytes")
            let allowed = [log.completed[key], log.inFlight[key]].compactMap { $0 }
            #expect(allowed.contains(decoded?.generation ?? -1),
                    "seed \(seed): \(key) returned generation \(decoded?.generation ?? -1), allowed \(allowed)")
        }
    }

    @Test(arguments: ["fast", "durable"])
    func killedWriterLeavesOnlyCompleteValues(durability: String) throws {
        let kills = ProcessInfo.processInfo.environment["LARDER_CRASH_KILLS"].flatMap(Int.init) ?? 6
        let log = folder.url.appendingPathComponent("log-\(durability)")
        let directory = folder.url.appendingPathComponent("store-\(durability)")
        var completed = 0
        for round in 0..<kills {
            // Given a helper writing and overwriting 40 keys in a loop
            let seed = UInt64(round + 1) &* 0x9E37_79B9 &+ UInt64(durability.count)
            let process = try CrashHelper.start(directory: directory, log: log, seed: seed, durability: durability)
            // When it is killed at a random moment
            Thread.sleep(forTimeInterval: Double.random(in: 0.15...0.4))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal, "seed \(seed): the helper exited on its own")
            // Then a reopened store returns only complete values, consistent with the log
            let state = try CrashHelper.readLog(log)
            completed = state.completedWrites
            var configuration = DiskStore.Configuration()
            configuration.logHandler = nil
            let store = try DiskStore(directory: directory, configuration: configuration)
            try Self.verify(store, against: state, seed: seed)
            // And the totals match the entries that are there
            let keys = try store.keys()
            var size = 0
            for key in keys { size += try #require(try store.entry(forKey: key)).size }
            #expect(store.totalCount == keys.count)
            #expect(store.totalSize == size)
            store.close()
        }
        #expect(completed > kills, "the helper completed only \(completed) writes in \(kills) rounds")
    }

    @Test func twoProcessesWriteOneDirectory() throws {
        // Given two helpers writing disjoint keys to one directory at the same time
        let directory = folder.url.appendingPathComponent("shared")
        let logA = folder.url.appendingPathComponent("log-a")
        let logB = folder.url.appendingPathComponent("log-b")
        let a = try CrashHelper.start(directory: directory, log: logA, seed: 11, prefix: "a", keyCount: 30, iterations: 300)
        let b = try CrashHelper.start(directory: directory, log: logB, seed: 22, prefix: "b", keyCount: 30, iterations: 300)
        // And this process reading and writing the same directory meanwhile
        var configuration = DiskStore.Configuration()
        configuration.logHandler = nil
        let store = try DiskStore(directory: directory, configuration: configuration)
        var local = 0
        while a.isRunning || b.isRunning {
            try store.setData(Data("local \(local)".utf8), forKey: "local")
            if let data = try store.data(forKey: "a\(local % 30)") {
                #expect(CrashPayload.verify(data)?.key == "a\(local % 30)")
            }
            local += 1
        }
        a.waitUntilExit()
        b.waitUntilExit()
        #expect(a.terminationStatus == 0 && b.terminationStatus == 0)
        // Then every key holds its last write from the process that owns it
        for log in [logA, logB] {
            let state = try CrashHelper.readLog(log)
            #expect(state.completedWrites == 300)
            #expect(state.inFlight.isEmpty)
            for (key, generation) in state.completed {
                let data = try #require(try store.data(forKey: key),
                    "\(key) gen \(generation) missing; statistics \(store.statistics)")
                #expect(CrashPayload.verify(data)?.generation == generation)
            }
        }
        #expect(try store.data(forKey: "local") == Data("local \(local - 1)".utf8))
        #expect(try store.totalCount == store.keys().count)
    }
}
