public import Foundation

/// When a cached entry stops being returned.
///
/// Both tiers share this type. An expired entry is never returned: reads treat it as a miss and
/// drop it, and `removeExpired()` sweeps the rest.
///
/// ```swift
/// store.setValue(avatar, forKey: "user/42", expiry: .seconds(300))
/// store.setValue(banner, forKey: "promo", expiry: .date(campaignEnd))
/// store.setValue(session, forKey: "s/42", expiry: .sliding(1_800))  // 30 min after the last use
/// ```
public enum Expiry: Sendable, Hashable {
    /// The entry never expires on its own; only limits and explicit removal drop it.
    case never
    /// The entry expires this many seconds after it is written.
    case seconds(TimeInterval)
    /// The entry expires at this moment.
    case date(Date)
    /// The entry expires this many seconds after it was last written or read: every read
    /// extends its lifetime (Kingfisher's expiration extending, FusionCache's sliding
    /// expiration). Reads that find it in the disk tier record the extension in memory and
    /// write it with their access order, in batches; a read never waits for a disk write.
    case sliding(TimeInterval)

    /// The moment this expiry ends, measured from `now`, or `nil` for ``never``.
    ///
    /// - Parameter now: The time of the write.
    /// - Returns: The expiration date, or `nil` when the entry never expires.
    public func expirationDate(from now: Date) -> Date? {
        switch self {
        case .never: return nil
        case .seconds(let seconds), .sliding(let seconds): return now.addingTimeInterval(seconds)
        case .date(let date): return date
        }
    }

    /// The lifetime each read renews, for ``sliding(_:)``; `nil` for a fixed expiry.
    public var slidingInterval: TimeInterval? {
        if case .sliding(let seconds) = self { return seconds }
        return nil
    }

    /// Whether the value is usable: a finite number of seconds, or a finite date.
    @usableFromInline var isValid: Bool {
        switch self {
        case .never: return true
        case .seconds(let seconds), .sliding(let seconds): return seconds.isFinite
        case .date(let date): return date.timeIntervalSinceReferenceDate.isFinite
        }
    }
}
