import Foundation

/// A clock that only moves when a test advances it, and counts how often it is read.
final class TestClock: @unchecked Sendable {
    // Invariant: `current` and `reads` are only touched with `lock` held.
    private let lock = NSLock()
    private var current: Date
    private var reads = 0

    init(_ start: Date = Date(timeIntervalSinceReferenceDate: 1_000_000)) {
        current = start
    }

    /// The current time; counts as a read.
    var now: Date {
        lock.withLock {
            reads += 1
            return current
        }
    }

    /// How many times ``now`` was read.
    var readCount: Int {
        lock.withLock { reads }
    }

    /// A closure reading this clock, for `Configuration.now`.
    var closure: @Sendable () -> Date {
        { self.now }
    }

    /// Moves the clock forward (or back, for a negative interval).
    func advance(by seconds: TimeInterval) {
        lock.withLock { current = current.addingTimeInterval(seconds) }
    }

    /// The current time without counting a read.
    var peek: Date {
        lock.withLock { current }
    }
}
