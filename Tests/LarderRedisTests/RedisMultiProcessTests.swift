#if Redis
import Foundation
import Larder
@testable import LarderRedis
import LarderTestSupport
import Testing

/// Real processes share one server: the lock makes one loader run across all of them, and a
/// write reaches every other process's memory tier as a pushed invalidation.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisMultiProcessTests {
    static var helper: URL {
        get throws {
            let binary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
            var directory = binary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("LarderRedisHelper")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
            throw TestFailure("LarderRedisHelper not found next to \(binary.path)")
        }
    }

    /// 4 processes × 32 tasks ask for 3 keys at once: each key's loader runs once.
    @Test func aStampedeOfFourProcessesTimes32TasksRunsTheLoaderOncePerKey() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let keys = ["hot-a", "hot-b", "hot-c"]
            let directory = try TemporaryDirectory()
            let countFile = directory.url.appendingPathComponent("calls").path
            let start = Int((Date().timeIntervalSince1970 + 1.5) * 1000)
            let helpers = try (0..<4).map { _ in
                try scope.start(try Self.helper, arguments: [
                    "stampede", "\(server.port)", keys.joined(separator: ","), countFile, "32", "\(start)",
                ])
            }
            for helper in helpers {
                #expect(await helper.waitForExit(timeout: .seconds(300)))
                #expect(helper.exitedCleanly, "\(helper.standardError)")
                await helper.waitForOutput()
                #expect(helper.standardOutput.contains("values \(32 * keys.count) computed"), "\(helper.standardOutput)")
            }
            let calls = (try? String(contentsOfFile: countFile, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
            for key in keys {
                #expect(calls.filter { $0 == key }.count == 1, "the loader of \(key) ran \(calls.filter { $0 == key }.count) times across 4 processes")
            }
        }
    }

    /// This process writes 200 keys that 3 other processes hold in memory; each of them drops
    /// every copy and then reads the new value. Records write→drop latency (not asserted: a
    /// loaded machine only makes it slower).
    @Test func aWriteDropsTheCopiesOfThreeOtherProcessesAndTheLatencyIsRecorded() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let count = 200
            let store = try await RedisStore.connect(configuration: .init(port: server.port, namespace: "lat:", deadline: .seconds(300)))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            for index in 0..<count { try await storage.setValue("old-\(index)", forKey: "k\(index)", expiry: .seconds(3_600)) }
            let followers = try (0..<3).map { _ in
                try scope.start(try Self.helper, arguments: ["follow", "\(server.port)", "\(count)"])
            }
            for follower in followers {
                let ready = await follower.waitForOutputLine(prefix: "ready", timeout: .seconds(300))
                #expect(ready == " \(count)", "\(follower.standardOutput) \(follower.standardError)")
            }
            var writtenAt: [String: Int64] = [:]
            for index in 0..<count {
                writtenAt["k\(index)"] = Int64(Date().timeIntervalSince1970 * 1_000_000)
                try await storage.setValue("new-\(index)", forKey: "k\(index)", expiry: .seconds(3_600))
                try await Task.sleep(for: .milliseconds(2))
            }
            var latencies: [Int64] = []
            for follower in followers {
                #expect(await follower.waitForExit(timeout: .seconds(300)))
                #expect(follower.exitedCleanly, "\(follower.standardError)")
                await follower.waitForOutput()
                let lines = follower.standardOutput.split(separator: "\n")
                let drops = lines.filter { $0.hasPrefix("dropped ") }.map { $0.split(separator: " ") }
                #expect(drops.count == count, "\(lines.filter { !$0.hasPrefix("dropped") })")
                for drop in drops where drop.count == 3 {
                    if let at = Int64(drop[2]), let written = writtenAt[String(drop[1])] { latencies.append(at - written) }
                }
                #expect(lines.contains("memory 0"))
                #expect(lines.contains("fresh \(count)"), "a process read an old value after the write")
            }
            latencies.sort()
            if !latencies.isEmpty {
                let p50 = latencies[latencies.count / 2], p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
                let line = "redis invalidation latency (write start → other process's copy dropped), 4 processes, n=\(latencies.count): p50 \(Double(p50) / 1000) ms, p99 \(Double(p99) / 1000) ms, max \(Double(latencies.last!) / 1000) ms"
                print(line)
                try? line.write(toFile: NSTemporaryDirectory() + "larder-redis-invalidation-latency.txt", atomically: true, encoding: .utf8)
            }
            await store.close()
        }
    }
}
#endif
