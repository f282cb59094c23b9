#if Redis
import Larder
import NIOCore
import Synchronization

/// A Redis Cluster as ``RedisServers``: a ``RedisConnectionPool`` per primary, picked by the
/// slot of each command's key in the **slot map**, following `MOVED` and `ASK` redirections.
///
/// The slot map is read (`CLUSTER SLOTS`) from the first node that answers: the known primaries,
/// then their replicas, then the seeds. It is read again when a node fails or answers `MOVED` or
/// `CLUSTERDOWN` (at most once per `refreshGap`, one **refresh** at a time) and every
/// `refreshInterval` in any case. Until a failed primary's replica has taken over and a refresh
/// has seen it, commands for its slots fail (a miss for the store); the other slots are served
/// throughout. Observers of the primaries (the tracking connections) hear of every change.
final class RedisCluster: RedisServers {
    struct Settings: Sendable {
        /// Where the first slot map is read.
        var seeds: [RedisStore.Node]
        /// Every node's pool: these settings with the node's address.
        var pool: RedisConnectionPool.Settings
        /// The shortest time between two refreshes.
        var refreshGap: Duration
        /// How often the slot map is read when nothing asked for it.
        var refreshInterval: Duration
        /// Redirections one command follows before its last answer is its reply.
        var maxRedirections: Int
    }

    private struct State {
        var topology: ClusterTopology?
        var pools: [RedisStore.Node: RedisConnectionPool] = [:]
        /// The refresh waiting for its gap or in flight; its result says whether the map was read.
        var refresh: Task<RedisError?, Never>?
        var lastRefresh: ContinuousClock.Instant?
        /// Why the last refresh read no slot map (`nil` after one that did).
        var lastRefreshFailure: RedisError?
        var observers: [@Sendable ([RedisStore.Node]) -> Void] = []
        var isClosed = false
    }

    let settings: Settings
    private let group: any EventLoopGroup
    private let state = Locked(State())
    private let periodic = Locked<Task<Void, Never>?>(nil)
    let poolCounters = PoolCounters()
    /// Redirections followed (`MOVED`, `ASK`, `TRYAGAIN`).
    let redirections = Atomic<Int>(0)
    /// Slot maps read.
    let refreshes = Atomic<Int>(0)

    init(settings: Settings, group: any EventLoopGroup) {
        self.settings = settings
        self.group = group
        let task = Task.repeating(every: settings.refreshInterval, on: self) { cluster in cluster.requestRefresh() }
        periodic.withLock { $0 = task }
    }

    var name: String { "cluster " + settings.seeds.map(\.description).joined(separator: ",") }

    var refusal: RedisError? {
        let pools = state.withLock { Array($0.pools.values) }
        return pools.lazy.compactMap { $0.lastRefusal.withLock { $0 } }.first
    }

    var openBreakers: Int {
        state.withLock { Array($0.pools.values) }.filter(\.isBreakerOpen).count
    }

    // MARK: - Sending

    func send(_ commands: [[RESPArgument]], routedBy key: [UInt8]?) async throws -> [RESPValue] {
        let slot = key.map { HashSlot.of($0) }
        var target = try await primary(forSlot: slot)
        var asking = false
        var replies = [RESPValue?](repeating: nil, count: commands.count)
        var pending = Array(commands.indices)
        for hop in 0...settings.maxRedirections {
            let answers = try await send(pending.map { commands[$0] }, to: target, asking: asking)
            var redirected: [Int] = []
            var redirect: ClusterRedirect?
            for (index, answer) in zip(pending, answers) {
                if hop < settings.maxRedirections, let asked = ClusterRedirect(answer, askedHost: target.host) {
                    redirected.append(index)
                    redirect = asked
                } else {
                    replies[index] = answer
                }
            }
            guard let redirect else { break }
            redirections.add(1, ordering: .relaxed)
            pending = redirected
            switch redirect {
            case .moved(let slot, let node):
                state.withLock { $0.topology?.assign(slot: slot, to: node) }
                requestRefresh()
                (target, asking) = (node, false)
            case .ask(_, let node):
                (target, asking) = (node, true)
            case .tryAgain:
                try? await Task.sleep(for: .milliseconds(10 * (hop + 1)))
            }
        }
        return replies.map { $0 ?? .error("TRYAGAIN redirections exhausted") }
    }

    func sendAll(_ commands: [(key: [UInt8], command: [RESPArgument])]) async -> [Result<RESPValue, RedisError>] {
        // Each server's share, in the order asked.
        var shares: [RedisStore.Node: [Int]] = [:]
        var unserved: [Int] = []
        let topology: ClusterTopology?
        do {
            _ = try await primary(forSlot: nil)
            topology = state.withLock { $0.topology }
        } catch {
            let failure = error as? RedisError ?? RedisError(.connection, "\(error)")
            return commands.map { _ in .failure(failure) }
        }
        for (index, command) in commands.enumerated() {
            if let node = topology?.primary(forSlot: HashSlot.of(command.key)) {
                shares[node, default: []].append(index)
            } else {
                unserved.append(index)
            }
        }
        var results = [Result<RESPValue, RedisError>](
            repeating: .failure(RedisError(.connection, "no node of the cluster serves the slot")), count: commands.count)
        if !unserved.isEmpty { requestRefresh() }
        await withTaskGroup(of: [(Int, Result<RESPValue, RedisError>)].self) { group in
            for (node, share) in shares {
                group.addTask {
                    do {
                        let answers = try await self.send(share.map { commands[$0].command }, to: node, asking: false)
                        var done: [(Int, Result<RESPValue, RedisError>)] = []
                        for (index, answer) in zip(share, answers) {
                            if ClusterRedirect(answer, askedHost: node.host) != nil {
                                // Rare (a slot moved or is moving): this command alone, redirected.
                                do {
                                    let reply = try await self.send([commands[index].command], routedBy: commands[index].key)[0]
                                    done.append((index, .success(reply)))
                                } catch {
                                    done.append((index, .failure(error as? RedisError ?? RedisError(.connection, "\(error)"))))
                                }
                            } else {
                                done.append((index, .success(answer)))
                            }
                        }
                        return done
                    } catch {
                        let failure = error as? RedisError ?? RedisError(.connection, "\(error)")
                        return share.map { ($0, .failure(failure)) }
                    }
                }
            }
            for await done in group {
                for (index, result) in done { results[index] = result }
            }
        }
        return results
    }

    func multiKeyGroups(_ keys: [[UInt8]]) -> [[Int]] {
        var groups: [Int: [Int]] = [:]
        var order: [Int] = []
        for (index, key) in keys.enumerated() {
            let slot = HashSlot.of(key)
            if groups[slot] == nil { order.append(slot) }
            groups[slot, default: []].append(index)
        }
        return order.map { groups[$0]! }
    }

    func everyServer() async throws -> [RedisConnectionPool] {
        _ = try await primary(forSlot: nil)
        let primaries = state.withLock { $0.topology?.primaries ?? [] }
        return primaries.compactMap(pool(for:))
    }

    /// Sends `commands` pipelined to `node`, each after `ASKING` when `asking`; their replies.
    /// A node that fails asks for a refresh: its replica may have taken over.
    private func send(_ commands: [[RESPArgument]], to node: RedisStore.Node, asking: Bool) async throws -> [RESPValue] {
        guard let pool = pool(for: node) else { throw RedisError(.closed, "the store is closed") }
        let sent = asking ? commands.flatMap { [[.string("ASKING")], $0] } : commands
        let replies: [RESPValue]
        do {
            replies = try await pool.send(sent)
        } catch let error as RedisError {
            if error.code != .closed { requestRefresh() }
            throw error
        }
        if replies.contains(where: { if case .error(let message) = $0 { message.hasPrefix("CLUSTERDOWN") } else { false } }) {
            requestRefresh()
        }
        return asking ? stride(from: 1, to: replies.count, by: 2).map { replies[$0] } : replies
    }

    /// The primary of `slot` (`nil`: any primary). Without one in the slot map, the first call
    /// waits for the first refresh; once a refresh has run, a call fails at once (a miss) and asks
    /// for another, so an unreachable cluster costs no call more than its deadline.
    private func primary(forSlot slot: Int?) async throws -> RedisStore.Node {
        func lookUp() -> (node: RedisStore.Node?, hasRefreshed: Bool, failure: RedisError?) {
            state.withLock { state in
                let node = state.topology.flatMap { topology in
                    slot.map { topology.primary(forSlot: $0) } ?? topology.primaries.first
                }
                return (node, state.lastRefresh != nil, state.lastRefreshFailure)
            }
        }
        var found = lookUp()
        if let node = found.node { return node }
        if found.hasRefreshed {
            requestRefresh()
        } else {
            _ = await refresh()
            found = lookUp()
            if let node = found.node { return node }
        }
        throw found.failure ?? RedisError(.connection, "no node of the cluster serves slot \(slot.map(String.init) ?? "any")")
    }

    /// The pool of `node`, made on first use; `nil` once closed.
    private func pool(for node: RedisStore.Node) -> RedisConnectionPool? {
        state.withLock { state in
            guard !state.isClosed else { return nil }
            if let pool = state.pools[node] { return pool }
            var settings = settings.pool
            settings.host = node.host
            settings.port = node.port
            let pool = RedisConnectionPool(settings: settings, group: group, counters: poolCounters)
            state.pools[node] = pool
            return pool
        }
    }

    // MARK: - The slot map

    /// Calls `observer` with the primaries now (if the map was read) and after every change.
    func observePrimaries(_ observer: @escaping @Sendable ([RedisStore.Node]) -> Void) {
        let primaries: [RedisStore.Node]? = state.withLock { state in
            state.observers.append(observer)
            return state.topology?.primaries
        }
        if let primaries { observer(primaries) }
    }

    /// Asks for a refresh without waiting for it.
    func requestRefresh() {
        _ = refreshTask()
    }

    /// Waits for a refresh (the one pending, or a new one); the error if no node answered.
    private func refresh() async -> RedisError? {
        guard let task = refreshTask() else { return RedisError(.closed, "the store is closed") }
        return await task.value
    }

    /// The pending refresh, or a new one that starts once `refreshGap` has passed since the last.
    private func refreshTask() -> Task<RedisError?, Never>? {
        state.withLock { state -> Task<RedisError?, Never>? in
            guard !state.isClosed else { return nil }
            if let pending = state.refresh { return pending }
            let notBefore = state.lastRefresh.map { $0 + settings.refreshGap }
            let task = Task { await self.runRefresh(notBefore: notBefore) }
            state.refresh = task
            return task
        }
    }

    /// Reads the slot map (not before `notBefore`) and applies it: pools of nodes that are no
    /// longer primaries are closed, and the observers hear of a change of primaries.
    private func runRefresh(notBefore: ContinuousClock.Instant?) async -> RedisError? {
        if let notBefore, notBefore > .now { try? await Task.sleep(until: notBefore, clock: .continuous) }
        let result = await readSlotMap()
        let (retired, observers) = state.withLock { state -> ([RedisConnectionPool], [@Sendable ([RedisStore.Node]) -> Void]) in
            state.refresh = nil
            state.lastRefresh = .now
            guard case .success(let topology) = result else {
                if case .failure(let error) = result { state.lastRefreshFailure = error }
                return ([], [])
            }
            state.lastRefreshFailure = nil
            let changed = state.topology?.primaries != topology.primaries
            state.topology = topology
            var retired: [RedisConnectionPool] = []
            for (node, pool) in state.pools where !topology.primaries.contains(node) {
                retired.append(pool)
                state.pools[node] = nil
            }
            return (retired, changed ? state.observers : [])
        }
        for pool in retired { pool.close() }
        switch result {
        case .success(let topology):
            refreshes.add(1, ordering: .relaxed)
            for observer in observers { observer(topology.primaries) }
            return nil
        case .failure(let error):
            return error
        }
    }

    /// The slot map of the first node that answers `CLUSTER SLOTS` with one: the known primaries,
    /// their replicas, then the seeds (a node without a pool is asked on a connection of its own).
    private func readSlotMap() async -> Result<ClusterTopology, RedisError> {
        let known = state.withLock { $0.topology?.nodes ?? [] }
        var candidates: [RedisStore.Node] = []
        for node in known + settings.seeds where !candidates.contains(node) { candidates.append(node) }
        var lastError = RedisError(.connection, "no node of \(name) answered CLUSTER SLOTS")
        for node in candidates {
            let existing = state.withLock { $0.pools[node] }
            var settings = settings.pool
            (settings.host, settings.port, settings.connectionCount) = (node.host, node.port, 1)
            let pool = existing ?? RedisConnectionPool(settings: settings, group: group, counters: poolCounters)
            defer { if existing == nil { pool.close() } }
            do {
                let reply = try await pool.send([[.string("CLUSTER"), .string("SLOTS")]])[0]
                if case .error(let message) = reply {
                    lastError = RedisError(.server, "\(node): CLUSTER SLOTS answered \(message)")
                    continue
                }
                let topology = try ClusterTopology.parse(slotsReply: reply, askedHost: node.host)
                // A node that knows no slots yet (just started or joining) is no authority.
                guard !topology.primaries.isEmpty else { continue }
                return .success(topology)
            } catch let error as RedisError {
                lastError = error
                if error.code == .authentication || error.code == .unsupportedServer { return .failure(error) }
            } catch {
                lastError = RedisError(.connection, "\(node): \(error)")
            }
        }
        return .failure(lastError)
    }

    func close() {
        let (pools, refresh) = state.withLock { state in
            state.isClosed = true
            defer { state.pools = [:] }
            return (Array(state.pools.values), state.refresh)
        }
        refresh?.cancel()
        periodic.withLock { $0 }?.cancel()
        for pool in pools { pool.close() }
    }
}

extension Task where Success == Void, Failure == Never {
    /// A task that calls `tick` with `owner` every `interval`, until it is cancelled or the owner
    /// is gone (it holds the owner weakly).
    static func repeating<Owner: AnyObject & Sendable>(
        every interval: Duration, on owner: Owner, _ tick: @escaping @Sendable (Owner) -> Void
    ) -> Task<Void, Never> {
        Task { [weak owner] in
            while !Task<Never, Never>.isCancelled {
                try? await Task<Never, Never>.sleep(for: interval)
                guard let owner, !Task<Never, Never>.isCancelled else { return }
                tick(owner)
            }
        }
    }
}
#endif
