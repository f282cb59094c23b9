#if ServiceLifecycle
import Foundation
import Larder
import LarderServiceLifecycle
import LarderTestSupport
import Logging
import ServiceLifecycle
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite(.timeLimit(.minutes(5)))
struct StorageServiceTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("lifecycle")
    }

    static var logger: Logger {
        var logger = Logger(label: "StorageServiceTests")
        logger.logLevel = .critical
        return logger
    }

    // MARK: - In process

    @Test func gracefulShutdownClosesTheStorageAfterTheServicesThatUseIt() async throws {
        // Given a storage with a value, run as a service in a group
        let storage = try Storage<String, String>(transformer: .string) { $0.directory = folder.url }
        try await storage.setValue("kept", forKey: "k")
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: StorageService(storage: storage))], logger: Self.logger))
        let running = Task { try await group.run() }

        // While the group runs the storage stays open
        try await Task.sleep(for: .milliseconds(50))
        try await storage.setValue("second", forKey: "k2")

        // When the group shuts down gracefully
        await group.triggerGracefulShutdown()
        try await running.value

        // Then the disk tier is closed, and a reopened storage has both values
        #expect(throws: StorageError.self) { try storage.setValue("late", forKey: "k3", tiers: .disk) }
        let reopened = try Storage<String, String>(transformer: .string) { $0.directory = folder.url }
        #expect(try await reopened.value(forKey: "k") == "kept")
        #expect(try await reopened.value(forKey: "k2") == "second")
    }

    @Test func aTierServiceClosesItsTierOnGracefulShutdown() async throws {
        // Given a disk tier used on its own, as a service
        let disk = try DiskStore(directory: folder.url)
        let service = StorageService(tier: disk)
        #expect(service.description == "Larder.disk")
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: Self.logger))
        let running = Task { try await group.run() }

        // When the group shuts down, then the tier refuses further work
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(throws: StorageError.self) { try disk.setValue(Data("x".utf8), forKey: "k") }
    }

    // MARK: - SIGTERM in a child process

    @Test func sigtermInAChildProcessLosesNoAcknowledgedWrite() async throws {
        let helper = try Self.helperURL
        try await withChildProcesses { scope in
            // Given a child writing through a storage in a ServiceGroup
            let child = try scope.start(helper, arguments: [folder.url.path])
            // When it has acknowledged some writes (polled: a loaded machine is slow)
            let deadline = ContinuousClock.now + .seconds(300)
            while Self.acknowledged(child.standardOutput).count < 50 && child.isRunning && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try #require(child.isRunning, "the helper exited early: \(child.standardError)")
            // and receives SIGTERM
            child.send(SIGTERM)
            await child.waitForOutput(timeout: .seconds(300))

            // Then it shut down cleanly, saying how many writes it acknowledged
            #expect(child.termination?.reason == .exit && child.termination?.status == 0, "\(child.standardError)")
            let acknowledged = Self.acknowledged(child.standardOutput)
            #expect(acknowledged.count >= 50)
            let closed = child.standardOutput.split(separator: "\n").first { $0.hasPrefix("closed ") }
            #expect(closed.map { String($0.dropFirst("closed ".count)) } == "\(acknowledged.count)")

            // and the index was closed cleanly (its write-ahead log checkpointed and
            // truncated), before anything reopens it
            let wal = folder.url.appendingPathComponent("index.sqlite-wal")
            let walSize = (try? FileManager.default.attributesOfItem(atPath: wal.path)[.size] as? Int) ?? 0
            #expect(walSize == 0)
            // and a storage reopened on the directory has every acknowledged write
            let reopened = try Storage<String, String>(transformer: .string) { $0.directory = folder.url }
            var missing: [Int] = []
            for index in acknowledged {
                let value = try await reopened.value(forKey: "k\(index)")
                if value != "value-\(index)" { missing.append(index) }
            }
            #expect(missing.isEmpty, "acknowledged writes lost: \(missing.prefix(10))")
        }
    }

    /// The indices `i` of the "ack k<i>" lines.
    static func acknowledged(_ output: String) -> [Int] {
        output.split(separator: "\n").compactMap { line in
            line.hasPrefix("ack k") ? Int(line.dropFirst("ack k".count)) : nil
        }
    }

    /// The helper SwiftPM builds next to the test binary.
    static var helperURL: URL {
        get throws {
            let binary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
            var directory = binary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("LarderLifecycleHelper")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "LarderLifecycleHelper next to \(binary.path)"])
        }
    }
}
#endif
