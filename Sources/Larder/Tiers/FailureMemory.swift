import Foundation

/// Failures remembered by get-or-load for a while (negative caching), bounded in size.
final class FailureMemory<Key: Hashable & Sendable>: Sendable {
    private struct Remembered {
        let error: any Error
        let until: Date
    }

    /// At most this many keys are remembered; the oldest are forgotten first.
    static var capacity: Int { 1_024 }
    private let state = Locked<[Key: Remembered]>([:])

    init() {}

    func remembered(_ key: Key, now: Date) -> (any Error)? {
        state.withLock { failures -> (any Error)? in
            guard let remembered = failures[key] else { return nil }
            if remembered.until <= now {
                failures[key] = nil
                return nil
            }
            return remembered.error
        }
    }

    func remember(_ error: any Error, for key: Key, until: Date) {
        state.withLock { failures in
            if failures.count >= Self.capacity, let oldest = failures.min(by: { $0.value.until < $1.value.until }) {
                failures[oldest.key] = nil
            }
            failures[key] = Remembered(error: error, until: until)
        }
    }

    func forget(_ key: Key) {
        state.withLock { $0[key] = nil }
    }
}

/// The last load duration of recently loaded keys (the δ of probabilistic early refresh),
/// bounded in size: when full, the table is emptied and refilled by the next loads.
final class LoadDurations<Key: Hashable & Sendable>: Sendable {
    static var capacity: Int { 4_096 }
    private let state = Locked<[Key: Duration]>([:])

    init() {}

    func record(_ duration: Duration, for key: Key) {
        state.withLock { durations in
            if durations.count >= Self.capacity, durations[key] == nil { durations.removeAll(keepingCapacity: true) }
            durations[key] = duration
        }
    }

    func duration(for key: Key) -> Duration? {
        state.withLock { $0[key] }
    }
}
