public import Foundation

/// A ``CacheTier`` whose operations are local and bounded, reachable from synchronous code.
///
/// ``Storage``'s synchronous API walks only local tiers; its `async` API runs their work on
/// Larder's I/O queue, never on the caller's executor.
public protocol LocalCacheTier: CacheTier {
    /// The bytes stored for `key`; see ``CacheTier/entry(forKey:)``.
    func entry(forKey key: String) throws -> TierEntry?
    /// The bytes stored for `key` alone, or `nil` on a miss: what ``Storage`` asks when it
    /// needs no lifetime or metadata (a value read with nothing to promote). A tier can answer
    /// it more cheaply than ``entry(forKey:)``; the default returns that entry's `data`.
    func value(forKey key: String) throws -> Data?
    /// Stores `data` for `key`; see ``CacheTier/setValue(_:forKey:expiry:metadata:isCompressible:)``.
    func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) throws
    /// Stores many values at once; see ``CacheTier/setValues(_:)``.
    func setValues(_ writes: [TierWrite]) throws
    /// Removes the value for `key`; see ``CacheTier/removeValue(forKey:)``.
    @discardableResult
    func removeValue(forKey key: String) throws -> Bool
    /// Whether a live value is stored for `key`; see ``CacheTier/containsValue(forKey:)``.
    func containsValue(forKey key: String) throws -> Bool
    /// Every live key that starts with `prefix`.
    func keys(withPrefix prefix: String) throws -> [String]
    /// Removes every value.
    func removeAll() throws
    /// Removes expired values; returns how many.
    @discardableResult
    func removeExpired() throws -> Int
    /// Insert-if-absent; see ``CacheTier/insertValue(_:forKey:expiry:metadata:isCompressible:)``.
    func insertValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) throws -> Bool
    /// Remove-and-return; see ``CacheTier/takeEntry(forKey:)``.
    func takeEntry(forKey key: String) throws -> TierEntry?
    /// Expiry-only update; see ``CacheTier/setExpiry(_:forKey:)``.
    @discardableResult
    func setExpiry(_ expiry: Expiry, forKey key: String) throws -> Bool
    /// Removes the values written, or last used, before `date`, except those of `spared` keys;
    /// returns the keys removed. See ``DiskStore/trim(toDate:by:)``.
    func trim(toDate date: Date, by age: EntryAge, sparing spared: Set<String>) throws -> [String]
    /// Releases the tier's resources.
    func close()
}

extension LocalCacheTier {
    /// The data of ``entry(forKey:)``.
    public func value(forKey key: String) throws -> Data? {
        try entry(forKey: key)?.data
    }

    /// A tier that keeps no times cannot trim by age: this default throws
    /// ``StorageError/Code/invalidInput`` naming the tier.
    public func trim(toDate date: Date, by age: EntryAge, sparing spared: Set<String>) throws -> [String] {
        throw StorageError.invalidInput("the tier \(tierID) keeps no times and cannot trim by age")
    }
}
