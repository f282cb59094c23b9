#if Memcached || Redis
package import NIOCore
import Synchronization

/// One server's circuit breaker, as the remote tiers' connection pools keep it.
///
/// After `threshold` consecutive failures it opens: calls are refused at once until `cooldown`
/// has passed, then one call goes out as the probe. The probe's success closes the breaker; its
/// failure opens it for another cooldown. While the server is healthy (no failure since the
/// last success) a call checks and records with one atomic load each.
package final class CircuitBreaker: Sendable {
    private struct State {
        var consecutiveFailures = 0
        var openUntil: NIODeadline?
        var isProbing = false
    }

    private let threshold: Int
    private let cooldown: TimeAmount
    private let state = Mutex(State())
    /// Whether `state` is the initial one (no failure since the last success).
    private let healthy = Atomic<Bool>(true)

    package init(threshold: Int, cooldown: TimeAmount) {
        self.threshold = threshold
        self.cooldown = cooldown
    }

    /// Whether the server's last call succeeded and the breaker is closed.
    package var isHealthy: Bool { healthy.load(ordering: .relaxed) }

    /// Whether the breaker is open now: calls are refused at once, but for one probe each
    /// cooldown.
    package var isOpen: Bool {
        if healthy.load(ordering: .relaxed) { return false }
        return state.withLock { $0.openUntil != nil }
    }

    /// Whether a call may go out now: always while closed; while open, only the first call
    /// after the cooldown (the probe).
    package func admit(now: NIODeadline = .now()) -> Bool {
        if healthy.load(ordering: .relaxed) { return true }
        return state.withLock { state in
            guard let openUntil = state.openUntil else { return true }
            guard now >= openUntil, !state.isProbing else { return false }
            state.isProbing = true
            return true
        }
    }

    package func recordSuccess() {
        if healthy.load(ordering: .relaxed) { return }
        state.withLock { state in
            state = State()
            healthy.store(true, ordering: .relaxed)
        }
    }

    /// Records a failed call; returns whether this failure opened the breaker.
    package func recordFailure() -> Bool {
        state.withLock { state in
            state.consecutiveFailures += 1
            healthy.store(false, ordering: .relaxed)
            guard state.isProbing || (state.openUntil == nil && state.consecutiveFailures >= threshold) else { return false }
            state.isProbing = false
            state.openUntil = .now() + cooldown
            return true
        }
    }
}
#endif
