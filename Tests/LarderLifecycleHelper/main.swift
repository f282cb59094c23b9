// The child process of the lifecycle test: a `ServiceGroup` that runs a `StorageService` and a
// writer service until SIGTERM.
//
// Usage: LarderLifecycleHelper <directory>
//
// The writer stores "value-<i>" under "k<i>" (i = 0, 1, …), reads an earlier key back after
// every tenth write (so the disk tier has access order pending), and prints "ack k<i>" after
// each write returned. On SIGTERM the group shuts the writer down first, then the storage
// service, which closes the storage; the helper prints "closed <acknowledged writes>" and
// exits 0.
#if ServiceLifecycle
import Foundation
import Larder
import LarderServiceLifecycle
import Logging
import ServiceLifecycle
import UnixSignals

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: LarderLifecycleHelper <directory>\n".utf8))
    exit(2)
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

// Exits as soon as the test runner that started this helper is gone, so no orphan keeps writing.
let expectedParent = ProcessInfo.processInfo.environment["LARDER_PARENT_PID"].flatMap(Int32.init) ?? getppid()
Thread.detachNewThread {
    while true {
        if getppid() != expectedParent { _exit(75) }
        usleep(100_000)
    }
}

/// Writes keys until graceful shutdown; counts the writes that returned.
struct Writer: Service {
    let storage: Storage<String, String>
    let acknowledged: @Sendable (Int) -> Void

    func run() async throws {
        var index = 0
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try await storage.setValue("value-\(index)", forKey: "k\(index)")
            say("ack k\(index)")
            acknowledged(index + 1)
            if index % 10 == 0 { _ = try await storage.value(forKey: "k\(index / 2)") }
            index += 1
        }
    }
}

final class Count: @unchecked Sendable {
    // Written by the writer task only, read after the group returned.
    var value = 0
}

do {
    let storage = try Storage<String, String>(transformer: .string) {
        $0.directory = URL(fileURLWithPath: arguments[1])
    }
    let count = Count()
    var logger = Logger(label: "LarderLifecycleHelper")
    logger.logLevel = .notice
    let group = ServiceGroup(
        configuration: .init(
            services: [
                // The storage first: the group shuts down in reverse order, so the writer stops
                // before the storage closes.
                .init(service: StorageService(storage: storage)),
                .init(service: Writer(storage: storage) { count.value = $0 }),
            ],
            gracefulShutdownSignals: [.sigterm],
            logger: logger))
    try await group.run()
    say("closed \(count.value)")
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
#endif
