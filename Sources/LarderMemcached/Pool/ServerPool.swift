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
/// - **Batches** of writes and removals follow the same rules, each server's part of the batch
///   sent as one quiet pipeline, every server's at once.
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

    /// One write (`ms`) or removal (`md`) of a batch (``updateBatch(_:)``).
    struct BatchUpdate: Sendable {
        let key: [UInt8]
        /// The write's envelope, `nil` for a removal.
        let envelope: ByteBuffer?
        /// The write's TTL token (ignored for a removal).
        let ttl: Int64

        static func write(_ envelope: ByteBuffer, key: [UInt8], ttl: Int64) -> BatchUpdate {
            BatchUpdate(key: key, envelope: envelope, ttl: ttl)
        }

        static func removal(key: [UInt8]) -> BatchUpdate {
            BatchUpdate(key: key, envelope: nil, ttl: 0)
        }

        /// The quiet command (`ms … q` or `md … q`), with `ttl` for a write.
        func command(ttl: Int64) -> MetaCommand {
            guard let envelope else { return MetaCommand(.delete, key: key, flags: [.quiet]) }
            return MetaCommand(.set(envelope), key: key, flags: [.ttl(ttl), .quiet])
        }

        /// Whether `response` means the server holds what this update asked for.
        func isDone(by response: MetaResponse) -> Bool {
            response.status == .stored || (envelope == nil && response.status == .notFound)
        }
    }

    /// The writes and removals of ``update(key:ttl:make:)`` for many keys, each server's part
    /// sent as one quiet batch (ended by `mn`, flushed once), every server's at once; then, with
    /// a gutter, the writes no server took and every removal as one batch per gutter server.
    ///
    /// Each key is journaled on a server whose batch failed or that refused it (`NS`, an error),
    /// and settled on one that took it. Returns, per update, the first reply of a server that
    /// took it, or the last failure.
    nonisolated(nonsending) func updateBatch(_ updates: [BatchUpdate]) async -> [Result<MetaResponse, any Error>] {
        for update in updates where update.envelope != nil { noteLifetime(update.ttl) }
        var parts: [ObjectIdentifier: (member: Member, indices: [Int])] = [:]
        for index in updates.indices {
            for member in replicas(for: updates[index].key) {
                parts[ObjectIdentifier(member), default: (member, [])].indices.append(index)
            }
        }
        var taken: [MetaResponse?] = Array(repeating: nil, count: updates.count)
        var failures: [(any Error)?] = Array(repeating: nil, count: updates.count)
        let servers = Array(parts.values)
        let replies = await sendQuietBatches(servers.map { part in
            (part.member, part.indices.map { updates[$0].command(ttl: updates[$0].ttl) })
        })
        for (part, reply) in zip(servers, replies) {
            let stale = staleUntil()
            switch reply {
            case .failure(let error):
                for index in part.indices {
                    part.member.journal.record(updates[index].key, staleUntil: stale)
                    failures[index] = error
                }
            case .success(let responses):
                for (position, index) in part.indices.enumerated() {
                    let response = position < responses.count ? responses[position] : MetaResponse(status: .error)
                    if updates[index].isDone(by: response) {
                        part.member.journal.settle(updates[index].key)
                        if taken[index] == nil { taken[index] = response }
                    } else {
                        part.member.journal.record(updates[index].key, staleUntil: stale)
                        failures[index] = MemcachedError(.server, "\(part.member.server) answered \(response.status)")
                    }
                }
                replayIfNeeded(part.member)
            }
        }
        if let gutter {
            // A write no server took lands in the gutter (lifetime capped); a removal always does.
            var gutterParts: [ObjectIdentifier: (member: Member, indices: [Int])] = [:]
            for index in updates.indices where taken[index] == nil || updates[index].envelope == nil {
                guard let member = gutterMember(for: updates[index].key) else { continue }
                gutterParts[ObjectIdentifier(member), default: (member, [])].indices.append(index)
            }
            let gutterServers = Array(gutterParts.values)
            let gutterReplies = await sendQuietBatches(gutterServers.map { part in
                (part.member, part.indices.map { index in
                    let ttl = updates[index].ttl
                    return updates[index].command(ttl: ttl == 0 || ttl > gutter.maxTTL ? gutter.maxTTL : ttl)
                })
            })
            for (part, reply) in zip(gutterServers, gutterReplies) {
                guard case .success(let responses) = reply else { continue }
                for (position, index) in part.indices.enumerated() where position < responses.count {
                    if updates[index].isDone(by: responses[position]) {
                        if taken[index] == nil { taken[index] = responses[position] }
                    }
                }
            }
        }
        return updates.indices.map { index in
            if let response = taken[index] { return .success(response) }
            return .failure(failures[index] ?? MemcachedError(.connection, "no server took the command"))
        }
    }

    /// Sends each server its quiet commands, ended by `mn`, as one batch (see
    /// ``ConnectionPool/sendBatch(_:)``), every server's at once; returns each batch's replies
    /// (one per command given, the `mn`'s left out) or failure, in the order given.
    nonisolated(nonsending) func sendQuietBatches(
        _ batches: [(member: Member, commands: [MetaCommand])]
    ) async -> [Result<[MetaResponse], any Error>] {
        let ended = batches.map { batch in (batch.member, batch.commands + [MetaCommand(.noop)]) }
        var replies: [Result<[MetaResponse], any Error>] = []
        replies.reserveCapacity(ended.count)
        if ended.count == 1 {
            // One server's batch is sent from here; several are sent at once, one task each.
            do { replies.append(.success(Array(try await ended[0].0.connections.sendBatch(ended[0].1).dropLast()))) }
            catch { replies.append(.failure(error)) }
        } else {
            let sends = ended.map { member, commands in
                Task { Array(try await member.connections.sendBatch(commands).dropLast()) }
            }
            for send in sends { replies.append(await send.result) }
        }
        return replies
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
