public import Foundation

/// One value of a batch write, ``CacheTier/setValues(_:)``: what
/// ``CacheTier/setValue(_:forKey:expiry:metadata:isCompressible:)`` takes for one key.
public struct TierWrite: Sendable, Hashable {
    /// The key.
    public var key: String
    /// The bytes, as the transformer produced them.
    public var data: Data
    /// When the entry expires; `nil` takes the tier's default.
    public var expiry: Expiry?
    /// Small caller bytes kept beside the value.
    public var metadata: Data?
    /// Whether compression may help (a hint).
    public var isCompressible: Bool

    /// Creates a write.
    public init(key: String, data: Data, expiry: Expiry? = nil, metadata: Data? = nil, isCompressible: Bool = true) {
        self.key = key
        self.data = data
        self.expiry = expiry
        self.metadata = metadata
        self.isCompressible = isCompressible
    }
}

// The default batch write, for tiers that have no faster form: one write after another.
extension CacheTier {
    public func setValues(_ writes: [TierWrite]) async throws {
        for write in writes {
            try await setValue(write.data, forKey: write.key, expiry: write.expiry, metadata: write.metadata,
                               isCompressible: write.isCompressible)
        }
    }
}

extension LocalCacheTier {
    public func setValues(_ writes: [TierWrite]) throws {
        for write in writes {
            try setValue(write.data, forKey: write.key, expiry: write.expiry, metadata: write.metadata,
                         isCompressible: write.isCompressible)
        }
    }
}
