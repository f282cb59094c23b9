#if Memcached
import Foundation
import LarderTestSupport
import NIOCore
import NIOPosix
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real memcached server started by a test on a free loopback port, stopped by its PID.
///
/// Without the `memcached` binary the suites that need one are disabled (and
/// `MemcachedAvailabilityTests` prints how many); with `CI=true` a missing binary fails.
struct MemcachedServer: Sendable {
    static let binary: String? = ["/usr/bin/memcached", "/usr/local/bin/memcached", "/usr/sbin/memcached"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }
    /// Whether suites that need a server run: the binary exists, or CI requires it (and fails).
    static var shouldRun: Bool { binary != nil || isCI }
    /// Suites and tests disabled when the binary is missing (kept by hand beside the suites).
    static let serverSuites = ["MemcachedStoreTests (9 tests)", "MemcachedFaultTests (4 tests)", "StorageRemoteTests (14 tests)", "MemcachedMultiProcessTests (2 tests)", "MemcachedPoolTests (5 tests)", "MemcachedBatchWriteTests (6 tests)"]

    let process: ChildProcess
    let port: Int
    let scope: ChildProcessScope
    let extraArguments: [String]

    /// Starts memcached in `scope` on a free port (or `port`) and waits until it accepts. A
    /// port of its own choosing that another process took before memcached bound it is
    /// replaced by another (a few times); a given `port` is not.
    static func start(in scope: ChildProcessScope, port: Int? = nil, arguments: [String] = []) async throws -> MemcachedServer {
        guard let binary else {
            Issue.record("memcached is not installed (CI=true requires it): apt-get install -y memcached")
            throw CancellationError()
        }
        var attempt = 1
        while true {
            let chosen = try port ?? freePort()
            var args = ["-l", "127.0.0.1", "-p", "\(chosen)", "-U", "0", "-m", "64", "-t", "2"] + arguments
            if getuid() == 0 { args += ["-u", "root"] }
            let process = try scope.start(URL(fileURLWithPath: binary), arguments: args)
            let server = MemcachedServer(process: process, port: chosen, scope: scope, extraArguments: arguments)
            do {
                try await server.waitUntilAccepting()
                return server
            } catch let failure as TestFailure where port == nil && attempt < 3 && failure.description.contains("in use") {
                attempt += 1
            }
        }
    }

    /// Starts `count` servers in `scope` (a pool), each as ``start(in:port:arguments:)`` does.
    static func start(_ count: Int, in scope: ChildProcessScope) async throws -> [MemcachedServer] {
        var servers: [MemcachedServer] = []
        for _ in 0..<count { servers.append(try await start(in: scope)) }
        return servers
    }

    /// SIGKILLs the server and waits until it is reaped.
    func kill() async {
        process.kill()
        await process.waitForExit()
    }

    /// A new server on the same port (after ``kill()``).
    func restart() async throws -> MemcachedServer {
        try await Self.start(in: scope, port: port, arguments: extraArguments)
    }

    private func waitUntilAccepting() async throws {
        // Generous, and checked once more after the deadline: on a loaded machine this task
        // may not be resumed for seconds, which is no fault of the server.
        let end = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < end {
            if Self.canConnect(port: port) { return }
            if !process.isRunning {
                await process.waitForOutput(timeout: .seconds(5))
                throw TestFailure("memcached exited: \(process.standardError)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        if Self.canConnect(port: port) { return }
        throw TestFailure("memcached did not accept on port \(port) within 60 s")
    }

    static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// A loopback port nothing listens on now, below the kernel's ephemeral range when it can.
    ///
    /// A port the kernel hands out for port 0 comes from the ephemeral range, which is also
    /// where outgoing connections take their local ports: between its release here and
    /// memcached's bind, or while a killed server is down and clients keep reconnecting to it,
    /// one of them could take it (and a client reconnecting from that very port connects to
    /// itself). Below the range no outgoing connection goes; a port is handed out once per
    /// process, so two servers of this process never race for one.
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

    /// Ports ``freePort()`` returned in this process.
    private static let handedOut = Mutex<Set<Int>>([])

    /// `net.ipv4.ip_local_port_range`, if readable.
    static func ephemeralPortRange() -> ClosedRange<Int>? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else {
            return nil
        }
        let bounds = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return nil }
        return bounds[0]...bounds[1]
    }

    /// Binds a socket to 127.0.0.1:`port` and releases it; the port bound (the kernel's
    /// choice for 0), or `nil` when the bind failed.
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

/// Runs a raw command against a server with a fresh connection (for tests that must write
/// bytes Larder never would, or read the server's TTL).
func rawExchange(port: Int, _ request: [UInt8]) throws -> String {
    String(decoding: try rawExchange(port: port, request) { $0.contains(0x0A) }, as: UTF8.self)
}

/// Sends `request` and reads until `isComplete` says the reply is whole (or the peer closes).
func rawExchange(port: Int, _ request: [UInt8], isComplete: ([UInt8]) -> Bool) throws -> [UInt8] {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    guard connected else { throw TestFailure("connect failed") }
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw TestFailure("send failed") }
        sent += n
    }
    var reply = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while !isComplete(reply) {
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { break }
        reply += buffer[0..<n]
    }
    return reply
}
#endif
#if Memcached
import Synchronization

/// A counter tasks share (an `Atomic` cannot be captured by an escaping closure).
final class Tally: Sendable {
    private let atomic: Atomic<Int>
    init(_ value: Int = 0) { atomic = Atomic(value) }
    var value: Int { atomic.load(ordering: .relaxed) }
    func add(_ amount: Int = 1) { atomic.add(amount, ordering: .relaxed) }
    func store(_ value: Int) { atomic.store(value, ordering: .relaxed) }
    func max(_ value: Int) { _ = atomic.max(value, ordering: .relaxed) }
}
#endif
