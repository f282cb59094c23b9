/// The tiers a ``Storage`` call works on, with "contains" semantics: a call acts on every tier
/// in the set.
///
/// ```swift
/// try storage.setValue(thumbnail, forKey: url, tiers: .memory)  // not persisted
/// try storage.removeValue(forKey: url, tiers: .all)             // gone from both
/// ```
public struct StorageTiers: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// The in-memory LRU tier.
    public static let memory = StorageTiers(rawValue: 1 << 0)
    /// The on-disk tier.
    public static let disk = StorageTiers(rawValue: 1 << 1)
    /// Every tier the storage has.
    public static let all: StorageTiers = [.memory, .disk]

    public var description: String {
        switch self {
        case .all: return "all"
        case .memory: return "memory"
        case .disk: return "disk"
        default: return "none"
        }
    }
}

/// The tier that answered a read.
public enum StorageTier: Sendable, Hashable {
    /// The value came from memory.
    case memory
    /// The value came from disk (and was promoted to memory when the call included it).
    case disk
}
