#if Redis
import Synchronization

/// The invalidation stream of a ``RedisStore``: one server's ``TrackingConnection``, or a
/// ``ClusterTracking`` with one per primary.
protocol TrackingSubscription: Sendable {
    /// Whether invalidations of every key are flowing now.
    var isLive: Bool { get }
    /// Times a subscription was established.
    var subscriptionCount: Int { get }
    /// The last error that stopped a subscription.
    var lastFailure: RedisError? { get }
    /// Starts subscribing, in the background.
    func start()
    /// Stops every subscription.
    func close() async
}

extension TrackingConnection: TrackingSubscription {
    var subscriptionCount: Int { subscriptions.load(ordering: .relaxed) }
    var lastFailure: RedisError? { lastError.withLock { $0 } }
}
#endif
