import Synchronization

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
