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
    static let serverSuites = ["MemcachedStoreTests (9 tests)", "MemcachedFaultTests (4 tests)", "StorageRemoteTests (11 tests)", "MemcachedMultiProcessTests (1 test)"]

    let process: ChildProcess
    let port: Int
    let scope: ChildProcessScope
    let extraArguments: [String]

    /// Starts memcached in `scope` on a free port (or `port`) and waits until it accepts.
    static func start(in scope: ChildProcessScope, port: Int? = nil, arguments: [String] = []) async throws -> MemcachedServer {
        guard let binary else {
            Issue.record("memcached is not installed (CI=true requires it): apt-get install -y memcached")
            throw CancellationError()
        }
        let port = try port ?? freePort()
        var args = ["-l", "127.0.0.1", "-p", "\(port)", "-U", "0", "-m", "64", "-t", "2"] + arguments
        if getuid() == 0 { args += ["-u", "root"] }
        let process = try scope.start(URL(fileURLWithPath: binary), arguments: args)
        let server = MemcachedServer(process: process, port: port, scope: scope, extraArguments: arguments)
        try await server.waitUntilAccepting()
        return server
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

    /// A port nothing listens on now (bound to port 0, then released).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestFailure("bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
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
