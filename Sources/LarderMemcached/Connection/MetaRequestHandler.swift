#if Memcached
import NIOCore

/// Where a command's reply goes: a promise, a waiting task's continuation (resumed straight
/// from the event loop, saving the hop a future's callback costs) or a slot of a batch.
///
/// A value, not an object: no allocation and no atomic per command. It is completed exactly
/// once because only one place ever holds a live copy: ``MetaRequestHandler`` either fails it
/// while refusing its command (never queued) or queues it and completes it when it takes it
/// off its queue of pending replies (a reply, a timeout, a failure or the connection's end,
/// each of which removes it first). That is why an unsafe continuation is enough (a checked
/// one costs an allocation per call).
struct ReplySink: Sendable {
    private enum Target: Sendable {
        case promise(EventLoopPromise<MetaResponse>)
        case continuation(UnsafeContinuation<MetaResponse, any Error>)
        case batch(BatchCollector, index: Int)
    }
    private let target: Target

    init(_ promise: EventLoopPromise<MetaResponse>) { target = .promise(promise) }
    init(_ continuation: UnsafeContinuation<MetaResponse, any Error>) { target = .continuation(continuation) }
    init(_ collector: BatchCollector, index: Int) { target = .batch(collector, index: index) }

    func succeed(_ response: MetaResponse) {
        switch target {
        case .promise(let promise): promise.succeed(response)
        case .continuation(let continuation): continuation.resume(returning: response)
        case .batch(let collector, let index): collector.succeed(response, at: index)
        }
    }

    func fail(_ error: any Error) {
        switch target {
        case .promise(let promise): promise.fail(error)
        case .continuation(let continuation): continuation.resume(throwing: error)
        case .batch(let collector, _): collector.fail(error)
        }
    }
}

/// A command on its way out with the sink of its reply.
struct PendingCommand: Sendable {
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
/// Writes: the handler encodes each command itself into one outgoing buffer and hands that
/// buffer on at `flush`, so every command queued in one event-loop turn leaves in one write
/// (one syscall), whatever the number of callers. ``MetaConnection`` queues the callers'
/// commands and submits them in one turn.
///
/// Reading: the handler parses replies straight from each buffer the channel reads (no
/// separate decoder stage, so no per-reply trip through the pipeline); only the bytes of a
/// reply that is not complete yet are kept for the next read.
///
/// Deadlines: replies come in order, so the oldest pending command has the earliest deadline;
/// one timer per connection watches it. When it passes, every pending command fails with
/// `.timeout` and the connection closes (a late reply would otherwise be read as the next
/// command's).
final class MetaRequestHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = PendingCommand
    typealias OutboundOut = ByteBuffer

    private struct Waiter {
        /// The token the reply must echo; 0 for `mn`, which carries none.
        var opaque: UInt32
        var isQuiet: Bool
        var isGet: Bool
        var deadline: NIODeadline
        var sink: ReplySink
    }

    private var pending = CircularBuffer<Waiter>(initialCapacity: 64)
    private var nextOpaque: UInt32 = 1
    private var isClosed = false
    private var timer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// Commands encoded since the last flush.
    private var outgoing: ByteBuffer?
    /// The buffer of the last write: once the socket has taken it (usually within the flush)
    /// the next commands reuse its storage instead of allocating a buffer per write.
    private var spare: ByteBuffer?
    /// The write promises of those commands (rare: ``MetaConnection`` passes none).
    private var outgoingPromise: EventLoopPromise<Void>?
    /// The start of a reply whose end has not arrived yet.
    private var partial: ByteBuffer?
    private let maxLineLength: Int
    private let maxValueLength: Int
    /// Called on the event loop after each burst of reads and when the connection ends:
    /// ``MetaConnection`` sends the commands callers queued meanwhile (or, at the end, has
    /// them failed).
    var afterReads: (() -> Void)?

    /// Whether replies are still due: a read (or the connection's end) will follow.
    var isAwaitingReplies: Bool { !isClosed && !pending.isEmpty }

    /// A handler that refuses reply lines longer than `maxLineLength` and values larger than
    /// `maxValueLength` (a protocol violation: everything pending fails, the connection closes).
    init(maxLineLength: Int = 8_192, maxValueLength: Int = 64 << 20) {
        self.maxLineLength = maxLineLength
        self.maxValueLength = maxValueLength
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: - Writing

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        do {
            try enqueue(unwrapOutboundIn(data), context: context)
        } catch {
            promise?.fail(error)
            return
        }
        guard let promise else { return }
        if let earlier = outgoingPromise {
            earlier.futureResult.cascade(to: promise)
        } else {
            outgoingPromise = promise
        }
    }

    func flush(context: ChannelHandlerContext) {
        if let buffer = outgoing, buffer.readableBytes > 0 {
            outgoing = nil
            let promise = outgoingPromise
            outgoingPromise = nil
            context.write(wrapOutboundOut(buffer), promise: promise)
            context.flush()
            // After the flush the channel has usually written the bytes and let go of them;
            // a large buffer (a 1 MiB value) is not kept.
            if buffer.capacity <= 64 * 1_024 { spare = buffer }
            return
        }
        context.flush()
    }

    /// Queues every command and sends them in one write; called on the event loop by
    /// ``MetaConnection``. A command that cannot be queued (closed connection, bad key) has its
    /// sink failed; the others go on.
    func submit(_ commands: [PendingCommand]) {
        guard let context else {
            let error = MemcachedError(.connection, "the connection closed")
            for command in commands { command.promise.fail(error) }
            return
        }
        // By index: each command is read where it lies, not copied out of the array.
        for index in commands.indices {
            try? enqueue(commands[index], context: context)
        }
        flush(context: context)
    }

    /// Encodes `pendingCommand` into the outgoing buffer and records who waits for its reply.
    /// On failure the command's sink is failed and the error rethrown.
    private func enqueue(_ pendingCommand: PendingCommand, context: ChannelHandlerContext) throws {
        guard !isClosed else {
            let error = MemcachedError(.connection, "the connection closed")
            pendingCommand.promise.fail(error)
            throw error
        }
        let command = pendingCommand.command
        let given = command.opaque
        var opaque: UInt32 = 0
        if case .noop = command.kind {
            opaque = 0
        } else {
            opaque = given ?? nextOpaque
        }
        if outgoing == nil { outgoing = takeSpare() ?? context.channel.allocator.buffer(capacity: 1_024) }
        do {
            // Encoding checks the key and flags before it writes a byte.
            try MetaCommandEncoder.encode(command, appendingOpaque: given == nil ? opaque : 0, into: &outgoing!)
        } catch {
            pendingCommand.promise.fail(error)
            throw error
        }
        // A token is used up only by a command that leaves.
        if given == nil, opaque != 0 { nextOpaque = nextOpaque == .max ? 1 : nextOpaque + 1 }
        var isGet = false
        if case .get = command.kind { isGet = true }
        pending.append(Waiter(
            opaque: opaque, isQuiet: command.isQuiet, isGet: isGet, deadline: pendingCommand.deadline, sink: pendingCommand.promise))
        if timer == nil { armTimer(context: context, at: pendingCommand.deadline) }
    }

    /// The last write's buffer, emptied: `clear()` keeps its storage when the channel no longer
    /// holds it, and otherwise allocates a fresh one (never copying, never touching bytes still
    /// queued for the socket).
    private func takeSpare() -> ByteBuffer? {
        guard var buffer = spare else { return nil }
        spare = nil
        buffer.clear()
        return buffer
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

    // MARK: - Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var earlier = partial {
            // Rare: a reply split across reads. Appending copies only when the kept bytes still
            // share storage with an earlier read.
            partial = nil
            earlier.writeBuffer(&buffer)
            buffer = earlier
        }
        while !isClosed {
            let response: MetaResponse?
            do {
                response = try MetaResponseDecoder.parse(&buffer, maxLineLength: maxLineLength, maxValueLength: maxValueLength)
            } catch {
                failAll(context: context, error as? MemcachedError ?? MemcachedError(.protocolViolation, "\(error)"))
                return
            }
            guard let response else { break }
            dispatch(response, context: context)
        }
        if !isClosed, buffer.readableBytes > 0 { partial = buffer }
    }

    /// Hands `response` to the command it answers (settling the quiet ones it passes).
    private func dispatch(_ response: MetaResponse, context: ChannelHandlerContext) {
        if response.status.isError {
            // Error replies carry no token: they belong to the oldest command, which must not
            // be quiet (a quiet one may have succeeded silently, so the owner is unknown).
            guard let head = pending.first, !head.isQuiet else {
                failAll(context: context, MemcachedError(.protocolViolation, "an error reply whose command is unknown"))
                return
            }
            pending.removeFirst()
            head.sink.succeed(response)
            if case .serverError = response.status { return }
            // After ERROR or CLIENT_ERROR the server may have skipped bytes: start afresh.
            failAll(context: context, MemcachedError(.connection, "connection reset after \(response.status)"))
            return
        }
        if response.status == .noop {
            while let head = pending.first, head.opaque != 0 {
                guard head.isQuiet else {
                    failAll(context: context, MemcachedError(.protocolViolation, "MN before the reply of an earlier command"))
                    return
                }
                pending.removeFirst()
                head.sink.succeed(MetaResponse(status: head.isGet ? .miss : .stored))
            }
            guard let head = pending.popFirst() else {
                failAll(context: context, MemcachedError(.protocolViolation, "an MN nobody asked for"))
                return
            }
            head.sink.succeed(response)
            return
        }
        let token = response.opaque
        while let head = pending.first {
            if head.opaque != 0, head.opaque == token {
                pending.removeFirst()
                head.sink.succeed(response)
                return
            }
            guard head.isQuiet, head.opaque != 0 else { break }
            pending.removeFirst()
            head.sink.succeed(MetaResponse(status: head.isGet ? .miss : .stored))
        }
        failAll(context: context, MemcachedError(.protocolViolation, "a reply with opaque \(token.map(String.init) ?? "none") matches no pending command"))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        afterReads?()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(context: context, error as? MemcachedError ?? MemcachedError(.connection, "\(error)"))
    }

    func channelInactive(context: ChannelHandlerContext) {
        isClosed = true
        timer?.cancel()
        let error = MemcachedError(.connection, "the connection closed")
        while let head = pending.popFirst() { head.sink.fail(error) }
        outgoingPromise?.fail(error)
        outgoingPromise = nil
        afterReads?()
        context.fireChannelInactive()
    }

    private func failAll(context: ChannelHandlerContext, _ error: MemcachedError) {
        isClosed = true
        partial = nil
        timer?.cancel()
        while let head = pending.popFirst() { head.sink.fail(error) }
        context.close(promise: nil)
    }
}
#endif
