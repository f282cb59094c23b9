/// Runs at most one operation per key at a time in this process, and hands its result to every
/// caller waiting for that key: the one coalescer of the package, used by
/// ``Storage/value(forKey:tiers:expiry:failureExpiry:options:orLoad:)`` and by `ImageCache`.
///
/// Each caller waits on its own continuation, so:
/// - a caller whose task is cancelled leaves at once with `CancellationError`, and the others
///   keep waiting;
/// - the operation runs in its own unstructured task, which no single caller's cancellation
///   reaches; it is cancelled only when its last waiter leaves;
/// - an operation that has lost every waiter is forgotten at once, so the next caller starts a
///   fresh one instead of joining a cancelled one.
///
/// Every continuation is resumed exactly once: by ``finish`` (with the result) or by ``leave``
/// (with `CancellationError`), whichever removes it from the table under the lock first.
package final class RequestCoalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    package init() {}

    private struct Operation {
        let id: UInt64
        var task: Task<Void, Never>?
        var waiters: [UInt64: CheckedContinuation<Value, any Error>]
    }

    private struct State {
        var operations: [Key: Operation] = [:]
        var nextID: UInt64 = 0

        mutating func makeID() -> UInt64 {
            nextID += 1
            return nextID
        }
    }

    private let state = Locked(State())

    /// The result of the operation for `key`, starting `work` unless one is already in flight.
    ///
    /// - Throws: The operation's error, or `CancellationError` when the calling task is
    ///   cancelled before the result arrives.
    package func value(for key: Key, work: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let waiterID = state.withLock { $0.makeID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // `Task.isCancelled` is read under the lock: either it is already true here
                // (the waiter never joins), or the cancellation handler runs later and finds it.
                let joined = state.withLock { state -> Bool in
                    if Task.isCancelled { return false }
                    if state.operations[key] != nil {
                        state.operations[key]!.waiters[waiterID] = continuation
                        return true
                    }
                    let operationID = state.makeID()
                    var operation = Operation(id: operationID, task: nil, waiters: [waiterID: continuation])
                    operation.task = Task {
                        let result: Result<Value, any Error>
                        do { result = .success(try await work()) } catch { result = .failure(error) }
                        self.finish(key, operationID: operationID, with: result)
                    }
                    state.operations[key] = operation
                    return true
                }
                if !joined { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            leave(key, waiterID: waiterID)
        }
    }

    /// The number of callers waiting for `key` (for tests).
    package func waiterCount(for key: Key) -> Int {
        state.withLock { $0.operations[key]?.waiters.count ?? 0 }
    }

    /// The number of operations in flight (for tests).
    package var operationCount: Int {
        state.withLock { $0.operations.count }
    }

    private func leave(_ key: Key, waiterID: UInt64) {
        let (continuation, abandoned) = state.withLock { state -> (CheckedContinuation<Value, any Error>?, Task<Void, Never>?) in
            guard var operation = state.operations[key],
                  let continuation = operation.waiters.removeValue(forKey: waiterID)
            else { return (nil, nil) }
            if operation.waiters.isEmpty {
                state.operations[key] = nil
                return (continuation, operation.task)
            }
            state.operations[key] = operation
            return (continuation, nil)
        }
        // Outside the lock: cancelling runs the operation's cancellation handlers (user code).
        abandoned?.cancel()
        continuation?.resume(throwing: CancellationError())
    }

    private func finish(_ key: Key, operationID: UInt64, with result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard let operation = state.operations[key], operation.id == operationID else { return [] }
            state.operations[key] = nil
            return Array(operation.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }
}
