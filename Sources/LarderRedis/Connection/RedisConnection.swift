#if Redis
import NIOCore
import NIOPosix
import Synchronization

/// Commands on their way out with the promises of their replies, in order.
struct RESPRequest: Sendable {
    var bytes: ByteBuffer
    var replies: [EventLoopPromise<RESPValue>]
}

/// The first error that closed a connection, shared by its handler (which records it) and
/// the ``RedisConnection`` (which reports it for commands that failed after the close).
final class FirstFailure: Sendable {
    private let first = Mutex<RedisError?>(nil)

    func record(_ error: RedisError) {
        first.withLock { if $0 == nil { $0 = error } }
    }

    var error: RedisError? { first.withLock { $0 } }
}

/// Matches replies to commands in order (Redis answers a connection's commands in order) and
/// hands push messages (`>`) to `onPush` instead: they are never a command's reply. A reply
/// nobody waits for, or a failure, fails every pending command and closes the connection, so
/// a desynchronised stream is never read.
final class RESPClientHandler: ChannelDuplexHandler {
    typealias InboundIn = RESPValue
    typealias OutboundIn = RESPRequest
    typealias OutboundOut = ByteBuffer

    private var pending = CircularBuffer<EventLoopPromise<RESPValue>>()
    private let onPush: (@Sendable ([RESPValue]) -> Void)?
    private let firstFailure: FirstFailure

    init(onPush: (@Sendable ([RESPValue]) -> Void)?, firstFailure: FirstFailure) {
        self.onPush = onPush
        self.firstFailure = firstFailure
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        pending.append(contentsOf: request.replies)
        context.write(wrapOutboundOut(request.bytes), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let value = unwrapInboundIn(data)
        if case .push(let items) = value {
            onPush?(items)
            return
        }
        guard let promise = pending.popFirst() else {
            failAll(RedisError(.protocolViolation, "a reply no command waits for"))
            context.close(promise: nil)
            return
        }
        promise.succeed(value)
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(RedisError(.connection, "the connection closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let error = RedisError(wrapping: error)
        firstFailure.record(error)
        failAll(error)
        context.close(promise: nil)
    }

    private func failAll(_ error: RedisError) {
        while let promise = pending.popFirst() { promise.fail(error) }
    }
}

/// One RESP3 connection: pipelined commands, each batch with a deadline after which the
/// connection is closed (its replies may still come and would desynchronise it).
final class RedisConnection: Sendable {
    let channel: any Channel
    /// The error that closed the connection (a failed TLS handshake, say), kept so that a
    /// command written after the close reports it rather than "I/O on closed channel".
    private let firstFailure: FirstFailure

    init(channel: any Channel, firstFailure: FirstFailure) {
        self.channel = channel
        self.firstFailure = firstFailure
    }

    /// Opens a connection to `host`:`port` on `eventLoop`, over TLS when `tls` is set;
    /// `onPush` receives push messages.
    static func connect(
        host: String, port: Int, on eventLoop: any EventLoop, timeout: TimeAmount, maxBulkLength: Int,
        tls: TLSClient?, onPush: (@Sendable ([RESPValue]) -> Void)? = nil
    ) -> EventLoopFuture<RedisConnection> {
        let parser = RESPParser(maxBulkLength: maxBulkLength)
        let firstFailure = FirstFailure()
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try tls?.addHandler(to: channel)
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RESPDecoder(parser: parser)))
                    try channel.pipeline.syncOperations.addHandler(RESPClientHandler(onPush: onPush, firstFailure: firstFailure))
                }
            }
            .connect(host: host, port: port)
            .map { RedisConnection(channel: $0, firstFailure: firstFailure) }
    }

    /// Sends `commands` back to back, flushed once; the replies in order (error replies
    /// included, as `.error`).
    func send(_ commands: [[RESPArgument]], deadline: NIODeadline) -> EventLoopFuture<[RESPValue]> {
        let eventLoop = channel.eventLoop
        var bytes = channel.allocator.buffer(capacity: 64 * commands.count)
        for command in commands { RESPEncoder.encode(command, into: &bytes) }
        let promises = commands.map { _ in eventLoop.makePromise(of: RESPValue.self) }
        let all = promises.count == 1
            ? promises[0].futureResult.map { [$0] }
            : EventLoopFuture.whenAllSucceed(promises.map(\.futureResult), on: eventLoop)
        let channel = self.channel
        let request = RESPRequest(bytes: bytes, replies: promises)
        // One hop to the event loop for the timer and the write together (each alone, from
        // another thread, would wake the loop).
        @Sendable func start() {
            let timer = eventLoop.scheduleTask(deadline: deadline) {
                // Late: the stream can no longer be trusted.
                channel.close(promise: nil)
            }
            all.whenComplete { _ in timer.cancel() }
            channel.writeAndFlush(request).whenFailure { error in
                for promise in promises { promise.fail(RedisError(wrapping: error)) }
            }
        }
        if eventLoop.inEventLoop { start() } else { eventLoop.execute(start) }
        let firstFailure = self.firstFailure
        return all.flatMapErrorThrowing { error in
            if NIODeadline.now() >= deadline { throw RedisError(.timeout, "no reply within the deadline") }
            if (error as? RedisError)?.code == .connection, let cause = firstFailure.error { throw cause }
            throw error
        }
    }

    func close() {
        channel.close(promise: nil)
    }

    var isActive: Bool { channel.isActive }
}

/// What a connection says first: `HELLO 3` (RESP3), with `AUTH` when a password is set, and a
/// client name.
struct Handshake: Sendable {
    var username: String?
    var password: String?
    var clientName: String?

    var command: [RESPArgument] {
        var command: [RESPArgument] = [.string("HELLO"), .string("3")]
        if let password {
            command += [.string("AUTH"), .string(username ?? "default"), .string(password)]
        }
        if let clientName { command += [.string("SETNAME"), .string(clientName)] }
        return command
    }

    /// The error a refused `HELLO` means: a refused password is ``RedisError/Code/authentication``.
    static func check(_ reply: RESPValue) throws {
        switch reply {
        case .map, .array: return
        case .error(let message):
            let word = message.prefix { $0 != " " }
            switch word {
            case "WRONGPASS", "NOAUTH", "NOPERM":
                throw RedisError(.authentication, message)
            case "NOPROTO":
                throw RedisError(.unsupportedServer, "the server refused RESP3: \(message)")
            default:
                if message.contains("unknown command") {
                    throw RedisError(.unsupportedServer, "the server has no HELLO (Redis 6 or later is needed): \(message)")
                }
                throw RedisError(.server, message)
            }
        default:
            throw RedisError(.protocolViolation, "HELLO answered \(reply)")
        }
    }
}
#endif
