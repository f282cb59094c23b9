import Synchronization

/// A change to a ``Storage``: what happened, to which key, in which tier.
///
/// ```swift
/// let events = storage.events()
/// Task {
///     for await event in events where event.kind == .removed {
///         print("\(event.key) left \(event.tier)")
///     }
/// }
/// ```
public struct StorageEvent: Sendable, Hashable, CustomStringConvertible {
    /// What happened: an open set of values, so new kinds break no caller's `switch`.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// The kind's name, for example `"written"`.
        public let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// A value was written to the tier.
        public static let written = Kind("written")
        /// A value was removed from the tier by a call (`removeValue`, a write that cleared an
        /// older value, `removeAll`).
        public static let removed = Kind("removed")
        /// The tier evicted the value for its limits.
        public static let evicted = Kind("evicted")
        /// The tier dropped the value because it expired.
        public static let expired = Kind("expired")

        public var description: String { name }
    }

    /// What happened.
    public var kind: Kind
    /// The entry's cache key (``CacheKey/cacheKey``).
    public var key: String
    /// The tier it happened in.
    public var tier: StorageTier

    /// Creates an event.
    public init(kind: Kind, key: String, tier: StorageTier) {
        self.kind = kind
        self.key = key
        self.tier = tier
    }

    public var description: String { "\(kind) \(key) (\(tier))" }
}

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

/// Hands every event to every observer without ever blocking the caller.
@usableFromInline
final class EventBroadcaster: Sendable {
    private struct Observer {
        let continuation: AsyncStream<StorageEvent>.Continuation
        let dropped: Locked<Int>
    }

    private struct State {
        var observers: [UInt64: Observer] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())
    /// Read without the lock on the hot path: a write with no observer costs one atomic load.
    private let observerCount = Atomic<Int>(0)

    init() {}

    @usableFromInline var hasObservers: Bool { observerCount.load(ordering: .relaxed) > 0 }

    func subscribe(bufferSize: Int) -> StorageEvents {
        let dropped = Locked(0)
        let (stream, continuation) = AsyncStream<StorageEvent>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, bufferSize)))
        let id: UInt64 = state.withLock { state in
            state.nextID += 1
            state.observers[state.nextID] = Observer(continuation: continuation, dropped: dropped)
            return state.nextID
        }
        observerCount.add(1, ordering: .relaxed)
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            let removed = self.state.withLock { $0.observers.removeValue(forKey: id) != nil }
            if removed { self.observerCount.subtract(1, ordering: .relaxed) }
        }
        return StorageEvents(stream: stream, dropped: dropped)
    }

    func send(_ event: StorageEvent) {
        guard hasObservers else { return }
        let observers = state.withLock { Array($0.observers.values) }
        for observer in observers {
            if case .dropped = observer.continuation.yield(event) {
                observer.dropped.withLock { $0 += 1 }
            }
        }
    }

    func finish() {
        let observers = state.withLock { state in
            defer { state.observers.removeAll() }
            return Array(state.observers.values)
        }
        observerCount.store(0, ordering: .relaxed)
        for observer in observers { observer.continuation.finish() }
    }

    deinit {
        finish()
    }
}
