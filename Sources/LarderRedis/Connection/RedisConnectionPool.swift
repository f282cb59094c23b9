#if Redis
import Larder
import LarderRemoteCore
import NIOCore
import NIOPosix
import Synchronization

/// A few pipelined connections to one Redis server, with a deadline per operation,
/// reconnection with back-off and a circuit breaker.
///
/// Each slot holds at most one connection, shared by every caller that picks the slot. A
/// connection that fails or closes empties its slot; the next caller reconnects, unless the
/// slot is backing off (doubling from `reconnectBackoff.initial` to `.maximum`), in which case
/// the call fails at once. After `breakerThreshold` consecutive failures the breaker opens:
/// calls fail at once until `breakerCooldown` has passed, then one probe is let through.
final class RedisConnectionPool: Sendable {
    struct Settings: Sendable {
        var host: String
        var port: Int
        var connectionCount: Int
        var deadline: TimeAmount
        var reconnectBackoff: (initial: TimeAmount, maximum: TimeAmount)
        var breakerThreshold: Int
        var breakerCooldown: TimeAmount
        var maxBulkLength: Int
        var handshake: Handshake
        var tls: TLSClient?
        var observer: (any OperationObserver)? = nil
    }

    private enum Slot {
        case idle
        case connecting(EventLoopFuture<RedisConnection>)
        case ready(RedisConnection)
        case backingOff(until: NIODeadline, error: RedisError)
    }

    private struct SlotState {
        var slot: Slot = .idle
        var backoff: TimeAmount
    }

    let settings: Settings
    private let slots: [Locked<SlotState>]
    private let slotLoops: [any EventLoop]
    private let breaker: CircuitBreaker
    private let nextSlot = Atomic<Int>(0)
    private let isClosed = Atomic<Bool>(false)
    let counters: PoolCounters
    /// The last handshake refusal (a wrong password), kept so every later failure names it.
    let lastRefusal = Mutex<RedisError?>(nil)
    /// Whether the server's circuit breaker is open now.
    var isBreakerOpen: Bool { breaker.isOpen }

    /// A pool whose counters add to `counters` (a cluster's pools share one).
    init(settings: Settings, group: any EventLoopGroup, counters: PoolCounters = PoolCounters()) {
        self.settings = settings
        self.counters = counters
        breaker = CircuitBreaker(threshold: settings.breakerThreshold, cooldown: settings.breakerCooldown)
        slots = (0..<max(1, settings.connectionCount)).map { _ in Locked(SlotState(backoff: settings.reconnectBackoff.initial)) }
        slotLoops = slots.map { _ in group.next() }
    }

    /// Sends `commands` pipelined on one connection; their replies in order.
    ///
    /// - Throws: ``RedisError`` (`.breakerOpen`, `.timeout`, `.connection`, `.closed`,
    ///   `.authentication`, `.protocolViolation`).
    func sendUnobserved(_ commands: [[RESPArgument]]) async throws -> [RESPValue] {
        guard !isClosed.load(ordering: .relaxed) else { throw RedisError(.closed, "the store is closed") }
        try admit()
        let deadline = NIODeadline.now() + settings.deadline
        let index = nextSlot.wrappingAdd(1, ordering: .relaxed).oldValue % slots.count
        do {
            // A live connection is taken straight from its slot: awaiting even a completed
            // future from outside its event loop costs a hop there and back.
            let ready: RedisConnection? = slots[index].withLock { state in
                if case .ready(let connection) = state.slot, connection.isActive { return connection }
                return nil
            }
            let connection: RedisConnection
            if let ready { connection = ready } else { connection = try await self.connection(at: index, deadline: deadline).get() }
            let replies = try await connection.send(commands, deadline: deadline).get()
            recordSuccess()
            return replies
        } catch let error as RedisError {
            if error.code == .timeout { counters.timeouts.add(1, ordering: .relaxed) }
            recordFailure()
            throw error
        } catch {
            recordFailure()
            throw RedisError(wrapping: error)
        }
    }

    /// The slot's connection, connecting (and saying HELLO) if it has none.
    private func connection(at index: Int, deadline: NIODeadline) -> EventLoopFuture<RedisConnection> {
        let loop = slotLoops[index]
        let slot = slots[index]
        enum Step { case use(EventLoopFuture<RedisConnection>), connect(EventLoopPromise<RedisConnection>) }
        let step: Step = slot.withLock { state in
            switch state.slot {
            case .ready(let connection) where connection.isActive:
                return .use(loop.makeSucceededFuture(connection))
            case .connecting(let future):
                return .use(future)
            case .backingOff(let until, let error) where NIODeadline.now() < until:
                return .use(loop.makeFailedFuture(error))
            default:
                let promise = loop.makePromise(of: RedisConnection.self)
                state.slot = .connecting(promise.futureResult)
                return .connect(promise)
            }
        }
        switch step {
        case .use(let future):
            return future
        case .connect(let promise):
            let settings = settings
            let timeout = max(.nanoseconds(1), deadline - NIODeadline.now())
            RedisConnection.connect(host: settings.host, port: settings.port, on: loop, timeout: timeout,
                                    maxBulkLength: settings.maxBulkLength, tls: settings.tls)
                .flatMap { connection in
                    connection.send([settings.handshake.command], deadline: deadline).flatMapThrowing { replies in
                        do {
                            try Handshake.check(replies[0])
                        } catch {
                            connection.close()
                            throw error
                        }
                        return connection
                    }
                }
                .whenComplete { [self] result in
                    switch result {
                    case .success(let connection):
                        slot.withLock { state in
                            state.slot = .ready(connection)
                            state.backoff = settings.reconnectBackoff.initial
                        }
                        lastRefusal.withLock { $0 = nil }
                        connection.channel.closeFuture.whenComplete { _ in
                            slot.withLock { state in
                                guard case .ready(let current) = state.slot, current === connection else { return }
                                state.slot = .idle
                            }
                        }
                        promise.succeed(connection)
                    case .failure(let failure):
                        let error = RedisError(wrapping: failure, context: "connecting to \(settings.host):\(settings.port)")
                        if error.code == .authentication || error.code == .unsupportedServer || error.code == .tls {
                            lastRefusal.withLock { $0 = error }
                        }
                        slot.withLock { state in
                            state.slot = .backingOff(until: .now() + state.backoff, error: error)
                            state.backoff = min(state.backoff * 2, settings.reconnectBackoff.maximum)
                        }
                        counters.reconnects.add(1, ordering: .relaxed)
                        promise.fail(error)
                    }
                }
            return promise.futureResult
        }
    }

    private func admit() throws {
        guard breaker.admit() else {
            counters.breakerRejections.add(1, ordering: .relaxed)
            throw RedisError(.breakerOpen, "\(settings.host):\(settings.port) failed \(settings.breakerThreshold) times in a row")
        }
    }

    private func recordSuccess() {
        breaker.recordSuccess()
    }

    private func recordFailure() {
        if breaker.recordFailure() { counters.breakerOpens.add(1, ordering: .relaxed) }
    }

    func close() {
        isClosed.store(true, ordering: .relaxed)
        for slot in slots {
            let connection: RedisConnection? = slot.withLock { state in
                defer { state.slot = .idle }
                if case .ready(let connection) = state.slot { return connection }
                return nil
            }
            connection?.close()
        }
    }
}

/// The pool's counters (relaxed atomics).
final class PoolCounters: Sendable {
    let timeouts = Atomic<Int>(0), breakerOpens = Atomic<Int>(0), breakerRejections = Atomic<Int>(0), reconnects = Atomic<Int>(0)
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow
                            ? .max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
#endif
