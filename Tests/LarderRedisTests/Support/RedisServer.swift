#if Redis
import Foundation
import LarderTestSupport
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real redis-server started by a test on a free loopback port, stopped by its PID.
///
/// Without the `redis-server` binary the suites that need one are disabled (and
/// `RedisAvailabilityTests` prints how many); with `CI=true` a missing binary fails.
struct RedisServer: Sendable {
    static let binary: String? = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static let cliBinary: String? = ["/usr/bin/redis-cli", "/usr/local/bin/redis-cli"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }
    /// Whether suites that need a server run: the binaries exist, or CI requires them (and fails).
    static var shouldRun: Bool { (binary != nil && cliBinary != nil) || isCI }
    /// Suites disabled when the binary is missing (kept by hand beside the suites).
    static let serverSuites = [
        "RedisStoreTests", "RedisTrackingTests", "RedisLeaseTests", "RedisAuthTests", "RedisMultiProcessTests", "RedisClusterTests",
        "RedisTLSTests",
    ]

    let process: ChildProcess
    let port: Int
    let scope: ChildProcessScope
    let extraArguments: [String]
    /// The password `cli` authenticates with, if the server requires one.
    let password: String?
    /// With certificates, the server speaks only TLS on ``port`` (`--port 0 --tls-port`), and
    /// `cli` connects with the CA and the client certificate.
    let certificates: TestCertificates?

    /// Starts redis-server in `scope` on a free port (or `port`) and waits until it answers.
    static func start(
        in scope: ChildProcessScope, port: Int? = nil, arguments: [String] = [], password: String? = nil,
        certificates: TestCertificates? = nil
    ) async throws -> RedisServer {
        guard let binary, cliBinary != nil else {
            Issue.record("redis-server is not installed (CI=true requires it): apt-get install -y redis-server")
            throw CancellationError()
        }
        var attempt = 1
        while true {
            let chosen = try port ?? freePort()
            let listen = certificates.map { certificates in
                ["--port", "0", "--tls-port", "\(chosen)", "--tls-cert-file", certificates.serverCertificate,
                 "--tls-key-file", certificates.serverKey, "--tls-ca-cert-file", certificates.authority]
            } ?? ["--port", "\(chosen)"]
            let args = listen + ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                 "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning"] + arguments
            let process = try scope.start(URL(fileURLWithPath: binary), arguments: args)
            let server = RedisServer(
                process: process, port: chosen, scope: scope, extraArguments: arguments, password: password,
                certificates: certificates)
            do {
                try await server.waitUntilAnswering()
                return server
            } catch let failure as TestFailure where port == nil && attempt < 3 && failure.description.contains("in use") {
                attempt += 1
            }
        }
    }

    /// SIGKILLs the server and waits until it is reaped.
    func kill() async {
        process.kill()
        await process.waitForExit()
    }

    /// A new server on the same port (after ``kill()``).
    func restart() async throws -> RedisServer {
        try await Self.start(in: scope, port: port, arguments: extraArguments, password: password, certificates: certificates)
    }

    private func waitUntilAnswering() async throws {
        // Generous: on a loaded machine this task may not be resumed for seconds.
        let end = ContinuousClock.now + .seconds(300)
        while ContinuousClock.now < end {
            if (try? cli("PING")) == "PONG" { return }
            if !process.isRunning {
                await process.waitForOutput(timeout: .seconds(5))
                throw TestFailure("redis-server exited: \(process.standardOutput) \(process.standardError)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        if (try? cli("PING")) == "PONG" { return }
        throw TestFailure("redis-server did not answer on port \(port) within 60 s")
    }

    /// Runs `redis-cli` with `arguments` against the server; its output, trimmed.
    func cli(_ arguments: String...) throws -> String {
        try cli(arguments)
    }

    func cli(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.cliBinary ?? "/usr/bin/redis-cli")
        var args = ["-h", "127.0.0.1", "-p", "\(port)"]
        if let password { args += ["--no-auth-warning", "-a", password] }
        if let certificates {
            args += ["--tls", "--cacert", certificates.authority, "--cert", certificates.clientCertificate,
                     "--key", certificates.clientKey]
        }
        process.arguments = args + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A loopback port nothing listens on now, below the kernel's ephemeral range when it can
    /// (see the memcached suites' `MemcachedServer.freePort()` for why).
    static func freePort() throws -> Int {
        let ephemeralStart = ephemeralPortRange()?.lowerBound ?? 32_768
        if ephemeralStart > 11_000 {
            for _ in 0..<500 {
                let candidate = Int.random(in: 10_000..<ephemeralStart)
                guard handedOut.withLock({ $0.insert(candidate).inserted }) else { continue }
                if let port = try bindLoopback(port: candidate) { return port }
            }
        }
        guard let port = try bindLoopback(port: 0) else { throw TestFailure("bind to a loopback port failed") }
        return port
    }

    private static let handedOut = Mutex<Set<Int>>([])

    static func ephemeralPortRange() -> ClosedRange<Int>? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else {
            return nil
        }
        let bounds = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return nil }
        return bounds[0]...bounds[1]
    }

    private static func bindLoopback(port: Int) throws -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 5 ms until it holds or `limit` passes (generous: a stalled machine
/// only makes it slower); whether it held.
func eventually(within limit: Duration = .seconds(300), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let end = ContinuousClock.now + limit
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try await condition()
}
#endif

#if Redis
/// A counter tasks share.
final class Tally: Sendable {
    private let atomic = Atomic<Int>(0)
    var value: Int { atomic.load(ordering: .relaxed) }
    func add(_ amount: Int = 1) { atomic.add(amount, ordering: .relaxed) }
}
#endif
