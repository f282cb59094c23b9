import Foundation
import Larder

/// One circuit breaker per origin (scheme, host and port, keyed by ``Origin/key``): closed while the host answers; open after `threshold`
/// consecutive transport failures, failing fetches at once; after a cooldown, one fetch at a
/// time is let through as a probe, whose success closes the breaker and whose failure doubles
/// the cooldown (to at most 30 s).
final class HostBreakers: Sendable {
    /// What the breaker lets a fetch do.
    enum Admission: Equatable {
        /// The host is healthy: fetch as usual, with retries.
        case normal
        /// The host is being tested: one attempt, no retries.
        case probe
        /// The host is down: fail at once.
        case reject
    }

    private struct Breaker {
        var consecutiveFailures = 0
        var openUntil: Date?
        var cooldown: TimeInterval
        var probeInFlight = false
    }

    static let maximumCooldown: TimeInterval = 30
    private let threshold: Int
    private let baseCooldown: TimeInterval
    private let breakers = Locked<[String: Breaker]>([:])

    init(threshold: Int, cooldown: TimeInterval) {
        self.threshold = threshold
        self.baseCooldown = cooldown
    }

    func admit(_ host: String, now: Date) -> Admission {
        guard threshold > 0 else { return .normal }
        return breakers.withLock { breakers in
            guard var breaker = breakers[host], let openUntil = breaker.openUntil else { return .normal }
            guard !breaker.probeInFlight, now >= openUntil else { return .reject }
            breaker.probeInFlight = true
            breakers[host] = breaker
            return .probe
        }
    }

    /// The host answered (any HTTP status): the breaker closes.
    func answered(_ host: String) {
        guard threshold > 0 else { return }
        breakers.withLock { _ = $0.removeValue(forKey: host) }
    }

    /// The host could not be reached or timed out.
    ///
    /// - Returns: Whether the breaker is now open (the fetch should stop retrying).
    @discardableResult
    func failed(_ host: String, now: Date) -> Bool {
        guard threshold > 0 else { return false }
        return breakers.withLock { breakers in
            var breaker = breakers[host] ?? Breaker(cooldown: baseCooldown)
            breaker.consecutiveFailures += 1
            if breaker.probeInFlight {
                breaker.probeInFlight = false
                breaker.cooldown = min(breaker.cooldown * 2, Self.maximumCooldown)
                breaker.openUntil = now.addingTimeInterval(breaker.cooldown)
            } else if breaker.openUntil == nil, breaker.consecutiveFailures >= threshold {
                breaker.openUntil = now.addingTimeInterval(breaker.cooldown)
            }
            breakers[host] = breaker
            return breaker.openUntil != nil
        }
    }

    /// A probe ended without telling anything about the host (it was cancelled).
    func abandonedProbe(_ host: String) {
        breakers.withLock { breakers in
            guard var breaker = breakers[host] else { return }
            breaker.probeInFlight = false
            breakers[host] = breaker
        }
    }
}
