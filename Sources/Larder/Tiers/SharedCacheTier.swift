public import Foundation

/// A ``CacheTier`` shared by many processes or machines (a remote cache): a look-aside copy of
/// values that can be recomputed, never the only copy.
///
/// ``Storage`` treats such a tier differently from a local one, and only in its `async` API:
/// - **Failure is a miss.** An error from a shared tier makes a read a miss and a write or a
///   removal a no-op; it is counted in the tier's `errors`, never thrown to the caller. After a
///   failed read, get-or-load does not write the loader's value back to the tier.
/// - **Local copies are bounded.** A hit is copied into memory (and into local byte tiers only
///   if ``copiesHitsToLocalTiers``), expiring at the earlier of the entry's expiration and
///   ``localCopyMaxAge``; the same bound applies to the local copies of a write.
/// - **Order.** A write goes to the local tiers, then to the shared one; a removal reaches the
///   shared tier first, then the local ones. The network step never holds the key's turn that
///   the synchronous API waits on.
///
/// ```swift
/// let remote = try MemcachedStore(configuration: .init(host: "127.0.0.1", port: 11211))
/// let storage = try Storage<String, Data>(configuration: .init(), additionalTiers: [remote], transformer: .data)
/// ```
public protocol SharedCacheTier: CacheTier {
    /// The longest a local copy of one of this tier's values lives: `nil` bounds it by the
    /// entry's expiration only, `.zero` keeps no local copies at all.
    var localCopyMaxAge: Duration? { get }
    /// Whether a hit is copied into local byte tiers (a disk) as well as into memory.
    var copiesHitsToLocalTiers: Bool { get }
}

/// A lease on a missing or stale key, held by the one caller that should recompute it.
public struct TierLease: Sendable, Hashable {
    /// The tier's token for the lease (for memcached, the placeholder's CAS value).
    public var token: UInt64

    /// A lease with `token`.
    public init(token: UInt64) {
        self.token = token
    }
}

/// What a lease-aware read found.
public enum LeasedRead: Sendable, Hashable {
    /// A fresh value: nothing to recompute.
    case hit(TierEntry)
    /// This caller holds the lease and should recompute the value and ``LeasingCacheTier/fill(_:forKey:lease:expiry:metadata:isCompressible:)``
    /// it; `stale` is the previous value if the key was invalidated softly.
    case won(TierLease, stale: TierEntry?)
    /// Another caller holds the lease; `stale` is the previous value, if any, to serve meanwhile.
    case busy(stale: TierEntry?)
}

/// A ``SharedCacheTier`` with leases: one caller per key across the fleet recomputes a missing
/// or invalidated value while the others wait or serve the stale value.
///
/// ``Storage/value(forKey:tiers:expiry:failureExpiry:options:orLoad:)`` uses it on a miss.
public protocol LeasingCacheTier: SharedCacheTier {
    /// A read that takes the key's lease when the value is missing or stale and nobody holds it.
    ///
    /// - Parameter leaseDuration: How long the lease lasts if its holder never fills it.
    func leasedEntry(forKey key: String, leaseDuration: Duration) async throws -> LeasedRead

    /// Stores the recomputed value under `lease`; returns `false` when the tier refused it
    /// because the key changed since the lease was taken (the value is then not cached there).
    func fill(
        _ data: Data, forKey key: String, lease: TierLease, expiry: Expiry?, metadata: Data?, isCompressible: Bool
    ) async throws -> Bool

    /// Marks the value stale without removing it: readers keep getting it while exactly one of
    /// them recomputes it. Returns whether a value was there.
    @discardableResult
    func invalidate(forKey key: String) async throws -> Bool

    /// Marks the value stale, as ``invalidate(forKey:)`` does, only while the stored value still
    /// expires no later than `date`: a value written since (which expires later) stays fresh.
    /// A refresh ahead of expiry uses it, so that an instance that read a due value never
    /// undoes another instance's refresh. Returns whether it marked a value.
    @discardableResult
    func invalidate(forKey key: String, ifExpiringBy date: Date) async throws -> Bool

    /// Gives up a lease won on a missing key without filling it (the loader failed), so that
    /// the callers waiting for the fill stop waiting and one of them takes the lease.
    func releaseLease(_ lease: TierLease, forKey key: String) async throws

    /// How long a caller that found the lease busy and no stale value waits, re-reading, before
    /// it recomputes the value itself (without storing it in this tier).
    var leaseWaitLimit: Duration { get }

    /// How long a lease that ``Storage`` takes lasts if its holder never fills it.
    var leaseDuration: Duration { get }
}

extension LeasingCacheTier {
    /// 30 s, for a tier that does not say.
    public var leaseDuration: Duration { .seconds(30) }

    /// Reads the value, then invalidates it if it expires by `date`. Not atomic: a tier that
    /// can compare and invalidate in one step (as memcached's CAS and Redis's scripts can)
    /// should do so.
    @discardableResult
    public func invalidate(forKey key: String, ifExpiringBy date: Date) async throws -> Bool {
        guard let current = try await entry(forKey: key), let expiration = current.expirationDate, expiration <= date else {
            return false
        }
        return try await invalidate(forKey: key)
    }
}
