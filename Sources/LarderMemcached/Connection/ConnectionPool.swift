#if Memcached
import Larder
import LarderRemoteCore
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
///
/// A command or batch that is the only call in flight, from a caller off the event loops, goes
/// through the pool's ``DirectSocket`` instead when it is connected and free: the caller's thread
/// writes it and reads the replies, with no hop to an event loop and back.
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
        var observer: (any OperationObserver)? = nil
    }

    private enum Slot {
        case idle
        case connecting(EventLoopFuture<MetaConnection>)
        case ready(MetaConnection)
        case backingOff(until: NIODeadline)
    }

    private struct SlotState {
        var slot: Slot = .idle
        var backoff: TimeAmount
    }

    let settings: Settings
    let group: any EventLoopGroup
    private let slots: [Locked<SlotState>]
    /// The event loop each slot's connection lives on, fixed at start, so that a caller already
    /// on one of them is given that loop's connection (no thread hop either way).
    private let slotLoops: [any EventLoop]
    private let breaker: CircuitBreaker
    private let nextSlot = Atomic<Int>(0)
    private let isClosed = Atomic<Bool>(false)
    /// Commands and batches in flight: one that is alone, from a caller off the event loops,
    /// goes through `direct` (no thread hop) when that socket is free.
    private let inFlight = Atomic<Int>(0)
    private let direct: DirectSocket
    let counters = PoolCounters()
    /// Whether the server's circuit breaker is open now.
    var isBreakerOpen: Bool { breaker.isOpen }
    /// Run tasks on each connection's event loop, in the connections' order.
    let executors: [EventLoopTaskExecutor]
    /// Runs tasks on the first connection's event loop.
    var executor: EventLoopTaskExecutor { executors[0] }

    init(settings: Settings, group: any EventLoopGroup) {
        self.settings = settings
        breaker = CircuitBreaker(threshold: settings.breakerThreshold, cooldown: settings.breakerCooldown)
        self.group = group
        slots = (0..<max(1, settings.connectionCount)).map { _ in Locked(SlotState(backoff: settings.reconnectBackoff.initial)) }
        slotLoops = slots.map { _ in group.next() }
        executors = slotLoops.map(EventLoopTaskExecutor.init)
        direct = DirectSocket(
            host: settings.host, port: settings.port, connectTimeout: settings.deadline,
            retryDelay: settings.reconnectBackoff.initial, maxValueLength: settings.maxValueLength)
    }

    /// Sends `command` on one of the connections and returns its reply (error replies included).
    ///
    /// - Throws: ``MemcachedError`` (`.breakerOpen`, `.timeout`, `.connection`, `.closed`,
    ///   `.protocolViolation`).
    nonisolated(nonsending) func sendUnobserved(_ command: MetaCommand) async throws -> MetaResponse {
        guard !isClosed.load(ordering: .relaxed) else { throw MemcachedError(.closed, "the store is closed") }
        try admit()
        let deadline = NIODeadline.now() + settings.deadline
        let loopSlot = slotLoops.firstIndex { $0.inEventLoop }
        let alone = inFlight.wrappingAdd(1, ordering: .relaxed).oldValue == 0
        defer { inFlight.wrappingSubtract(1, ordering: .relaxed) }
        do {
            if alone, loopSlot == nil, DirectSocket.accepts(command), let response = try await direct.send(command, deadline: deadline) {
                recordSuccess()
                return response
            }
            let connection = try await connection(at: loopSlot ?? nextSlotInTurn(), deadline: deadline)
            // The handler keeps the deadline (one timer per connection) and resumes this task
            // from the event loop; commands queued by many callers leave in one write.
            let response = try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<MetaResponse, any Error>) in
                connection.submit(PendingCommand(command: command, promise: ReplySink(continuation), deadline: deadline))
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
    nonisolated(nonsending) func sendBatchUnobserved(_ commands: [MetaCommand]) async throws -> [MetaResponse] {
        guard !isClosed.load(ordering: .relaxed) else { throw MemcachedError(.closed, "the store is closed") }
        guard !commands.isEmpty else { return [] }
        try admit()
        let deadline = NIODeadline.now() + settings.deadline
        let loopSlot = slotLoops.firstIndex { $0.inEventLoop }
        let alone = inFlight.wrappingAdd(1, ordering: .relaxed).oldValue == 0
        defer { inFlight.wrappingSubtract(1, ordering: .relaxed) }
        do {
            if alone, loopSlot == nil, let responses = try await direct.sendBatch(commands, deadline: deadline) {
                recordSuccess()
                return responses
            }
            let connection = try await connection(at: loopSlot ?? nextSlotInTurn(), deadline: deadline)
            // One wait for the whole batch: the last reply resumes this task.
            let responses = try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<[MetaResponse], any Error>) in
                let collector = BatchCollector(count: commands.count, continuation)
                connection.submit(commands.enumerated().map { index, command in
                    PendingCommand(command: command, promise: ReplySink(collector, index: index), deadline: deadline)
                })
            }
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

    /// Whether the server's last call succeeded and its breaker is closed (one atomic load).
    var isHealthy: Bool { breaker.isHealthy }

    /// Closes every connection; later calls throw `.closed`.
    func close() async {
        isClosed.store(true, ordering: .relaxed)
        direct.close()
        for slot in slots {
            let connection: MetaConnection? = slot.withLock { state in
                defer { state.slot = .idle }
                if case .ready(let connection) = state.slot { return connection }
                return nil
            }
            try? await connection?.channel.close()
        }
    }

    // MARK: - Connections

    /// The next slot in turn, for a caller on none of the slots' event loops.
    private func nextSlotInTurn() -> Int {
        nextSlot.wrappingAdd(1, ordering: .relaxed).oldValue % slots.count
    }

    nonisolated(nonsending) private func connection(at index: Int, deadline: NIODeadline) async throws -> MetaConnection {
        enum Step { case use(MetaConnection), wait(EventLoopFuture<MetaConnection>), connect(EventLoopPromise<MetaConnection>), fail }
        let slot = slots[index]
        let step: Step = slot.withLock { state in
            switch state.slot {
            case .ready(let connection) where connection.channel.isActive: return .use(connection)
            case .connecting(let future): return .wait(future)
            case .backingOff(let until) where NIODeadline.now() < until: return .fail
            default:
                let promise = slotLoops[index].makePromise(of: MetaConnection.self)
                state.slot = .connecting(promise.futureResult)
                return .connect(promise)
            }
        }
        switch step {
        case .use(let connection): return connection
        case .wait(let future): return try await future.get()
        case .fail: throw MemcachedError(.connection, "reconnecting after a failure (back-off)")
        case .connect(let promise):
            connect(slot: slot, promise: promise, deadline: deadline)
            return try await promise.futureResult.get()
        }
    }

    private func connect(slot: Locked<SlotState>, promise: EventLoopPromise<MetaConnection>, deadline: NIODeadline) {
        let maxValueLength = settings.maxValueLength
        let timeout = max(TimeAmount.milliseconds(1), deadline - NIODeadline.now())
        let future = ClientBootstrap(group: promise.futureResult.eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The request handler parses replies itself, straight from each read.
                    try channel.pipeline.syncOperations.addHandler(MetaRequestHandler(maxValueLength: maxValueLength))
                }
            }
            .connect(host: settings.host, port: settings.port)
            .flatMapThrowing { channel in
                // On the channel's event loop: the handler is reached from there only.
                MetaConnection(channel: channel, handler: try channel.pipeline.syncOperations.handler(type: MetaRequestHandler.self))
            }
        let settings = settings
        future.whenComplete { result in
            switch result {
            case .success(let connection):
                slot.withLock { state in
                    state.slot = .ready(connection)
                    state.backoff = settings.reconnectBackoff.initial
                }
                connection.channel.closeFuture.whenComplete { _ in
                    slot.withLock { state in
                        guard case .ready(let current) = state.slot, current === connection else { return }
                        state.slot = .idle
                    }
                }
                promise.succeed(connection)
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
        guard breaker.admit() else {
            counters.breakerRejections.add(1, ordering: .relaxed)
            throw MemcachedError(.breakerOpen, "the circuit breaker is open after repeated failures")
        }
    }

    private func recordSuccess() {
        breaker.recordSuccess()
    }

    private func recordFailure() {
        if breaker.recordFailure() { counters.breakerOpens.add(1, ordering: .relaxed) }
    }
}

/// One connection: its channel, its ``MetaRequestHandler`` (touched on the event loop only) and
/// the queue through which callers on other threads hand it commands.
///
/// A caller appends its command under a short lock. While replies are due on the connection,
/// the event loop looks at the queue after its next burst of reads (the handler's
/// `afterReads`) and sends everything queued in one write, so the caller wakes nobody. When
/// nothing is due, the first caller to find the queue idle schedules one event-loop task that
/// does the same. So 32 concurrent callers cost at most one hop and one `write` between them,
/// not 32 of each. (memcached answers a connection's commands in order: the reply of a command
/// sent with the next burst, instead of at once, could not have come before the replies ahead
/// of it anyway.)
final class MetaConnection: Sendable {
    private struct Submissions {
        var commands: [PendingCommand] = []
        var isScheduled = false
        /// Replies are due, so the event loop will look at the queue after a read: a caller
        /// need not schedule anything.
        var loopWillLook = false
        /// The array the last drain handed to the handler, emptied: swapped in at the next
        /// drain so that the queue keeps its capacity instead of allocating per drain.
        var spare: [PendingCommand] = []
    }

    let channel: any Channel
    private let handler: NIOLoopBound<MetaRequestHandler>
    private let queue = Locked(Submissions())
    /// The last `loopWillLook` the loop set (kept on the loop, so that a read that changes
    /// nothing takes no lock).
    private let announced: NIOLoopBoundBox<Bool>
    /// Set by a caller off the loop that queued a command for the next read to send.
    private let deferred = Atomic<Bool>(false)

    /// Call on `channel`'s event loop.
    init(channel: any Channel, handler: MetaRequestHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        announced = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
        handler.afterReads = { [weak self] in self?.afterReads() }
    }

    func submit(_ command: PendingCommand) {
        submit(command, callerIsOnLoop: channel.eventLoop.inEventLoop)
    }

    /// ``submit(_:)`` with the caller's place given (tests play both kinds of caller).
    func submit(_ command: PendingCommand, callerIsOnLoop onLoop: Bool) {
        let schedule: Bool = queue.withLock { queue in
            queue.commands.append(command)
            return mustSchedule(&queue, onLoop: onLoop)
        }
        if schedule { channel.eventLoop.execute { self.drain(scheduled: true) } }
    }

    func submit(_ commands: [PendingCommand]) {
        let onLoop = channel.eventLoop.inEventLoop
        let schedule: Bool = queue.withLock { queue in
            // A batch usually finds the queue empty: it takes the batch's array as it is
            // (one reference) rather than a copy of each command.
            if queue.commands.isEmpty {
                queue.commands = commands
            } else {
                queue.commands.append(contentsOf: commands)
            }
            return mustSchedule(&queue, onLoop: onLoop)
        }
        if schedule { channel.eventLoop.execute { self.drain(scheduled: true) } }
    }

    /// Whether the caller that just queued a command must schedule a drain (marking it
    /// scheduled): no drain is queued and no read is due to look at the queue. A caller on the
    /// event loop itself schedules one anyway: it costs no wake-up there, and the drain runs
    /// after the tasks already queued on the loop (the other callers its last replies
    /// resumed), so their commands leave together at once instead of after the next read.
    private func mustSchedule(_ queue: inout Submissions, onLoop: Bool) -> Bool {
        if queue.isScheduled { return false }
        if !onLoop, queue.loopWillLook {
            deferred.store(true, ordering: .relaxed)
            return false
        }
        queue.isScheduled = true
        return true
    }

    /// On the event loop, after a burst of reads or at the connection's end: sends what callers
    /// off the loop queued for it, and tells callers whether a read is still due. A read that
    /// changes neither (the usual case when callers wait on the loop) takes no lock. (A caller
    /// that sets `deferred` just after the check still has its command sent: a read is due, and
    /// the next one sees the flag.)
    private func afterReads() {
        let awaiting = handler.value.isAwaitingReplies
        if awaiting == announced.value, !deferred.load(ordering: .relaxed) { return }
        drain(scheduled: false)
    }

    /// On the event loop: sends everything queued so far in one write (`scheduled`: run by the
    /// task a caller scheduled, rather than after reads).
    private func drain(scheduled: Bool) {
        let handler = handler.value
        let wasAwaiting = handler.isAwaitingReplies
        var commands: [PendingCommand] = queue.withLock { queue in
            if scheduled { queue.isScheduled = false }
            var taken: [PendingCommand] = []
            guard !queue.commands.isEmpty, scheduled || !queue.isScheduled else {
                // Nothing to send here (a scheduled drain will send what is queued): the
                // handler stays as it is.
                queue.loopWillLook = wasAwaiting
                return taken
            }
            deferred.store(false, ordering: .relaxed)
            swap(&taken, &queue.spare)
            swap(&taken, &queue.commands)
            return taken
        }
        guard !commands.isEmpty else {
            announced.value = wasAwaiting
            return
        }
        handler.submit(commands)
        // Handed back below (the handler kept no reference to the array).
        commands.removeAll(keepingCapacity: true)
        // Whether a read will come to look at the queue again; if not, commands queued while
        // this drain ran (their callers counted on a read) get a scheduled drain.
        let awaiting = handler.isAwaitingReplies
        announced.value = awaiting
        let schedule: Bool = queue.withLock { queue in
            queue.loopWillLook = awaiting
            if queue.spare.capacity == 0, commands.capacity <= 1_024 { swap(&queue.spare, &commands) }
            guard !queue.commands.isEmpty else { return false }
            return mustSchedule(&queue, onLoop: false)
        }
        if schedule { channel.eventLoop.execute { self.drain(scheduled: true) } }
    }
}

/// A task executor that runs jobs on one event loop: a task that prefers it (Swift's
/// `withTaskExecutorPreference`) runs on the thread of that loop's memcached connection, so its
/// commands are written without a hop to the loop and its replies resume it without a hop back.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}

/// Gathers the replies of one batch and resumes its caller once, with all of them or with the
/// first failure. Completed on the event loop.
final class BatchCollector: Sendable {
    private struct State {
        var responses: [MetaResponse?]
        var remaining: Int
        var continuation: UnsafeContinuation<[MetaResponse], any Error>?
    }
    private let state: Locked<State>

    init(count: Int, _ continuation: UnsafeContinuation<[MetaResponse], any Error>) {
        state = Locked(State(responses: Array(repeating: nil, count: count), remaining: count, continuation: continuation))
    }

    func succeed(_ response: MetaResponse, at index: Int) {
        let finished: (UnsafeContinuation<[MetaResponse], any Error>, [MetaResponse])? = state.withLock { state in
            guard state.continuation != nil, state.responses[index] == nil else { return nil }
            state.responses[index] = response
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            // Moved out, not copied: a reply holds two buffers, and copying would retain both.
            var all: [MetaResponse] = []
            all.reserveCapacity(state.responses.count)
            for slot in state.responses.indices { all.append(state.responses[slot].take()!) }
            return (continuation, all)
        }
        if let (continuation, responses) = finished { continuation.resume(returning: responses) }
    }

    func fail(_ error: any Error) {
        let continuation = state.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(throwing: error)
    }
}

/// Counters the pool keeps (relaxed atomics: totals, not ordering).
final class PoolCounters: Sendable {
    let timeouts = Atomic<Int>(0)
    let breakerOpens = Atomic<Int>(0)
    let breakerRejections = Atomic<Int>(0)
}
#endif
