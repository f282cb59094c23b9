import Synchronization

/// A change to a ``Storage``: what happened, to which key, in which tier.
///
/// ```swift
/// let events = storage.events()
/// Task {
///     for await event in events where event.kind == .removed {
///         print("\(event.key) left \(event.tier)")
///     }
/// }
/// ```
public struct StorageEvent: Sendable, Hashable, CustomStringConvertible {
    /// What happened: an open set of values, so new kinds break no caller's `switch`.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// The kind's name, for example `"written"`.
        public let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// A value was written to the tier.
        public static let written = Kind("written")
        /// A value was removed from the tier by a call (`removeValue`, a write that cleared an
        /// older value, `removeAll`).
        public static let removed = Kind("removed")
        /// The tier evicted the value for its limits.
        public static let evicted = Kind("evicted")
        /// The tier dropped the value because it expired.
        public static let expired = Kind("expired")
        /// Get-or-load returned a stale value (fail-safe) because the loader failed or timed
        /// out; the event's tier is where the stale copy was found.
        public static let staleServed = Kind("staleServed")
        /// Get-or-load returned a stale value at its soft timeout (the tier is the stale copy's);
        /// the loader goes on in the background.
        public static let softTimeout = Kind("softTimeout")
        /// Get-or-load gave up at its hard timeout; the tier is the stale copy's it returned, or
        /// ``StorageTier/loader`` when it had none and threw.
        public static let hardTimeout = Kind("hardTimeout")
        /// A hit past its refresh point started a background refresh; the tier is the hit's.
        public static let refreshStarted = Kind("refreshStarted")
        /// A background refresh (ahead of expiry, or after a soft timeout) failed; the old
        /// value stays.
        public static let refreshFailed = Kind("refreshFailed")
        /// ``Storage/removeValues(taggedWith:tiers:)-(_,_)`` removed the value from the tier.
        public static let removedByTag = Kind("removedByTag")

        public var description: String { name }
    }

    /// What happened.
    public var kind: Kind
    /// The entry's cache key (``CacheKey/cacheKey``).
    public var key: String
    /// The tier it happened in.
    public var tier: StorageTier

    /// Creates an event.
    public init(kind: Kind, key: String, tier: StorageTier) {
        self.kind = kind
        self.key = key
        self.tier = tier
    }

    public var description: String { "\(kind) \(key) (\(tier))" }
}
