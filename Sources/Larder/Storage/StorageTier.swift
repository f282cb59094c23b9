/// The identity of one tier of a ``Storage``: an open set of values, so a new tier breaks no
/// caller's `switch`.
///
/// ```swift
/// if entry.tier == .memory { … }
/// let shared = StorageTier("redis")   // a tier of your own
/// ```
public struct StorageTier: Hashable, Sendable, CustomStringConvertible {
    /// The tier's name, unique within a storage.
    public let name: String

    /// A tier identified by `name`.
    public init(_ name: String) {
        self.name = name
    }

    /// The in-memory tier of decoded values.
    public static let memory = StorageTier("memory")
    /// The on-disk tier (``DiskStore``).
    public static let disk = StorageTier("disk")
    /// A shared remote tier (memcached).
    public static let remote = StorageTier("remote")
    /// No tier: the value of an ``Storage/Entry`` that get-or-load's loader made in the call
    /// (``Storage/entry(forKey:tiers:expiry:failureExpiry:options:orLoad:)``), and of a get-or-load
    /// event that involved no tier. Never a tier of a storage.
    public static let loader = StorageTier("loader")

    public var description: String { name }
}
