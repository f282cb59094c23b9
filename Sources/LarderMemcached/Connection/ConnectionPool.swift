#if Memcached
import Larder
import NIOCore
import NIOPosix
import Synchronization

/// A few pipelined connections to one memcached server, with a deadline per operation,
/// reconnection with back-off and a circuit breaker.
///
/// Each slot holds at most one connection, shared by every caller that picks the slot: their
/// commands are pipelined on it and matched by ``MetaRequestHandler``. A command whose deadline
/// passes fails with `.timeout` and closes its connection (the reply may still arrive and would
/// desynchronise the stream); the slot then reconnects after a back-off. After
/// `breakerThreshold` consecutive failures the breaker opens: operations fail at once until
/// `breakerCooldown` has passed, then one probe is let through.
final class ConnectionPool: Sendable {
    struct Settings: Sendable {
        var host: String
        var port: Int
        var connectionCount: Int
        var deadline: TimeAmount
        var reconnectBackoff: (initial: TimeAmount, maximum: TimeAmount)
        var breakerThreshold: Int
        var breakerCooldown: TimeAmount
        var maxValueLength: Int
    }

    private enum Slot {
        case idle
        case connecting(EventLoopFuture<any Channel>)
        case ready(any Channel)
        case backingOff(until: NIODeadline)
    }

    private struct SlotState {
        var slot: Slot = .idle
        var backoff: TimeAmount
    }

    private struct Breaker {
        var consecutiveFailures = 0
        var openUntil: NIODeadline?
        var probing = false
    }

    let settings: Settings
    let group: any EventLoopGroup
    private let slots: [Locked<SlotState>]
    private let breaker = Locked(Breaker())
    private let nextSlot = Atomic<Int>(0)
    private let isClosed = Atomic<Bool>(false)
    let counters = PoolCounters()

    init(settings: Settings, group: any EventLoopGroup) {
        self.settings = settings
        self.group = group
        slots = (0..<max(1, settings.connectionCount)).map { _ in Locked(SlotState(backoff: settings.reconnectBackoff.initial)) }
    }

    /// Sends `command` on one of the connections and returns its reply (error replies included).
    ///
    /// - Throws: ``MemcachedError`` (`.breakerOpen`, `.timeout`, `.connection`, `.closed`,
    ///   `.protocolViolation`).
    func send(_ command: MetaCommand) async throws -> MetaResponse {
        guard !isClosed.load(ordering: .relaxed) else { throw MemcachedError(.closed, "the store is closed") }
        try admit()
        let deadline = NIODeadline.now() + settings.deadline
        let index = nextSlot.wrappingAdd(1, ordering: .relaxed).oldValue % slots.count
        do {
            let channel = try await channel(at: index, deadline: deadline)
            // The handler keeps the deadline (one timer per connection) and resumes this task
            // from the event loop; one hop there (write) and one back (reply).
            let response = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<MetaResponse, any Error>) in
                let sink = ReplySink(continuation)
                channel.eventLoop.execute {
                    let written = channel.eventLoop.makePromise(of: Void.self)
                    written.futureResult.whenFailure { sink.fail(MemcachedError(.connection, "write failed: \($0)")) }
                    channel.writeAndFlush(PendingCommand(command: command, promise: sink, deadline: deadline), promise: written)
                }
            }
            recordSuccess()
            return response
        } catch let error as MemcachedError {
            if error.code == .timeout { counters.timeouts.add(1, ordering: .relaxed) }
            recordFailure()
            throw error
        } catch {
            recordFailure()
            throw MemcachedError(.connection, "\(error)")
        }
    }

    /// Sends `commands` back to back on one connection, flushed once, and returns their replies
    /// in order (a quiet command's suppressed reply is settled by a later one; end a quiet
    /// batch with `mn`).
    func sendBatch(_ commands: [MetaCommand]) async throws -> [MetaResponse] {
        guard !isClosed.load(ordering: .relaxed) else { throw MemcachedError(.closed, "the store is closed") }
        guard !commands.isEmpty else { return [] }
        try admit()
        let deadline = NIODeadline.now() + settings.deadline
        let index = nextSlot.wrappingAdd(1, ordering: .relaxed).oldValue % slots.count
        do {
            let channel = try await channel(at: index, deadline: deadline)
            let promises = commands.map { _ in channel.eventLoop.makePromise(of: MetaResponse.self) }
            channel.eventLoop.execute {
                for (command, promise) in zip(commands, promises) {
                    let sink = ReplySink(promise)
                    let written = channel.eventLoop.makePromise(of: Void.self)
                    written.futureResult.whenFailure { sink.fail(MemcachedError(.connection, "write failed: \($0)")) }
                    channel.write(PendingCommand(command: command, promise: sink, deadline: deadline), promise: written)
                }
                channel.flush()
            }
            // One wait for the whole batch, not one event-loop hop per reply.
            let responses = try await EventLoopFuture.whenAllSucceed(promises.map(\.futureResult), on: channel.eventLoop).get()
            recordSuccess()
            return responses
        } catch let error as MemcachedError {
            if error.code == .timeout { counters.timeouts.add(1, ordering: .relaxed) }
            recordFailure()
            throw error
        } catch {
            recordFailure()
            throw MemcachedError(.connection, "\(error)")
        }
    }

    /// Closes every connection; later calls throw `.closed`.
    func close() async {
        isClosed.store(true, ordering: .relaxed)
        for slot in slots {
            let channel: (any Channel)? = slot.withLock { state in
                defer { state.slot = .idle }
                if case .ready(let channel) = state.slot { return channel }
                return nil
            }
            try? await channel?.close()
        }
    }

    // MARK: - Connections

    private func channel(at index: Int, deadline: NIODeadline) async throws -> any Channel {
        enum Step { case use(any Channel), wait(EventLoopFuture<any Channel>), connect(EventLoopPromise<any Channel>), fail }
        let slot = slots[index]
        let now = NIODeadline.now()
        let step: Step = slot.withLock { state in
            switch state.slot {
            case .ready(let channel) where channel.isActive: return .use(channel)
            case .connecting(let future): return .wait(future)
            case .backingOff(let until) where now < until: return .fail
            default:
                let promise = group.next().makePromise(of: (any Channel).self)
                state.slot = .connecting(promise.futureResult)
                return .connect(promise)
            }
        }
        switch step {
        case .use(let channel): return channel
        case .wait(let future): return try await future.get()
        case .fail: throw MemcachedError(.connection, "reconnecting after a failure (back-off)")
        case .connect(let promise):
            connect(slot: slot, promise: promise, deadline: deadline)
            return try await promise.futureResult.get()
        }
    }

    private func connect(slot: Locked<SlotState>, promise: EventLoopPromise<any Channel>, deadline: NIODeadline) {
        let maxValueLength = settings.maxValueLength
        let timeout = max(TimeAmount.milliseconds(1), deadline - NIODeadline.now())
        let future = ClientBootstrap(group: promise.futureResult.eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        MessageToByteHandler(MetaCommandEncoder()),
                        ByteToMessageHandler(MetaResponseDecoder(maxValueLength: maxValueLength)),
                        MetaRequestHandler(),
                    ])
                }
            }
            .connect(host: settings.host, port: settings.port)
        let settings = settings
        future.whenComplete { result in
            switch result {
            case .success(let channel):
                slot.withLock { state in
                    state.slot = .ready(channel)
                    state.backoff = settings.reconnectBackoff.initial
                }
                channel.closeFuture.whenComplete { _ in
                    slot.withLock { state in
                        guard case .ready(let current) = state.slot, current === channel else { return }
                        state.slot = .idle
                    }
                }
                promise.succeed(channel)
            case .failure(let error):
                slot.withLock { state in
                    state.slot = .backingOff(until: NIODeadline.now() + state.backoff)
                    state.backoff = min(state.backoff * 2, settings.reconnectBackoff.maximum)
                }
                promise.fail(MemcachedError(.connection, "connect to \(settings.host):\(settings.port) failed: \(error)"))
            }
        }
    }

    // MARK: - Circuit breaker

    private func admit() throws {
        let now = NIODeadline.now()
        let allowed: Bool = breaker.withLock { breaker in
            guard let openUntil = breaker.openUntil else { return true }
            guard now >= openUntil, !breaker.probing else { return false }
            breaker.probing = true
            return true
        }
        guard allowed else {
            counters.breakerRejections.add(1, ordering: .relaxed)
            throw MemcachedError(.breakerOpen, "the circuit breaker is open after repeated failures")
        }
    }

    private func recordSuccess() {
        breaker.withLock { breaker in
            breaker.consecutiveFailures = 0
            breaker.openUntil = nil
            breaker.probing = false
        }
    }

    private func recordFailure() {
        let opened: Bool = breaker.withLock { breaker in
            breaker.consecutiveFailures += 1
            if breaker.probing || (breaker.openUntil == nil && breaker.consecutiveFailures >= settings.breakerThreshold) {
                breaker.probing = false
                breaker.openUntil = NIODeadline.now() + settings.breakerCooldown
                return true
            }
            return false
        }
        if opened { counters.breakerOpens.add(1, ordering: .relaxed) }
    }
}

/// Counters the pool keeps (relaxed atomics: totals, not ordering).
final class PoolCounters: Sendable {
    let timeouts = Atomic<Int>(0)
    let breakerOpens = Atomic<Int>(0)
    let breakerRejections = Atomic<Int>(0)
}
#endif
