import Synchronization

/// A gate tasks wait at until the test opens it; a waiting task that is cancelled leaves with
/// `CancellationError`, so a fetch closure waiting here sees its own cancellation.
final class AsyncGate: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextID = 0
    }
    private let state = Mutex(State())

    func wait() async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = state.withLock { state in
                    if state.isOpen { return .some(nil) }
                    if Task.isCancelled { return .some(CancellationError()) }
                    state.waiters[id] = continuation
                    return .none
                }
                if case let .some(error) = resumeNow {
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A counter a test can await: `wait(until:)` returns once the count reaches a value.
final class AsyncCounter: Sendable {
    private struct State {
        var count = 0
        var waiters: [(target: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    var value: Int { state.withLock { $0.count } }

    func increment() {
        let ready = state.withLock { state in
            state.count += 1
            let count = state.count
            let ready = state.waiters.filter { $0.target <= count }.map(\.continuation)
            state.waiters.removeAll { $0.target <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    func wait(until target: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.count >= target { return true }
                state.waiters.append((target, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

/// Tracks how many fetches run at once and the most that ever did.
final class ConcurrencyProbe: Sendable {
    private let state = Mutex((current: 0, maximum: 0))

    var maximum: Int { state.withLock { $0.maximum } }

    func enter() {
        state.withLock { state in
            state.current += 1
            state.maximum = max(state.maximum, state.current)
        }
    }

    func leave() { state.withLock { $0.current -= 1 } }
}
