import Foundation

/// The *invalidation times* of a storage's shared tiers that this process knows, and when it
/// last read each: the time of the tier's last ``Storage/removeAll(tiers:)-(_)`` (the *clear
/// time*) and of the last removal of each tag. A value whose ``SharedStamp`` is older than one
/// of them is a miss.
///
/// The times live in the shared tier itself, each under its *invalidation key*, so every
/// process sees them; a time read here is trusted for ``recheckInterval`` of the storage's
/// clock, then read again. A removal made by this process is recorded at once.
final class SharedInvalidations: Sendable {
    /// How long a time read from a shared tier is trusted: another process's removal reaches
    /// this one's reads of the tier within this long.
    static let recheckInterval: TimeInterval = 1

    /// The name of the clear time.
    static let clearName = "clear"

    /// The name of `tag`'s removal time.
    static func tagName(_ tag: String) -> String { "tag\u{1}" + tag }

    /// The key under which a shared tier keeps the time called `name`.
    static func key(_ name: String) -> String { "\u{1}invalidated\u{1}" + name }

    private struct Known {
        /// Microseconds since 1970, or `nil`: the tier holds no such time.
        var time: Int64?
        var checked: Date
    }

    private let known = Locked([StorageTier: [String: Known]]())

    /// The times of `names` in `tier` read less than ``recheckInterval`` before `now`; a name
    /// missing from the result must be read again.
    func fresh(_ names: [String], in tier: StorageTier, now: Date) -> [String: Int64?] {
        known.withLock { known in
            var found: [String: Int64?] = [:]
            for name in names {
                if let entry = known[tier]?[name], now.timeIntervalSince(entry.checked) < Self.recheckInterval,
                   entry.checked <= now {
                    found[name] = .some(entry.time)
                }
            }
            return found
        }
    }

    /// Records `time` (`nil`: none) as `name`'s in `tier`, read or written at `now`. A time
    /// never moves back.
    func record(_ name: String, time: Int64?, in tier: StorageTier, now: Date) {
        known.withLock { known in
            let newest = [time, known[tier]?[name]?.time].compactMap { $0 }.max()
            known[tier, default: [:]][name] = Known(time: newest, checked: now)
        }
    }
}
