public import Foundation

extension MemoryStore {
    /// A stored value with its cost and expiration, as ``MemoryStore/entry(forKey:)`` returns it.
    ///
    /// ```swift
    /// if let entry = store.entry(forKey: "avatar"), let end = entry.expirationDate {
    ///     let remaining = end.timeIntervalSinceNow  // the TTL left, to copy to another tier
    ///     print(entry.cost, remaining)
    /// }
    /// ```
    public struct Entry {
        /// The stored value.
        public var value: Value
        /// The cost the entry is charged against the limits.
        public var cost: Int
        /// The moment the entry expires, or `nil` when it never does (for a sliding lifetime:
        /// as this read renewed it).
        public var expirationDate: Date?
        /// The lifetime each read renews, for an entry written with ``Expiry/sliding(_:)``.
        public var slidingInterval: TimeInterval?

        /// Creates an entry.
        public init(value: Value, cost: Int, expirationDate: Date?, slidingInterval: TimeInterval? = nil) {
            self.value = value
            self.cost = cost
            self.expirationDate = expirationDate
            self.slidingInterval = slidingInterval
        }
    }
}

extension MemoryStore.Entry: Sendable where Value: Sendable {}
