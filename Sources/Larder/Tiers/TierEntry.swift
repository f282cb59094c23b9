public import Foundation

/// A value as a byte tier holds it: the bytes, when they expire, and the caller's metadata.
public struct TierEntry: Sendable, Hashable {
    /// The stored bytes, as the transformer produced them.
    public var data: Data
    /// When the entry expires, or `nil` if it never does.
    public var expirationDate: Date?
    /// The caller's metadata bytes, if any were written with the value.
    public var metadata: Data?
    /// The lifetime each read renews, for a value written with ``Expiry/sliding(_:)``
    /// (``expirationDate`` is then as this read renewed it).
    public var slidingInterval: TimeInterval?

    /// Creates an entry.
    public init(data: Data, expirationDate: Date? = nil, metadata: Data? = nil, slidingInterval: TimeInterval? = nil) {
        self.data = data
        self.expirationDate = expirationDate
        self.metadata = metadata
        self.slidingInterval = slidingInterval
    }

    /// The expiry that gives a copy the same lifetime: sliding, or ending at the same moment.
    var expiry: Expiry {
        slidingInterval.map(Expiry.sliding) ?? expirationDate.map(Expiry.date) ?? .never
    }
}
