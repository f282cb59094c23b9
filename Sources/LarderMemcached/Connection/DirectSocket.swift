#if Memcached
import Dispatch
import Glibc
import Larder
import NIOCore

/// One plain socket to the server on which a lone caller off the event loops writes its own
/// command and reads its own reply, on its own thread.
///
/// A call through the pipelined ``MetaConnection`` from a task on Swift's global executor costs
/// two thread wake-ups besides the server's: the event loop's, to write the command, and the
/// caller's, when the reply resumes it. With one request in flight those wake-ups are most of a
/// loopback round trip, so ``ConnectionPool`` hands a request to this socket instead when it is
/// the only one in flight and the socket is free; every other request takes the pipeline.
///
/// Invariants:
/// - At most one caller holds the socket (`busy`), and only the holder touches its descriptor;
///   every error closes the descriptor, so a stream is never read past a reply it could not
///   match (each command carries its own opaque token, checked on the reply).
/// - The caller's thread waits in `recv` at most ``blockingBudget`` after its command leaves.
///   A reply that takes longer is waited for on a Dispatch thread, which resumes the caller
///   (the only hop, on the slow path), so a slow or silent server never holds the cooperative
///   pool for longer than that.
/// - Connecting never blocks a caller: it runs on a Dispatch thread, and until it succeeds
///   requests take the pipeline. After a failure it is retried no sooner than `retryDelay`.
final class DirectSocket: Sendable {
    private enum State {
        case idle
        case connecting
        case ready(Int32)
        case busy
        case retryAfter(NIODeadline)
        case closed
    }

    /// How long a caller's thread waits for a reply in `recv` before the wait moves to a
    /// Dispatch thread. A loopback round trip is tens of microseconds.
    static let blockingBudget: TimeAmount = .milliseconds(1)

    private let host: String
    private let port: Int
    private let connectTimeout: TimeAmount
    private let retryDelay: TimeAmount
    private let maxValueLength: Int
    private let state = Locked(State.idle)
    private let nextOpaque = Locked<UInt32>(1)

    init(host: String, port: Int, connectTimeout: TimeAmount, retryDelay: TimeAmount, maxValueLength: Int) {
        self.host = host
        self.port = port
        self.connectTimeout = connectTimeout
        self.retryDelay = retryDelay
        self.maxValueLength = maxValueLength
    }

    /// Whether `command` can take the socket: one that gets a reply of its own with its opaque
    /// token (not quiet, not `mn`).
    static func accepts(_ command: MetaCommand) -> Bool {
        if case .noop = command.kind { return false }
        return !command.isQuiet
    }

    /// Sends `command` (see ``accepts(_:)``) and returns its reply, or `nil` at once when the
    /// socket is not connected or another caller holds it (the caller then uses the pipeline).
    /// A failure closes the socket.
    ///
    /// - Throws: ``MemcachedError`` (`.timeout`, `.connection`, `.protocolViolation`).
    nonisolated(nonsending) func send(_ command: MetaCommand, deadline: NIODeadline) async throws -> MetaResponse? {
        enum Step { case use(Int32), connect, pass }
        let now = NIODeadline.now()
        let step: Step = state.withLock { state in
            switch state {
            case .ready(let descriptor):
                state = .busy
                return .use(descriptor)
            case .idle:
                state = .connecting
                return .connect
            case .retryAfter(let until) where now >= until:
                state = .connecting
                return .connect
            default:
                return .pass
            }
        }
        switch step {
        case .pass:
            return nil
        case .connect:
            startConnecting()
            return nil
        case .use(let descriptor):
            let opaque = command.opaque ?? nextOpaque.withLock { next in
                defer { next = next == .max ? 1 : next + 1 }
                return next
            }
            var exchange = Exchange(descriptor: descriptor, opaque: opaque, deadline: deadline, maxValueLength: maxValueLength)
            do {
                try exchange.write(command)
                if let (response, reusable) = try exchange.readReply(until: min(deadline, NIODeadline.now() + Self.blockingBudget)) {
                    release(descriptor, keep: reusable)
                    return response
                }
                // The server is slow: wait out the deadline on a Dispatch thread.
                let (response, reusable) = try await withUnsafeThrowingContinuation {
                    (continuation: UnsafeContinuation<(MetaResponse, Bool), any Error>) in
                    let finishing = exchange
                    DispatchQueue.global().async {
                        var exchange = finishing
                        do {
                            guard let reply = try exchange.readReply(until: exchange.deadline) else {
                                throw MemcachedError(.timeout, "no reply within the deadline")
                            }
                            continuation.resume(returning: reply)
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                }
                release(descriptor, keep: reusable)
                return response
            } catch {
                release(descriptor, keep: false)
                throw error as? MemcachedError ?? MemcachedError(.connection, "\(error)")
            }
        }
    }

    /// Closes the socket; later calls pass (a caller holding it closes it when done).
    func close() {
        let descriptor: Int32? = state.withLock { state in
            defer { state = .closed }
            if case .ready(let descriptor) = state { return descriptor }
            return nil
        }
        if let descriptor { Glibc.close(descriptor) }
    }

    private func release(_ descriptor: Int32, keep: Bool) {
        let retryAt = NIODeadline.now() + retryDelay
        let kept: Bool = state.withLock { state in
            guard case .busy = state, keep else {
                if case .busy = state { state = .retryAfter(retryAt) }
                return false
            }
            state = .ready(descriptor)
            return true
        }
        if !kept { Glibc.close(descriptor) }
    }

    private func startConnecting() {
        let host = host, port = port, timeout = connectTimeout, retryDelay = retryDelay
        let state = state
        DispatchQueue.global().async {
            let descriptor = Self.connect(host: host, port: port, timeout: timeout)
            let stale: Bool = state.withLock { state in
                guard case .connecting = state else { return true }
                if let descriptor {
                    state = .ready(descriptor)
                } else {
                    state = .retryAfter(NIODeadline.now() + retryDelay)
                }
                return false
            }
            if stale, let descriptor { Glibc.close(descriptor) }
        }
    }

    /// A TCP socket connected to `host:port`, or `nil`: with `TCP_NODELAY`, blocking, and with
    /// ``blockingBudget`` as its send and receive timeouts, so that a call costs one `send` and
    /// one `recv` (which sleeps until the reply comes, at most that long).
    private static func connect(host: String, port: Int, timeout: TimeAmount) -> Int32? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        let deadline = NIODeadline.now() + timeout
        while let address = candidate {
            candidate = address.pointee.ai_next
            let descriptor = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { continue }
            var one: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0
                || (errno == EINPROGRESS && wait(descriptor, for: Int16(POLLOUT), until: deadline) && socketError(descriptor) == 0) {
                let microseconds = blockingBudget.nanoseconds / 1_000
                var budget = timeval(tv_sec: Int(microseconds / 1_000_000), tv_usec: Int(microseconds % 1_000_000))
                let flags = fcntl(descriptor, F_GETFL)
                if flags >= 0, fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) == 0,
                   setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &budget, socklen_t(MemoryLayout<timeval>.size)) == 0,
                   setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &budget, socklen_t(MemoryLayout<timeval>.size)) == 0 {
                    return descriptor
                }
            }
            Glibc.close(descriptor)
        }
        return nil
    }

    private static func socketError(_ descriptor: Int32) -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
        return error
    }

    /// Waits until `descriptor` is ready for `events` or `deadline` passes (`false`).
    fileprivate static func wait(_ descriptor: Int32, for events: Int16, until deadline: NIODeadline) -> Bool {
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        while true {
            let left = deadline - NIODeadline.now()
            guard left.nanoseconds > 0 else { return false }
            // Whole milliseconds, rounded up: the deadline is never cut short.
            let milliseconds = Int32(clamping: (left.nanoseconds + 999_999) / 1_000_000)
            let result = poll(&entry, 1, milliseconds)
            if result > 0 { return true }
            if result < 0, errno != EINTR { return false }
        }
    }
}

/// One command and its reply on a ``DirectSocket``'s descriptor (a value: the slow path moves
/// it to a Dispatch thread).
private struct Exchange: @unchecked Sendable {
    // @unchecked: only the holder of the socket uses it, on one thread at a time.
    let descriptor: Int32
    let opaque: UInt32
    let deadline: NIODeadline
    let maxValueLength: Int
    var received = ByteBufferAllocator().buffer(capacity: 2_048)

    init(descriptor: Int32, opaque: UInt32, deadline: NIODeadline, maxValueLength: Int) {
        self.descriptor = descriptor
        self.opaque = opaque
        self.deadline = deadline
        self.maxValueLength = maxValueLength
    }

    func write(_ command: MetaCommand) throws {
        var outgoing = ByteBufferAllocator().buffer(capacity: 256)
        try MetaCommandEncoder.encode(command, appendingOpaque: command.opaque == nil ? opaque : 0, into: &outgoing)
        while outgoing.readableBytes > 0 {
            let sent = outgoing.withUnsafeReadableBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                outgoing.moveReaderIndex(forwardBy: sent)
            } else if sent < 0, errno == EAGAIN || errno == EINTR {
                guard DirectSocket.wait(descriptor, for: Int16(POLLOUT), until: deadline) else {
                    throw MemcachedError(.timeout, "the command could not be sent within the deadline")
                }
            } else {
                throw MemcachedError(.connection, "send failed (errno \(errno))")
            }
        }
    }

    /// Reads until one whole reply has arrived (`nil` when `limit` passes first), and whether
    /// the socket can carry another command. The reply must answer this command (its opaque
    /// token, or an error reply, which carries none) and be all the socket holds.
    mutating func readReply(until limit: NIODeadline) throws -> (MetaResponse, reusable: Bool)? {
        while true {
            if received.writableBytes < 1_024 { received.reserveCapacity(minimumWritableBytes: max(received.capacity, 2_048)) }
            let count = received.withUnsafeMutableWritableBytes { Glibc.recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received.moveWriterIndex(forwardBy: count)
                guard let response = try MetaResponseDecoder.parse(&received, maxValueLength: maxValueLength) else { continue }
                guard received.readableBytes == 0 else {
                    throw MemcachedError(.protocolViolation, "bytes after the reply of the only command sent")
                }
                if response.status.isError {
                    // The server may have skipped bytes after ERROR or CLIENT_ERROR: the caller
                    // gets the reply, the socket is not kept.
                    if case .serverError = response.status { return (response, true) }
                    return (response, false)
                }
                guard response.opaque == opaque else {
                    throw MemcachedError(.protocolViolation, "a reply with opaque \(response.opaque.map(String.init) ?? "none") answers another command")
                }
                return (response, true)
            }
            if count == 0 { throw MemcachedError(.connection, "the server closed the connection") }
            guard errno == EAGAIN || errno == EINTR else { throw MemcachedError(.connection, "recv failed (errno \(errno))") }
            guard DirectSocket.wait(descriptor, for: Int16(POLLIN), until: limit) else {
                if limit >= deadline { throw MemcachedError(.timeout, "no reply within the deadline") }
                return nil
            }
        }
    }
}
#endif
