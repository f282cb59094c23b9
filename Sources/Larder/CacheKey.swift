public import Foundation

/// A key with a stable string identity, the form the disk tier stores.
///
/// The identity must be the same in every process and every run (unlike `hashValue`), and two
/// keys that are equal must have the same identity.
///
/// ```swift
/// struct AvatarKey: CacheKey {
///     var userID: Int
///     var cacheKey: String { "avatar/\(userID)" }
/// }
/// ```
public protocol CacheKey: Hashable, Sendable {
    /// The stable string identity of the key.
    var cacheKey: String { get }
}

extension String: CacheKey {
    /// The string itself.
    public var cacheKey: String { self }
}

extension URL: CacheKey {
    /// The absolute string of the URL.
    public var cacheKey: String { absoluteString }
}

extension UUID: CacheKey {
    /// The uppercase hyphenated form, as `uuidString` gives it.
    public var cacheKey: String { uuidString }
}

extension Int: CacheKey { public var cacheKey: String { String(self) } }
extension Int8: CacheKey { public var cacheKey: String { String(self) } }
extension Int16: CacheKey { public var cacheKey: String { String(self) } }
extension Int32: CacheKey { public var cacheKey: String { String(self) } }
extension Int64: CacheKey { public var cacheKey: String { String(self) } }
extension UInt: CacheKey { public var cacheKey: String { String(self) } }
extension UInt8: CacheKey { public var cacheKey: String { String(self) } }
extension UInt16: CacheKey { public var cacheKey: String { String(self) } }
extension UInt32: CacheKey { public var cacheKey: String { String(self) } }
extension UInt64: CacheKey { public var cacheKey: String { String(self) } }
