extension MemoryStore {
    /// Values removed under the lock, released by the caller once the lock is free.
    ///
    /// Holds the first value inline so that a write evicting one entry does not allocate.
    @usableFromInline
    struct Graveyard {
        @usableFromInline var first: Value?
        @usableFromInline var rest: [Value]

        @inlinable
        init() {
            first = nil
            rest = []
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
