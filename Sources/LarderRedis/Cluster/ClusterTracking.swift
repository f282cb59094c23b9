#if Redis
import Larder
import NIOCore
import Synchronization

/// The invalidation stream of a Redis Cluster: a ``TrackingConnection`` to each primary (each
/// subscribed in broadcast mode with the namespace prefix, as with one server), following the
/// primaries as the slot map changes.
///
/// It is live while every primary's connection is. Each connection that starts or stops runs
/// `onGap`, so every local copy goes when any primary's stream has a gap, and when a primary
/// leaves the map (its slots went to another node). While it is not live, it asks the cluster
/// for a refresh every heartbeat: a primary that failed is replaced in the map (and so here) even
/// when no command has failed.
final class ClusterTracking: TrackingSubscription {
    private struct State {
        var connections: [RedisStore.Node: TrackingConnection] = [:]
        /// Subscriptions of connections closed since.
        var retiredSubscriptions = 0
        var isStarted = false
        var isClosed = false
    }

    private let cluster: RedisCluster
    /// Every connection's settings, with the primary's address.
    private let settings: TrackingConnection.Settings
    private let group: any EventLoopGroup
    private let onInvalidate: @Sendable ([String]?) -> Void
    private let onGap: @Sendable () -> Void
    private let state = Locked(State())
    private let watchdog = Locked<Task<Void, Never>?>(nil)

    init(cluster: RedisCluster, settings: TrackingConnection.Settings, group: any EventLoopGroup,
         onInvalidate: @escaping @Sendable ([String]?) -> Void, onGap: @escaping @Sendable () -> Void) {
        self.cluster = cluster
        self.settings = settings
        self.group = group
        self.onInvalidate = onInvalidate
        self.onGap = onGap
    }

    var isLive: Bool {
        state.withLock { state in
            !state.connections.isEmpty && state.connections.values.allSatisfy(\.isLive)
        }
    }

    var subscriptionCount: Int {
        state.withLock { state in
            state.connections.values.reduce(state.retiredSubscriptions) { $0 + $1.subscriptionCount }
        }
    }

    var lastFailure: RedisError? {
        let connections = state.withLock { Array($0.connections.values) }
        let failures = connections.compactMap(\.lastFailure)
        return failures.first { $0.code == .authentication } ?? failures.first
    }

    /// Follows the cluster's primaries (once its slot map is read), and reads it now.
    func start() {
        let isFirst = state.withLock { state in
            defer { state.isStarted = true }
            return !state.isStarted
        }
        guard isFirst else { return }
        cluster.observePrimaries { [weak self] primaries in self?.follow(primaries) }
        cluster.requestRefresh()
        let task = Task.repeating(every: settings.heartbeat, on: self) { tracking in
            if !tracking.isLive { tracking.cluster.requestRefresh() }
        }
        watchdog.withLock { $0 = task }
    }

    /// A connection to each of `primaries`; those to other nodes closed.
    private func follow(_ primaries: [RedisStore.Node]) {
        let (added, removed): ([TrackingConnection], [TrackingConnection]) = state.withLock { state in
            guard !state.isClosed else { return ([], []) }
            var added: [TrackingConnection] = []
            var removed: [TrackingConnection] = []
            for node in primaries where state.connections[node] == nil {
                var settings = settings
                (settings.host, settings.port) = (node.host, node.port)
                let connection = TrackingConnection(settings: settings, group: group, onInvalidate: onInvalidate, onGap: onGap)
                state.connections[node] = connection
                added.append(connection)
            }
            for (node, connection) in state.connections where !primaries.contains(node) {
                state.connections[node] = nil
                state.retiredSubscriptions += connection.subscriptionCount
                removed.append(connection)
            }
            return (added, removed)
        }
        for connection in added { connection.start() }
        guard !removed.isEmpty else { return }
        // The slots of a node that left now belong to another: drop what its stream guarded.
        onGap()
        Task { for connection in removed { await connection.close() } }
    }

    func close() async {
        watchdog.withLock { $0 }?.cancel()
        let connections = state.withLock { state in
            state.isClosed = true
            defer { state.connections = [:] }
            return Array(state.connections.values)
        }
        for connection in connections { await connection.close() }
    }
}
#endif
