#if Redis
import Synchronization

/// Where a ``RedisStore`` sends its commands: one server's ``RedisConnectionPool``, or a
/// ``RedisCluster`` that picks a primary's pool by the slot of each command's key.
///
/// Every command names the wire key it is **routed by**: all the keys a command (or a pipeline
/// of commands sent together) touches share that key's slot.
protocol RedisServers: Sendable {
    /// Sends `commands`, pipelined, to the server of `key`'s slot (`nil`: any server); their
    /// replies in order, error replies included.
    ///
    /// - Throws: ``RedisError`` when the server cannot be reached or did not answer in time.
    func send(_ commands: [[RESPArgument]], routedBy key: [UInt8]?) async throws -> [RESPValue]

    /// Sends each command to the server of its key, every server's share pipelined and all
    /// servers at once; each command's reply, or the error of its server.
    func sendAll(_ commands: [(key: [UInt8], command: [RESPArgument])]) async -> [Result<RESPValue, RedisError>]

    /// The positions of `keys` grouped so that one multi-key command (`MGET`, `UNLINK`) may name
    /// each group's keys together.
    func multiKeyGroups(_ keys: [[UInt8]]) -> [[Int]]

    /// A pool for each server that holds a share of the keys, for commands each must run (`SCAN`).
    ///
    /// - Throws: ``RedisError`` when a cluster's slot map cannot be read.
    func everyServer() async throws -> [RedisConnectionPool]

    /// The last handshake refusal (a wrong password), which every later failure names.
    var refusal: RedisError? { get }

    /// The counters every pool of these servers adds to.
    var poolCounters: PoolCounters { get }

    /// How many of the servers' circuit breakers are open now.
    var openBreakers: Int { get }

    /// The servers as an error message names them.
    var name: String { get }

    /// Closes every connection; later calls fail with ``RedisError/Code/closed``.
    func close()
}

extension RedisConnectionPool: RedisServers {
    func send(_ commands: [[RESPArgument]], routedBy key: [UInt8]?) async throws -> [RESPValue] {
        try await send(commands)
    }

    func sendAll(_ commands: [(key: [UInt8], command: [RESPArgument])]) async -> [Result<RESPValue, RedisError>] {
        do {
            return try await send(commands.map(\.command)).map { .success($0) }
        } catch {
            let failure = error as? RedisError ?? RedisError(.connection, "\(error)")
            return commands.map { _ in .failure(failure) }
        }
    }

    /// One group: a single server takes keys of every slot in one command.
    func multiKeyGroups(_ keys: [[UInt8]]) -> [[Int]] {
        keys.isEmpty ? [] : [Array(keys.indices)]
    }

    func everyServer() async throws -> [RedisConnectionPool] { [self] }

    var refusal: RedisError? { lastRefusal.withLock { $0 } }

    var poolCounters: PoolCounters { counters }

    var openBreakers: Int { isBreakerOpen ? 1 : 0 }

    var name: String { "\(settings.host):\(settings.port)" }
}
#endif
