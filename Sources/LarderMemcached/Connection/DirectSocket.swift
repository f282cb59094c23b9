#if Memcached
import Foundation
import Glibc
import Larder
import NIOCore

/// One plain socket to the server on which a lone caller off the event loops writes its own
/// command (or batch) and reads its own replies, on its own thread.
///
/// A call through the pipelined ``MetaConnection`` from a task on Swift's global executor costs
/// two thread wake-ups besides the server's: the event loop's, to write the command, and the
/// caller's, when the reply resumes it. With one call in flight those wake-ups are most of a
/// loopback round trip, so ``ConnectionPool`` hands a command or a batch to this socket instead
/// when it is the only call in flight and the socket is free; every other call takes the
/// pipeline.
///
/// Invariants:
/// - At most one caller holds the socket (`busy`), and only the holder touches its descriptor;
///   every error closes the descriptor, so a stream is never read past a reply it could not
///   match (each command carries its own opaque token, checked on the reply).
/// - The caller's thread waits in `recv` at most ``blockingBudget`` after its command leaves.
///   A reply that takes longer is waited for on a thread of its own, which resumes the caller
///   (the only hop, on the slow path), so a slow or silent server never holds the cooperative
///   pool for longer than that.
/// - Connecting never blocks a caller: it runs on a thread of its own, and until it succeeds
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
    /// thread of its own. A loopback round trip is tens of microseconds.
    static let blockingBudget: TimeAmount = .milliseconds(1)

    private let host: String
    private let port: Int
    private let connectTimeout: TimeAmount
    private let retryDelay: TimeAmount
    private let maxValueLength: Int
    private let state = Locked(State.idle)

    init(host: String, port: Int, connectTimeout: TimeAmount, retryDelay: TimeAmount, maxValueLength: Int) {
        self.host = host
        self.port = port
        self.connectTimeout = connectTimeout
        self.retryDelay = retryDelay
        self.maxValueLength = maxValueLength
    }

    /// Whether `command` can take the socket alone: one that gets a reply of its own with its
    /// opaque token (not quiet, not `mn`).
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
        try await sendBatch([command], deadline: deadline)?[0]
    }

    /// Sends `commands` in one write and returns their replies in order, or `nil` at once as
    /// ``send(_:deadline:)`` does. Replies are matched as ``MetaRequestHandler`` matches them: a
    /// quiet command passed by a later reply is settled as a miss (`mg`) or as stored; end a
    /// quiet batch with `mn`.
    nonisolated(nonsending) func sendBatch(_ commands: [MetaCommand], deadline: NIODeadline) async throws -> [MetaResponse]? {
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
            var exchange = Exchange(descriptor: descriptor, deadline: deadline, maxValueLength: maxValueLength)
            do {
                try exchange.write(commands)
                if try exchange.readReplies(until: min(deadline, NIODeadline.now() + Self.blockingBudget)) {
                    release(descriptor, keep: exchange.isReusable)
                    return exchange.responses
                }
                // The server is slow: wait out the deadline on a thread of its own (not a
                // Dispatch worker: a pool other work needs would be held up to the deadline).
                let finished = try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Exchange, any Error>) in
                    let started = exchange
                    Self.onThreadOfItsOwn {
                        var exchange = started
                        do {
                            guard try exchange.readReplies(until: exchange.deadline) else {
                                throw MemcachedError(.timeout, "no reply within the deadline")
                            }
                            continuation.resume(returning: exchange)
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                }
                release(descriptor, keep: finished.isReusable)
                return finished.responses
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
        Self.onThreadOfItsOwn {
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

    /// Runs `body` on a new thread: for the waits that may last up to a deadline (connecting,
    /// a slow reply), which must hold up neither Swift's cooperative pool nor Dispatch's.
    private static func onThreadOfItsOwn(_ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.stackSize = 256 << 10
        thread.start()
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

/// Commands and their replies on a ``DirectSocket``'s descriptor (a value: the slow path moves
/// it, with the replies read so far, to a thread of its own).
private struct Exchange: @unchecked Sendable {
    // @unchecked: only the holder of the socket uses it, on one thread at a time.
    private struct Awaited {
        var opaque: UInt32
        var isQuiet: Bool
        var isGet: Bool
    }

    let descriptor: Int32
    let deadline: NIODeadline
    let maxValueLength: Int
    private var received = ByteBufferAllocator().buffer(capacity: 2_048)
    private var awaited: [Awaited] = []
    /// The replies settled so far, in the commands' order.
    private(set) var responses: [MetaResponse] = []
    /// Whether the socket can carry more commands (not after `ERROR` or `CLIENT_ERROR`, after
    /// which the server may have skipped bytes).
    private(set) var isReusable = true

    init(descriptor: Int32, deadline: NIODeadline, maxValueLength: Int) {
        self.descriptor = descriptor
        self.deadline = deadline
        self.maxValueLength = maxValueLength
    }

    /// Encodes `commands` (each but `mn` with an opaque token: its own, or its place in the
    /// exchange, counted from 1) and sends them in one write. Tokens need only be unique within
    /// one exchange: every failure closes the socket, so no reply of an earlier exchange is
    /// left to read.
    mutating func write(_ commands: [MetaCommand]) throws {
        var next: UInt32 = 1
        var outgoing = ByteBufferAllocator().buffer(capacity: 64 * commands.count + 64)
        awaited.reserveCapacity(commands.count)
        responses.reserveCapacity(commands.count)
        for command in commands {
            var opaque: UInt32 = 0
            if case .noop = command.kind {
                opaque = 0
            } else if let given = command.opaque {
                opaque = given
            } else {
                opaque = next
                next = next == .max ? 1 : next + 1
            }
            try MetaCommandEncoder.encode(command, appendingOpaque: command.opaque == nil ? opaque : 0, into: &outgoing)
            var isGet = false
            if case .get = command.kind { isGet = true }
            awaited.append(Awaited(opaque: opaque, isQuiet: command.isQuiet, isGet: isGet))
        }
        while outgoing.readableBytes > 0 {
            let sent = outgoing.withUnsafeReadableBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                outgoing.moveReaderIndex(forwardBy: sent)
            } else if sent < 0, errno == EAGAIN || errno == EINTR {
                guard DirectSocket.wait(descriptor, for: Int16(POLLOUT), until: deadline) else {
                    throw MemcachedError(.timeout, "the commands could not be sent within the deadline")
                }
            } else {
                throw MemcachedError(.connection, "send failed (errno \(errno))")
            }
        }
    }

    /// Reads until every command is answered (`true`), or `limit` passes first (`false`). The
    /// replies must answer these commands, in order, and be all the socket holds.
    mutating func readReplies(until limit: NIODeadline) throws -> Bool {
        while responses.count < awaited.count {
            if received.writableBytes < 1_024 { received.reserveCapacity(minimumWritableBytes: max(received.capacity, 2_048)) }
            let count = received.withUnsafeMutableWritableBytes { Glibc.recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received.moveWriterIndex(forwardBy: count)
                while responses.count < awaited.count,
                      let response = try MetaResponseDecoder.parse(&received, maxValueLength: maxValueLength) {
                    try settle(with: response)
                }
                continue
            }
            if count == 0 { throw MemcachedError(.connection, "the server closed the connection") }
            guard errno == EAGAIN || errno == EINTR else { throw MemcachedError(.connection, "recv failed (errno \(errno))") }
            guard DirectSocket.wait(descriptor, for: Int16(POLLIN), until: limit) else {
                if limit >= deadline { throw MemcachedError(.timeout, "no reply within the deadline") }
                return false
            }
        }
        guard received.readableBytes == 0 else {
            throw MemcachedError(.protocolViolation, "bytes after the replies of every command sent")
        }
        return true
    }

    /// Gives `response` to the command it answers, settling the quiet ones it passes.
    private mutating func settle(with response: MetaResponse) throws {
        let head = awaited[responses.count]
        if response.status.isError {
            // Error replies carry no token: they belong to the next command, which must not be
            // quiet (a quiet one may have succeeded silently, so the owner is unknown).
            guard !head.isQuiet else { throw MemcachedError(.protocolViolation, "an error reply whose command is unknown") }
            if case .serverError = response.status {
                responses.append(response)
                return
            }
            guard awaited.count == 1 else { throw MemcachedError(.connection, "connection reset after \(response.status)") }
            isReusable = false
            responses.append(response)
            return
        }
        let isNoop = response.status == .noop
        while responses.count < awaited.count {
            let head = awaited[responses.count]
            if isNoop ? head.opaque == 0 : (head.opaque != 0 && head.opaque == response.opaque) {
                responses.append(response)
                return
            }
            guard head.isQuiet, head.opaque != 0 else { break }
            responses.append(MetaResponse(status: head.isGet ? .miss : .stored))
        }
        throw MemcachedError(.protocolViolation, isNoop ? "MN before the reply of an earlier command"
            : "a reply with opaque \(response.opaque.map(String.init) ?? "none") answers no command sent")
    }
}
#endif
