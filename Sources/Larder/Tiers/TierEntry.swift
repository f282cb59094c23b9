public import Foundation

/// A value as a byte tier holds it: the bytes, when they expire, and the caller's metadata.
public struct TierEntry: Sendable, Hashable {
    /// The stored bytes, as the transformer produced them.
    public var data: Data
    /// When the entry expires, or `nil` if it never does.
    public var expirationDate: Date?
    /// The caller's metadata bytes, if any were written with the value.
    public var metadata: Data?

    /// Creates an entry.
    public init(data: Data, expirationDate: Date? = nil, metadata: Data? = nil) {
        self.data = data
        self.expirationDate = expirationDate
        self.metadata = metadata
    }
}
