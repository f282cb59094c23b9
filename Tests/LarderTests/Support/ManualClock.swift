import Foundation
import Synchronization

/// A clock the test moves by hand, so TTL tests never sleep.
final class ManualClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        current = Mutex(start)
    }

    var now: Date { current.withLock { $0 } }

    func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// A closure for a configuration's `now`.
    var function: @Sendable () -> Date { { self.now } }
}
