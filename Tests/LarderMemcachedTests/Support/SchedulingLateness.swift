#if Memcached
import Foundation
import Synchronization

/// How late this machine resumes tasks right now: a probe task sleeps 1 ms over and over and
/// keeps the worst oversleep. The fault suites add a multiple of it to their duration bounds,
/// so that a bound means "the deadline worked" on a quiet machine and on one whose cores are
/// busy with other suites alike (a test run starts every suite at once).
final class SchedulingLateness: Sendable {
    private let worstMicroseconds = Atomic<Int>(0)
    private let isRunning = Atomic<Bool>(true)

    /// Starts probing; call ``stop()`` when the measured phase ends.
    static func start() -> SchedulingLateness {
        let probe = SchedulingLateness()
        Task.detached { await probe.run() }
        return probe
    }

    private func run() async {
        while isRunning.load(ordering: .relaxed) {
            let started = ContinuousClock.now
            try? await Task.sleep(for: .milliseconds(1))
            let late = Int((ContinuousClock.now - started - .milliseconds(1)) / .microseconds(1))
            var current = worstMicroseconds.load(ordering: .relaxed)
            while late > current {
                let (exchanged, original) = worstMicroseconds.compareExchange(expected: current, desired: late, ordering: .relaxed)
                if exchanged { break }
                current = original
            }
        }
    }

    /// The worst lateness seen so far.
    var worst: Duration { .microseconds(worstMicroseconds.load(ordering: .relaxed)) }

    /// Stops probing and returns the worst lateness seen.
    @discardableResult
    func stop() -> Duration {
        isRunning.store(false, ordering: .relaxed)
        return worst
    }
}
#endif
