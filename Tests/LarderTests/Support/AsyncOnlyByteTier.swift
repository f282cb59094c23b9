import Foundation
@testable import Larder

/// A byte tier reachable only from `async` calls, as a remote cache is: it wraps an
/// ``InMemoryByteTier`` behind `await`s and counts the calls that reach it.
final class AsyncOnlyByteTier: CacheTier, Sendable {
    let base: InMemoryByteTier
    private let calls = Locked(0)

    init(_ id: StorageTier = .remote, now: @escaping @Sendable () -> Date = { Date() }) {
        base = InMemoryByteTier(id, now: now)
    }

    var tierID: StorageTier { base.tierID }
    /// How many operations reached the tier.
    var callCount: Int { calls.withLock { $0 } }

    private func count() async {
        calls.withLock { $0 += 1 }
        await Task.yield()
    }

    func entry(forKey key: String) async throws -> TierEntry? {
        await count()
        return try base.entry(forKey: key)
    }

    func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) async throws {
        await count()
        try base.setValue(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible)
    }

    func removeValue(forKey key: String) async throws -> Bool {
        await count()
        return try base.removeValue(forKey: key)
    }

    func containsValue(forKey key: String) async throws -> Bool {
        await count()
        return try base.containsValue(forKey: key)
    }

    func keys(withPrefix prefix: String) async throws -> [String] {
        await count()
        return try base.keys(withPrefix: prefix)
    }

    func removeAll() async throws {
        await count()
        try base.removeAll()
    }

    func removeExpired() async throws -> Int {
        await count()
        return try base.removeExpired()
    }

    var tierStatistics: TierStatistics { base.tierStatistics }

    func close() async {
        base.close()
    }
}
