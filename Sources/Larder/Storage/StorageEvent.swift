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
