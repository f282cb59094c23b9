import Foundation

/// A value behind an `NSLock` (visible to ThreadSanitizer, unlike `Mutex`), for test helpers.
final class TestLock<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// A gate tasks wait at until the test opens it; a waiting task that is cancelled leaves with
/// `CancellationError`, so a fetch closure waiting here sees its own cancellation.
public final class AsyncGate: Sendable {
    public init() {}

    private struct State {
        var isOpen = false
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextID = 0
    }
    private let state = TestLock(State())

    public func wait() async throws {
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

    public func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A counter a test can await: `wait(until:)` returns once the count reaches a value.
public final class AsyncCounter: Sendable {
    public init() {}

    private struct State {
        var count = 0
        var waiters: [(target: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = TestLock(State())

    public var value: Int { state.withLock { $0.count } }

    public func increment() {
        let ready = state.withLock { state in
            state.count += 1
            let count = state.count
            let ready = state.waiters.filter { $0.target <= count }.map(\.continuation)
            state.waiters.removeAll { $0.target <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    public func wait(until target: Int) async {
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
public final class ConcurrencyProbe: Sendable {
    public init() {}

    private let state = TestLock((current: 0, maximum: 0))

    public var maximum: Int { state.withLock { $0.maximum } }

    public func enter() {
        state.withLock { state in
            state.current += 1
            state.maximum = max(state.maximum, state.current)
        }
    }

    public func leave() { state.withLock { $0.current -= 1 } }
}
