extension MemoryStore {
    /// Values removed under the lock, released by the caller once the lock is free.
    ///
    /// Holds the first value inline so that a write evicting one entry does not allocate.
    @usableFromInline
    struct Graveyard {
        @usableFromInline var first: Value?
        @usableFromInline var rest: [Value]
        /// The keys evicted, expired or trimmed by age, with what happened, kept only while a
        /// storage's events have observers (`nil` otherwise: nothing is allocated).
        @usableFromInline var departed: [(key: Key, kind: StorageEvent.Kind)]?

        @inlinable
        init(recording: Bool = false) {
            first = nil
            rest = []
            departed = recording ? [] : nil
        }

        @inlinable
        mutating func bury(_ value: Value) {
            if first == nil {
                first = value
            } else {
                rest.append(value)
            }
        }
    }
}
