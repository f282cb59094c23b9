/// The tiers a ``Storage`` call works on: every tier in the set, in the storage's order.
///
/// ``all`` means every tier the storage has, whatever they are; a set naming tiers the storage
/// lacks acts on the ones it has, and throws only when it names none of them.
///
/// ```swift
/// try storage.setValue(thumbnail, forKey: url, tiers: .memory)  // not persisted
/// try storage.removeValue(forKey: url, tiers: .all)             // gone from every tier
/// try storage.value(forKey: url, tiers: [.memory, .disk])       // the local tiers only
/// ```
public struct StorageTiers: Hashable, Sendable, ExpressibleByArrayLiteral, CustomStringConvertible {
    /// `nil` means every tier.
    @usableFromInline let members: Set<StorageTier>?
    /// Precomputed, so the memory hit path tests a Boolean instead of hashing a name.
    @usableFromInline let includesMemory: Bool

    /// The tiers in `tiers`.
    public init(_ tiers: some Sequence<StorageTier>) {
        let members = Set(tiers)
        self.members = members
        self.includesMemory = members.contains(.memory)
    }

    public init(arrayLiteral elements: StorageTier...) {
        self.init(elements)
    }

    private init(all: Void) {
        members = nil
        includesMemory = true
    }

    /// Every tier the storage has.
    public static let all = StorageTiers(all: ())
    /// The memory tier alone.
    public static let memory: StorageTiers = [.memory]
    /// The disk tier alone.
    public static let disk: StorageTiers = [.disk]
    /// The remote tier alone.
    public static let remote: StorageTiers = [.remote]

    /// Whether the set includes `tier`.
    @inlinable
    public func contains(_ tier: StorageTier) -> Bool {
        if tier == .memory { return includesMemory }
        return members?.contains(tier) ?? true
    }

    /// Whether the set names every tier.
    public var isAll: Bool { members == nil }

    public var description: String {
        guard let members else { return "all" }
        if members.isEmpty { return "none" }
        return "[" + members.map(\.name).sorted().joined(separator: ", ") + "]"
    }
}
