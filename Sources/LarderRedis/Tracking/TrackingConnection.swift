#if Redis
import NIOCore
import NIOPosix
import Synchronization

/// The one connection per ``RedisStore`` on which the server pushes invalidations:
/// `CLIENT TRACKING ON BCAST PREFIX <namespace>` over RESP3, so every change of a key under the
/// namespace, by any client, arrives here as an `invalidate` push.
///
/// A loop keeps it up: connect, `HELLO 3` (with `AUTH`), subscribe, then a `PING` every
/// `heartbeat` (a server that stopped answering is a lost connection too). Each time the
/// stream starts or stops, ``onGap`` runs, and ``isLive`` says whether invalidations are
/// flowing now: a value read while it is not cannot be guarded.
final class TrackingConnection: Sendable {
    struct Settings: Sendable {
        var host: String
        var port: Int
        var handshake: Handshake
        var tls: TLSClient?
        var prefix: String
        var deadline: TimeAmount
        var heartbeat: Duration
        var reconnectBackoff: (initial: Duration, maximum: Duration)
    }

    let settings: Settings
    private let group: any EventLoopGroup
    /// Receives the keys of each `invalidate` push (`nil`: every key, after a flush).
    private let onInvalidate: @Sendable ([String]?) -> Void
    /// Runs when the stream starts and when it stops.
    private let onGap: @Sendable () -> Void
    private let live = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)
    private let current = Mutex<RedisConnection?>(nil)
    private let loop = Mutex<Task<Void, Never>?>(nil)
    /// Times the stream was (re)established.
    let subscriptions = Atomic<Int>(0)
    /// The last error that stopped the stream (for diagnostics).
    let lastError = Mutex<RedisError?>(nil)

    init(settings: Settings, group: any EventLoopGroup, onInvalidate: @escaping @Sendable ([String]?) -> Void,
         onGap: @escaping @Sendable () -> Void) {
        self.settings = settings
        self.group = group
        self.onInvalidate = onInvalidate
        self.onGap = onGap
    }

    /// Whether invalidations are flowing now.
    var isLive: Bool { live.load(ordering: .acquiring) }

    /// Starts the loop (once).
    func start() {
        loop.withLock { task in
            guard task == nil, !closed.load(ordering: .relaxed) else { return }
            task = Task { await self.run() }
        }
    }

    func close() async {
        closed.store(true, ordering: .relaxed)
        let task = loop.withLock { $0 }
        task?.cancel()
        current.withLock { $0 }?.close()
        await task?.value
    }

    private func run() async {
        var backoff = settings.reconnectBackoff.initial
        while !closed.load(ordering: .relaxed), !Task.isCancelled {
            do {
                let connection = try await subscribe()
                backoff = settings.reconnectBackoff.initial
                // Whatever was read before now may have changed unseen: drop it, then go live.
                onGap()
                live.store(true, ordering: .releasing)
                subscriptions.add(1, ordering: .relaxed)
                // A closed connection is a gap at once, not at the next heartbeat.
                connection.channel.closeFuture.whenComplete { [self] _ in
                    if live.exchange(false, ordering: .acquiringAndReleasing) { onGap() }
                }
                try await keepAlive(connection)
            } catch {
                lastError.withLock { $0 = RedisError(wrapping: error) }
            }
            if live.exchange(false, ordering: .acquiringAndReleasing) {
                onGap()
            }
            current.withLock { $0 }?.close()
            guard !closed.load(ordering: .relaxed) else { return }
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, settings.reconnectBackoff.maximum)
        }
    }

    /// Connects, says HELLO and subscribes; the connection, live.
    private func subscribe() async throws -> RedisConnection {
        let deadline = NIODeadline.now() + settings.deadline
        let onInvalidate = onInvalidate
        let connection = try await RedisConnection.connect(
            host: settings.host, port: settings.port, on: group.next(), timeout: settings.deadline, maxBulkLength: 1 << 20,
            tls: settings.tls, onPush: { items in Self.deliver(items, to: onInvalidate) }
        ).get()
        current.withLock { $0 = connection }
        if closed.load(ordering: .relaxed) { connection.close() }
        let replies = try await connection.send([
            settings.handshake.command,
            [.string("CLIENT"), .string("TRACKING"), .string("ON"), .string("BCAST"), .string("PREFIX"), .string(settings.prefix)],
        ], deadline: deadline).get()
        try Handshake.check(replies[0])
        guard case .simpleString("OK") = replies[1] else {
            throw RedisError(.server, "CLIENT TRACKING answered \(replies[1])")
        }
        return connection
    }

    /// Pings until the connection fails or the store closes.
    private func keepAlive(_ connection: RedisConnection) async throws {
        while !closed.load(ordering: .relaxed), connection.isActive {
            try await Task.sleep(for: settings.heartbeat)
            let reply = try await connection.send([[.string("PING")]], deadline: .now() + settings.deadline).get()
            guard case .simpleString = reply[0] else { throw RedisError(.server, "PING answered \(reply[0])") }
        }
    }

    /// Decodes an `invalidate` push: `["invalidate", [keys…]]`, or `["invalidate", null]` after
    /// a flush. Other pushes are ignored.
    static func deliver(_ items: [RESPValue], to onInvalidate: @Sendable ([String]?) -> Void) {
        guard items.count == 2, items[0].string == "invalidate" else { return }
        switch items[1] {
        case .null:
            onInvalidate(nil)
        case .array(let keys):
            onInvalidate(keys.compactMap(\.string))
        default:
            return
        }
    }
}
#endif
