/// One observer's sequence of ``StorageEvent``s.
///
/// Each observer has its own bounded buffer: when it falls behind, its oldest events are
/// dropped (counted in ``droppedCount``) and the storage never waits for it. The sequence ends
/// when the observer stops iterating or the storage is gone.
public struct StorageEvents: AsyncSequence, Sendable {
    public typealias Element = StorageEvent

    let stream: AsyncStream<StorageEvent>
    let dropped: Locked<Int>

    /// Events this observer lost because its buffer was full.
    public var droppedCount: Int { dropped.withLock { $0 } }

    public func makeAsyncIterator() -> AsyncStream<StorageEvent>.Iterator {
        stream.makeAsyncIterator()
    }
}
