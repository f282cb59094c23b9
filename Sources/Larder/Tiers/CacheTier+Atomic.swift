public import Foundation

// Default insert-if-absent, remove-and-return and expiry-only update for tiers that have no
// single-step form: composed from the tier's own reads and writes. `Storage` calls them under
// the key's turn, so they are atomic among that storage's calls, though not across processes.
extension CacheTier {
    public func insertValue(
        _ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool
    ) async throws -> Bool {
        if try await containsValue(forKey: key) { return false }
        try await setValue(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible)
        return true
    }

    public func takeEntry(forKey key: String) async throws -> TierEntry? {
        guard let found = try await entry(forKey: key) else { return nil }
        try await removeValue(forKey: key)
        return found
    }

    @discardableResult
    public func setExpiry(_ expiry: Expiry, forKey key: String) async throws -> Bool {
        guard let found = try await entry(forKey: key) else { return false }
        try await setValue(found.data, forKey: key, expiry: expiry, metadata: found.metadata, isCompressible: true)
        return true
    }
}

extension LocalCacheTier {
    public func insertValue(
        _ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool
    ) throws -> Bool {
        if try containsValue(forKey: key) { return false }
        try setValue(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible)
        return true
    }

    public func takeEntry(forKey key: String) throws -> TierEntry? {
        guard let found = try entry(forKey: key) else { return nil }
        try removeValue(forKey: key)
        return found
    }

    @discardableResult
    public func setExpiry(_ expiry: Expiry, forKey key: String) throws -> Bool {
        guard let found = try entry(forKey: key) else { return false }
        try setValue(found.data, forKey: key, expiry: expiry, metadata: found.metadata, isCompressible: true)
        return true
    }
}
