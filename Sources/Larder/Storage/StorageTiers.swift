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
    /// The tiers, sorted by name without repeats (so equal sets are equal arrays); `nil` means
    /// every tier. A call names a handful, so a scan comparing short names costs less than
    /// hashing one, which every read below memory did once per tier.
    @usableFromInline let members: [StorageTier]?
    /// Precomputed, so the memory hit path tests a Boolean instead of comparing names.
    @usableFromInline let includesMemory: Bool

    /// The tiers in `tiers`.
    public init(_ tiers: some Sequence<StorageTier>) {
        var members: [StorageTier] = []
        for tier in tiers where !members.contains(tier) { members.append(tier) }
        members.sort { $0.name < $1.name }
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
