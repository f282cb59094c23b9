import Larder
import Synchronization
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 and an ephemeral port, for fetcher tests.
///
/// One thread accepts; each connection gets its own thread, reads the request head, asks the
/// handler for a response, waits its delay, writes it and closes. It counts requests per path
/// and the most requests it was answering at once.
final class TestHTTPServer: Sendable {
    struct Response: Sendable {
        var status = 200
        var headers: [(String, String)] = []
        var body = Data()
        /// Time to wait before writing anything.
        var delay: Duration = .zero
        /// The `Content-Length` to announce; `nil` announces the real length.
        var declaredLength: Int?
    }

    /// Gets the path and the 1-based number of this request for that path.
    typealias Handler = @Sendable (_ path: String, _ attempt: Int) -> Response
    /// Gets the path, the 1-based number of this request for that path and the request's
    /// header fields by lower-cased name (for conditional requests).
    typealias RequestHandler = @Sendable (_ path: String, _ attempt: Int, _ headers: [String: String]) -> Response

    let port: UInt16
    private let listener: Int32
    private let handler: RequestHandler
    private struct Counters {
        var requests: [String: Int] = [:]
        var bodyBytes: [String: Int] = [:]
        var headers: [String: [String: String]] = [:]
        var inFlight = 0
        var maximumInFlight = 0
    }
    private let counters = Locked(Counters())
    private let isStopped = Atomic<Bool>(false)

    /// Listens on 127.0.0.1 at `port` (0: a free port the system picks).
    convenience init(port: UInt16 = 0, handler: @escaping Handler) throws {
        try self.init(port: port, requestHandler: { path, attempt, _ in handler(path, attempt) })
    }

    /// Listens on 127.0.0.1 at `port` (0: a free port), answering with the request's headers at hand.
    convenience init(port: UInt16 = 0, requestHandler handler: @escaping RequestHandler) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 }
        }
        guard bound else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        try self.init(listeningOn: fd, requestHandler: handler)
    }

    /// Starts listening on the port `reserved` holds, taking its socket over: the port is never
    /// free in between, so no other socket (another test's server, a client's ephemeral port)
    /// can take it, as it could between `reserved.release()` and a new server's `bind`.
    convenience init(takingOver reserved: ReservedPort, handler: @escaping Handler) throws {
        try self.init(listeningOn: reserved.takeDescriptor(), requestHandler: { path, attempt, _ in handler(path, attempt) })
    }

    /// Listens on `fd`, a bound socket it now owns (closed on failure).
    private init(listeningOn fd: Int32, requestHandler handler: @escaping RequestHandler) throws {
        // -1: the reserved port's socket was released or handed over already.
        guard fd >= 0 else { throw POSIXError(.EBADF) }
        self.handler = handler
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address -> Bool in
                listen(fd, 64) == 0 && getsockname(fd, address, &length) == 0
            }
        }
        guard listening else {
            let failure = POSIXErrorCode(rawValue: errno) ?? .EADDRINUSE
            close(fd)
            throw POSIXError(failure)
        }
        self.listener = fd
        self.port = UInt16(bigEndian: address.sin_port)
        // The accept thread holds the server weakly: a strong hold made every server outlive
        // its test, each with a thread blocked in `accept` and an open descriptor, never
        // reaching `deinit` (and its `stop()`).
        let server: @Sendable () -> TestHTTPServer? = { [weak self] in self }
        let thread = Thread { [listener = fd] in Self.acceptLoop(listener, server: server) }
        thread.start()
    }

    deinit { stop() }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    func requestCount(_ path: String) -> Int { counters.withLock { $0.requests[path, default: 0] } }

    /// The body bytes written for `path` so far, over every response (the heads not counted).
    func bodyBytesSent(_ path: String) -> Int { counters.withLock { $0.bodyBytes[path, default: 0] } }

    /// The header fields of the last request for `path`, by lower-cased name.
    func requestHeaders(_ path: String) -> [String: String] { counters.withLock { $0.headers[path] ?? [:] } }

    var maximumInFlight: Int { counters.withLock { $0.maximumInFlight } }

    /// Stops accepting; connections being answered finish on their own threads. Idempotent.
    ///
    /// It only shuts the listener down, which wakes the accept loop; the loop closes the
    /// descriptor as it exits. Closing it here as well closed it twice (`stop()` and `deinit`),
    /// and the second `close` hit whatever file reused the number — another test's SQLite
    /// index, which then failed a read with SQLITE_IOERR_READ.
    func stop() {
        guard !isStopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    /// Accepts on `listener` until it is shut down (``stop()``, which `deinit` calls), then
    /// closes it. `server` gives the server while it lives (it holds it weakly).
    private static func acceptLoop(_ listener: Int32, server: () -> TestHTTPServer?) {
        defer { close(listener) }
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 { return }
            guard let server = server() else {
                close(connection)
                return
            }
            Thread { server.serve(connection) }.start()
        }
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var head = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while head.range(of: Data("\r\n\r\n".utf8)) == nil {
            let count = recv(connection, &buffer, buffer.count, 0)
            if count <= 0 { return }
            head.append(contentsOf: buffer[0..<count])
        }
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n")
        let requestLine = lines.first ?? ""
        let path = requestLine.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let attempt = counters.withLock { counters in
            counters.headers[path] = headers
            counters.requests[path, default: 0] += 1
            counters.inFlight += 1
            counters.maximumInFlight = max(counters.maximumInFlight, counters.inFlight)
            return counters.requests[path]!
        }
        defer { counters.withLock { $0.inFlight -= 1 } }
        let response = handler(path, attempt, headers)
        if response.delay > .zero { Thread.sleep(forTimeInterval: Double(response.delay.components.seconds) + Double(response.delay.components.attoseconds) / 1e18) }
        var text = "HTTP/1.1 \(response.status) Status\r\n"
        text += "Content-Length: \(response.declaredLength ?? response.body.count)\r\nConnection: close\r\n"
        for (name, value) in response.headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        let headLength = text.utf8.count
        let bytes = [UInt8](Data(text.utf8) + response.body)
        var sent = 0
        defer { counters.withLock { $0.bodyBytes[path, default: 0] += max(0, sent - headLength) } }
        while sent < bytes.count {
            // MSG_NOSIGNAL: a client that hung up must not kill the test process with SIGPIPE.
            let count = bytes[sent...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            sent += count
        }
    }
}

/// A settable clock for TTL tests.
final class TestClock: Sendable {
    private let date = Locked(Date(timeIntervalSince1970: 1_000_000))
    var now: @Sendable () -> Date { { self.date.withLock { $0 } } }
    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

/// A loopback port held without listening: connecting to it is refused (a dead host), and no
/// other socket can take it meanwhile (it is bound without `SO_REUSEADDR`), unlike the port of
/// a stopped server, which a server of another test running in parallel may be given.
final class ReservedPort {
    let port: UInt16
    private var descriptor: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address -> Bool in
                bind(fd, address, length) == 0 && getsockname(fd, address, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        descriptor = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    /// Hands the bound socket to its new owner (``TestHTTPServer/init(takingOver:handler:)``);
    /// -1 if it was released or handed over already.
    func takeDescriptor() -> Int32 {
        defer { descriptor = -1 }
        return descriptor
    }

    /// Frees the port. Idempotent.
    func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
