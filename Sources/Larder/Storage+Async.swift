import Dispatch

extension Storage where Value: Sendable {
    /// The value for `key`, from memory or else from disk, or `nil` on a miss.
    ///
    /// A memory hit returns at once; disk work runs on Larder's I/O queue, never on the
    /// caller's executor.
    public func value(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Value? {
        try await entry(forKey: key, tiers: tiers)?.value
    }

    /// The value for `key` with the tier that answered and its expiration, or `nil` on a miss.
    public func entry(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Entry? {
        let tiers = try resolve(tiers)
        if let found = memoryEntry(forKey: key, tiers: tiers) { return found }
        guard tiers.contains(.disk), disk != nil else { return try diskEntry(forKey: key, tiers: tiers) }
        return try await offload { try self.diskEntry(forKey: key, tiers: tiers) }
    }

    /// Stores `value` for `key` in `tiers`; see ``setValue(_:forKey:expiry:tiers:)-(_,_,_,_)``.
    public func setValue(_ value: Value, forKey key: Key, expiry: Expiry? = nil, tiers: StorageTiers? = nil) async throws {
        try await offloadIfDisk(tiers) { try self.setValue(value, forKey: key, expiry: expiry, tiers: tiers) }
    }

    /// Removes the value for `key` from `tiers`.
    @discardableResult
    public func removeValue(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Bool {
        try await offloadIfDisk(tiers) { try self.removeValue(forKey: key, tiers: tiers) }
    }

    /// Whether any of `tiers` holds a live value for `key`.
    public func containsValue(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Bool {
        try await offloadIfDisk(tiers) { try self.containsValue(forKey: key, tiers: tiers) }
    }

    /// Removes every value from `tiers`.
    public func removeAll(tiers: StorageTiers? = nil) async throws {
        try await offloadIfDisk(tiers) { try self.removeAll(tiers: tiers) }
    }

    /// Removes expired entries from every tier.
    @discardableResult
    public func removeExpired() async throws -> Int {
        try await offloadIfDisk(nil) { try self.removeExpired() }
    }

    private func offloadIfDisk<T: Sendable>(_ tiers: StorageTiers?, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        let resolved = try resolve(tiers)
        guard resolved.contains(.disk), disk != nil else { return try work() }
        return try await offload(work)
    }

    private func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            larderIOQueue.async {
                continuation.resume(with: Result { try work() })
            }
        }
    }
}

/// Where the async forms run disk work: off the cooperative pool, so a slow disk never
/// starves Swift concurrency's threads.
let larderIOQueue = DispatchQueue(label: "larder.io", qos: .userInitiated, attributes: .concurrent)
