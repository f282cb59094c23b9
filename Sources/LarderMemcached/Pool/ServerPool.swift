#if Memcached
import LarderRemoteCore
import Foundation
import Larder
import NIOCore
import Synchronization

/// The servers a ``MemcachedStore`` spreads its keys over, and where each command goes.
///
/// Each server has its own ``ConnectionPool`` (connections, deadline, back-off, breaker) and
/// its own ``RecoveryJournal``. A key's servers come from the ``KetamaRing``: its own server
/// first, then (with replicas) the next distinct servers round the ring. The rules, written
/// once here:
/// - **Reads** go to the key's servers in turn until one answers; a server whose journal still
///   owes the key a delete is skipped. When none answers, a gutter pool is read, if configured.
/// - **Writes and removals** go to every replica at once. A replica that fails records the key
///   in its journal; with a gutter pool, a write its own server refused lands in the gutter
///   with a short lifetime, and a removal always reaches the gutter too. A write fails only
///   when no server took it.
/// - A server that answers again first has the deletes its journal owes sent (in the
///   background), one quiet batch per call.
final class ServerPool: Sendable {
    /// One server: its address, connections and journal.
    final class Member: Sendable {
        let server: MemcachedStore.Server
        let connections: ConnectionPool
        let journal: RecoveryJournal

        init(server: MemcachedStore.Server, connections: ConnectionPool, journalLimit: Int) {
            self.server = server
            self.connections = connections
            journal = RecoveryJournal(limit: journalLimit)
        }
    }

    let members: [Member]
    let ring: KetamaRing
    let replicas: Int
    let gutter: (members: [Member], ring: KetamaRing, maxTTL: Int64)?
    /// The longest remote lifetime this store has written, in seconds (`Int64.max`: never
    /// expires): how long an overflowed journal keeps its server's reads misses.
    private let longestLifetime = Atomic<Int64>(0)
    private let now: @Sendable () -> Date

    init(
        servers: [MemcachedStore.Server], failover: MemcachedStore.Failover, journalLimit: Int,
        now: @escaping @Sendable () -> Date, makeConnections: (MemcachedStore.Server) -> ConnectionPool
    ) {
        func makeMembers(_ servers: [MemcachedStore.Server]) -> [Member] {
            servers.map { Member(server: $0, connections: makeConnections($0), journalLimit: journalLimit) }
        }
        func makeRing(_ servers: [MemcachedStore.Server]) -> KetamaRing {
            KetamaRing(servers: servers.map { ($0.host, $0.port, $0.weight) })
        }
        members = makeMembers(servers)
        ring = makeRing(servers)
        self.now = now
        switch failover.kind {
        case .none:
            replicas = 1
            gutter = nil
        case .replicas(let count):
            replicas = min(count, servers.count)
            gutter = nil
        case .gutter(let gutterServers, let maxTTL):
            replicas = 1
            gutter = (makeMembers(gutterServers), makeRing(gutterServers), max(1, Int64(maxTTL.seconds.rounded(.up))))
        }
    }

    /// Every member, the gutter's included.
    var allMembers: [Member] { members + (gutter?.members ?? []) }

    /// The key's own server.
    func primary(for key: [UInt8]) -> Member {
        members.count == 1 ? members[0] : members[ring.server(for: key)]
    }

    /// The key's servers: its own, then its replicas.
    func replicas(for key: [UInt8]) -> [Member] {
        if replicas == 1 { return [primary(for: key)] }
        return ring.servers(for: key, count: replicas).map { members[$0] }
    }

    private func gutterMember(for key: [UInt8]) -> Member? {
        guard let gutter else { return nil }
        return gutter.members.count == 1 ? gutter.members[0] : gutter.members[gutter.ring.server(for: key)]
    }

    // MARK: - Reads

    /// Sends a read of `key` to its servers in turn (skipping one that owes the key a delete),
    /// then to the gutter. Throws the last failure when nobody answered; a key every server
    /// skipped is a miss (`nil`).
    nonisolated(nonsending) func read(_ command: MetaCommand, key: [UInt8]) async throws -> (MetaResponse, Member)? {
        // A server that owes the key a delete is skipped (a miss, not a failure): the gutter is
        // read only while a server is failing, since after a heal it may hold an older value.
        var lastError: (any Error)?
        let now = now()
        var skippedFailing = false
        for member in replicas(for: key) {
            if member.journal.blocks(key, now: now) {
                // The owed delete goes out first (the attempt doubles as the server's probe).
                replayIfNeeded(member)
                if !member.connections.isHealthy { skippedFailing = true }
                continue
            }
            do {
                let response = try await member.connections.send(command)
                replayIfNeeded(member)
                return (response, member)
            } catch {
                lastError = error
            }
        }
        if lastError != nil || skippedFailing, let member = gutterMember(for: key) {
            do {
                return (try await member.connections.send(command), member)
            } catch {
                lastError = error
            }
        }
        if let lastError { throw lastError }
        return nil
    }

    // MARK: - Writes and removals

    /// Sends a write (`ms`) or a removal (`md`) of `key` to each of its servers; with a gutter,
    /// a write its server refused goes to the gutter (lifetime capped) and a removal always
    /// does. Returns the first reply of a server that answered.
    ///
    /// - Parameters:
    ///   - ttl: the write's TTL token (`nil` for a removal), recorded for overflow bounds and
    ///     capped for the gutter.
    ///   - make: builds the command for a TTL token (the same command when `ttl` is `nil`).
    nonisolated(nonsending) func update(
        key: [UInt8], ttl: Int64?, make: @Sendable (Int64?) -> MetaCommand
    ) async throws -> MetaResponse {
        if let ttl { noteLifetime(ttl) }
        let targets = replicas(for: key)
        var first: MetaResponse?
        var lastError: (any Error)?
        var primaryFailed = false
        if targets.count == 1 {
            do {
                first = try await send(make(ttl), to: targets[0], key: key, isWrite: true)
            } catch {
                lastError = error
                primaryFailed = true
            }
        } else {
            let command = make(ttl)
            let sends = targets.map { member in
                Task { try await self.send(command, to: member, key: key, isWrite: true) }
            }
            var results: [Result<MetaResponse, any Error>?] = []
            for send in sends { results.append(await send.result) }
            for result in results {
                switch result {
                case .success(let response): if first == nil { first = response }
                case .failure(let error): lastError = error
                case nil: break
                }
            }
            primaryFailed = first == nil
        }
        if let member = gutterMember(for: key), primaryFailed || ttl == nil {
            let capped = ttl.map { $0 == 0 || $0 > gutter!.maxTTL ? gutter!.maxTTL : $0 }
            do {
                let response = try await member.connections.send(make(capped))
                if first == nil { first = response }
            } catch {
                lastError = error
            }
        }
        if let first { return first }
        throw lastError ?? MemcachedError(.connection, "no server took the command")
    }

    /// Sends `command` about `key` to `member`, journaling the key when a write or removal fails
    /// and settling it when one succeeds.
    nonisolated(nonsending) func send(_ command: MetaCommand, to member: Member, key: [UInt8], isWrite: Bool) async throws -> MetaResponse {
        do {
            let response = try await member.connections.send(command)
            if isWrite {
                if response.status.isError {
                    member.journal.record(key, staleUntil: staleUntil())
                } else {
                    member.journal.settle(key)
                }
            }
            replayIfNeeded(member)
            return response
        } catch {
            if isWrite { member.journal.record(key, staleUntil: staleUntil()) }
            throw error
        }
    }

    // MARK: - Recovery

    /// When `member` answers and its journal owes deletes, sends them in the background.
    private func replayIfNeeded(_ member: Member) {
        guard !member.journal.isEmpty, let keys = member.journal.beginReplay() else { return }
        Task {
            var failed = false
            defer { member.journal.finishReplay(failed: failed) }
            for chunk in stride(from: 0, to: keys.count, by: 256) {
                let part = keys[chunk..<min(chunk + 256, keys.count)]
                var commands = part.map { MetaCommand(.delete, key: $0) }
                commands.append(MetaCommand(.noop))
                guard let responses = try? await member.connections.sendBatch(commands) else {
                    failed = true
                    return
                }
                for (index, key) in part.enumerated() where index < responses.count {
                    if responses[index].status == .stored || responses[index].status == .notFound {
                        member.journal.settle(key)
                    }
                }
            }
        }
    }

    private func noteLifetime(_ ttl: Int64) {
        let seconds: Int64
        if ttl == 0 {
            seconds = .max
        } else if ttl > RemoteTTL.relativeLimit {
            seconds = max(1, ttl - Int64(now().timeIntervalSince1970))
        } else {
            seconds = ttl
        }
        var current = longestLifetime.load(ordering: .relaxed)
        while seconds > current {
            let (exchanged, original) = longestLifetime.compareExchange(
                expected: current, desired: seconds, ordering: .relaxed)
            if exchanged { break }
            current = original
        }
    }

    /// When every value this store has written so far has surely expired.
    private func staleUntil() -> Date {
        let seconds = longestLifetime.load(ordering: .relaxed)
        return seconds == .max ? .distantFuture : now().addingTimeInterval(Double(seconds) + 1)
    }

    // MARK: - Life

    func close() async {
        for member in allMembers { await member.connections.close() }
    }
}
#endif
