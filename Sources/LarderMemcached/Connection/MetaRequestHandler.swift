#if Memcached
import NIOCore
import Synchronization

/// Where a command's reply goes: a promise, or a waiting task's continuation (resumed straight
/// from the event loop, saving the hop a future's callback costs). Completes once; later
/// completions (a write failure after a timeout, say) are ignored.
final class ReplySink: Sendable {
    private enum Target: Sendable {
        case promise(EventLoopPromise<MetaResponse>)
        case continuation(CheckedContinuation<MetaResponse, any Error>)
    }
    private let target: Target
    private let isDone = Atomic<Bool>(false)

    init(_ promise: EventLoopPromise<MetaResponse>) { target = .promise(promise) }
    init(_ continuation: CheckedContinuation<MetaResponse, any Error>) { target = .continuation(continuation) }

    func succeed(_ response: MetaResponse) { complete(.success(response)) }
    func fail(_ error: any Error) { complete(.failure(error)) }

    private func complete(_ result: Result<MetaResponse, any Error>) {
        guard !isDone.exchange(true, ordering: .acquiringAndReleasing) else { return }
        switch target {
        case .promise(let promise): promise.completeWith(result)
        case .continuation(let continuation): continuation.resume(with: result)
        }
    }
}

/// A command on its way out with the sink of its reply.
struct PendingCommand {
    var command: MetaCommand
    var promise: ReplySink
    /// When the command fails with `.timeout` and its connection is closed.
    var deadline: NIODeadline = .distantFuture
}

/// Matches pipelined replies to their commands: in order, checked by opaque token.
///
/// memcached answers a connection's commands in order. Each command but `mn` carries an opaque
/// token (`O`) that the reply echoes, so a reply that belongs to another command is caught
/// instead of trusted. A quiet command (`q`) whose reply is suppressed is settled when a later
/// reply passes it: a quiet `mg` as a miss, a quiet `ms`/`md` as `HD`. Anything that breaks the
/// order (an unexpected token, an error reply the handler cannot attribute, bad bytes) fails
/// every pending command and closes the connection, so a desynchronised stream is never read.
///
/// Deadlines: replies come in order, so the oldest pending command has the earliest deadline;
/// one timer per connection watches it. When it passes, every pending command fails with
/// `.timeout` and the connection closes (a late reply would otherwise be read as the next
/// command's).
final class MetaRequestHandler: ChannelDuplexHandler {
    typealias InboundIn = MetaResponse
    typealias OutboundIn = PendingCommand
    typealias OutboundOut = MetaCommand

    private var pending = CircularBuffer<(opaque: UInt32?, isQuiet: Bool, isGet: Bool, deadline: NIODeadline, promise: ReplySink)>()
    private var nextOpaque: UInt32 = 1
    private var isClosed = false
    private var timer: Scheduled<Void>?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var pendingCommand = unwrapOutboundIn(data)
        var opaque: UInt32?
        if case .noop = pendingCommand.command.kind {
            opaque = nil
        } else if let given = pendingCommand.command.opaque {
            opaque = given
        } else {
            opaque = nextOpaque
            nextOpaque = nextOpaque == .max ? 1 : nextOpaque + 1
            pendingCommand.command.flags.append(.opaque(opaque!))
        }
        guard !isClosed else {
            pendingCommand.promise.fail(MemcachedError(.connection, "the connection closed"))
            promise?.fail(MemcachedError(.connection, "the connection closed"))
            return
        }
        var isGet = false
        if case .get = pendingCommand.command.kind { isGet = true }
        pending.append((opaque, pendingCommand.command.isQuiet, isGet, pendingCommand.deadline, pendingCommand.promise))
        context.write(wrapOutboundOut(pendingCommand.command), promise: promise)
        if timer == nil { armTimer(context: context, at: pendingCommand.deadline) }
    }

    private func armTimer(context: ChannelHandlerContext, at deadline: NIODeadline) {
        guard deadline != .distantFuture else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.timer = nil
            guard let head = handler.pending.first else { return }
            if head.deadline <= .now() {
                handler.failAll(context: context, MemcachedError(.timeout, "no reply within the deadline"))
            } else {
                handler.armTimer(context: context, at: head.deadline)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let response = unwrapInboundIn(data)
        if response.status.isError {
            // Error replies carry no token: they belong to the oldest command, which must not
            // be quiet (a quiet one may have succeeded silently, so the owner is unknown).
            guard let head = pending.first, !head.isQuiet else {
                failAll(context: context, MemcachedError(.protocolViolation, "an error reply whose command is unknown"))
                return
            }
            pending.removeFirst()
            head.promise.succeed(response)
            if case .serverError = response.status { return }
            // After ERROR or CLIENT_ERROR the server may have skipped bytes: start afresh.
            failAll(context: context, MemcachedError(.connection, "connection reset after \(response.status)"))
            return
        }
        if response.status == .noop {
            while let head = pending.first, head.opaque != nil {
                guard head.isQuiet else {
                    failAll(context: context, MemcachedError(.protocolViolation, "MN before the reply of an earlier command"))
                    return
                }
                pending.removeFirst()
                head.promise.succeed(MetaResponse(status: head.isGet ? .miss : .stored))
            }
            guard let head = pending.popFirst() else {
                failAll(context: context, MemcachedError(.protocolViolation, "an MN nobody asked for"))
                return
            }
            head.promise.succeed(response)
            return
        }
        let token = response.opaque
        while let head = pending.first {
            if head.opaque != nil, head.opaque == token {
                pending.removeFirst()
                head.promise.succeed(response)
                return
            }
            guard head.isQuiet, head.opaque != nil else { break }
            pending.removeFirst()
            head.promise.succeed(MetaResponse(status: head.isGet ? .miss : .stored))
        }
        failAll(context: context, MemcachedError(.protocolViolation, "a reply with opaque \(token.map(String.init) ?? "none") matches no pending command"))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(context: context, error as? MemcachedError ?? MemcachedError(.connection, "\(error)"))
    }

    func channelInactive(context: ChannelHandlerContext) {
        isClosed = true
        timer?.cancel()
        let error = MemcachedError(.connection, "the connection closed")
        while let head = pending.popFirst() { head.promise.fail(error) }
        context.fireChannelInactive()
    }

    private func failAll(context: ChannelHandlerContext, _ error: MemcachedError) {
        isClosed = true
        timer?.cancel()
        while let head = pending.popFirst() { head.promise.fail(error) }
        context.close(promise: nil)
    }
}
#endif
