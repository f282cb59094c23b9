import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Get-or-load: one loader per key in flight, each caller cancellable on its own, errors cached
/// only when asked.
@Suite(.timeLimit(.minutes(10)))
struct StorageLoadTests {
    struct LoadFailed: Error, Equatable {
        var attempt: Int
    }

    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("load")
    }

    func makeStorage() throws -> Storage<String, String> {
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("cache"))
        configuration.now = clock.closure
        return try Storage(configuration: configuration, transformer: .string)
    }

    @Test func fiftyCallersForAMissingKeyShareOneLoaderAndItsValueIsStored() async throws {
        // Given a loader that waits at a gate and counts its runs
        let storage = try makeStorage()
        let gate = AsyncGate()
        let runs = AsyncCounter()
        // When 50 callers ask for the same missing key
        let values = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await storage.value(forKey: "k", expiry: .seconds(60)) { key in
                        runs.increment()
                        try await gate.wait()
                        return "loaded \(key)"
                    }
                }
            }
            while storage.loads.waiterCount(for: "k") < 50 { await Task.yield() }
            gate.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        // Then the loader ran once and every caller got its value
        #expect(runs.value == 1)
        #expect(values == Array(repeating: "loaded k", count: 50))
        // And the value is cached in both tiers with its expiry
        #expect(storage.memory.value(forKey: "k") == "loaded k")
        #expect(try storage.disk!.entry(forKey: "k")?.expirationDate == clock.now.addingTimeInterval(60))
        #expect(storage.statistics.loads == 1)
    }

    @Test func aCachedValueNeverRunsTheLoader() async throws {
        let storage = try makeStorage()
        try await storage.setValue("cached", forKey: "k", tiers: .disk)
        let value = try await storage.value(forKey: "k") { _ -> String in
            Issue.record("the loader ran for a cached key")
            return "loaded"
        }
        #expect(value == "cached")
        #expect(storage.statistics[.disk].hits == 1)
        #expect(storage.statistics.loads == 0)
    }

    @Test func errorsAreNotCachedUnlessAFailureExpiryIsGiven() async throws {
        let storage = try makeStorage()
        let attempts = Locked(0)
        let failing: @Sendable (String) async throws -> String = { _ in
            let attempt = attempts.withLock { $0 += 1; return $0 }
            throw LoadFailed(attempt: attempt)
        }
        // Without a failure expiry every call runs the loader again
        await #expect(throws: LoadFailed(attempt: 1)) { try await storage.value(forKey: "k", orLoad: failing) }
        await #expect(throws: LoadFailed(attempt: 2)) { try await storage.value(forKey: "k", orLoad: failing) }
        // With one, the error is answered at once until it expires
        await #expect(throws: LoadFailed(attempt: 3)) {
            try await storage.value(forKey: "k", failureExpiry: .seconds(30), orLoad: failing)
        }
        await #expect(throws: LoadFailed(attempt: 3)) {
            try await storage.value(forKey: "k", failureExpiry: .seconds(30), orLoad: failing)
        }
        #expect(attempts.withLock { $0 } == 3)
        clock.advance(by: 31)
        await #expect(throws: LoadFailed(attempt: 4)) {
            try await storage.value(forKey: "k", failureExpiry: .seconds(30), orLoad: failing)
        }
        // And a remembered failure can be forgotten
        storage.forgetFailure(forKey: "k")
        let value = try await storage.value(forKey: "k", failureExpiry: .seconds(30)) { _ in "recovered" }
        #expect(value == "recovered")
        #expect(try await storage.value(forKey: "k") == "recovered")
    }

    @Test func oneCancelledCallerLeavesTheOthersAndTheLoaderRunning() async throws {
        let storage = try makeStorage()
        let gate = AsyncGate()
        let loaderSawCancellation = Locked(false)
        let loader: @Sendable (String) async throws -> String = { _ in
            do {
                try await gate.wait()
            } catch {
                loaderSawCancellation.withLock { $0 = true }
                throw error
            }
            return "v"
        }
        let leaving = Task { try await storage.value(forKey: "k", orLoad: loader) }
        let staying = Task { try await storage.value(forKey: "k", orLoad: loader) }
        while storage.loads.waiterCount(for: "k") < 2 { await Task.yield() }
        // When one caller is cancelled
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.value }
        // Then the other still gets the value, and the loader was never cancelled
        gate.open()
        #expect(try await staying.value == "v")
        #expect(!loaderSawCancellation.withLock { $0 })
    }

    @Test func cancellingEveryCallerCancelsTheLoaderAndStoresNothing() async throws {
        let storage = try makeStorage()
        let gate = AsyncGate()
        let cancelled = AsyncCounter()
        let loader: @Sendable (String) async throws -> String = { _ in
            do { try await gate.wait() } catch {
                cancelled.increment()
                throw error
            }
            return "v"
        }
        let callers = (0..<3).map { _ in Task { try await storage.value(forKey: "k", orLoad: loader) } }
        while storage.loads.waiterCount(for: "k") < 3 { await Task.yield() }
        for caller in callers { caller.cancel() }
        await cancelled.wait(until: 1)
        for caller in callers { await #expect(throws: CancellationError.self) { try await caller.value } }
        #expect(try await storage.value(forKey: "k") == nil)
        #expect(storage.loads.operationCount == 0)
    }
}
