import Synchronization

/// The loader runs of get-or-load in flight, at most one per key in this process, each in an
/// unstructured task of its own, so that a run can outlive the call that started it.
///
/// A *run* is one call of a loader and the storing of its value. The coalesced get-or-load of a
/// key waits for its run; a run is *detached* when nobody needs to wait for it any more but its
/// value is still wanted in the tiers (a soft timeout returned a stale value, or a refresh ahead
/// of expiry started it): a detached run is never cancelled, and a later get-or-load of its key
/// joins it instead of starting a second loader. A run nobody waits for and that is not
/// detached is cancelled (``abandon(_:)``).
final class LoadRuns<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// A run as its starter or a joiner holds it.
    struct Handle: Sendable {
        let key: Key
        let id: UInt64
        let task: Task<Value, any Error>
        /// Whether this call started the run (rather than joining one in flight).
        let isNew: Bool
    }

    private struct Run {
        let id: UInt64
        let task: Task<Value, any Error>
        var isDetached: Bool
    }

    private struct State {
        var runs: [Key: Run] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    init() {}

    /// The run in flight for `key`, or a new one running `operation`; a new run starts detached
    /// when `detached`.
    func run(for key: Key, detached: Bool = false, operation: @escaping @Sendable () async throws -> Value) -> Handle {
        state.withLock { state in
            if let run = state.runs[key] {
                if detached { state.runs[key]?.isDetached = true }
                return Handle(key: key, id: run.id, task: run.task, isNew: false)
            }
            state.nextID += 1
            let id = state.nextID
            // The task may finish before this insertion is visible: `finished` takes the lock,
            // so it runs after it.
            let task = Task {
                defer { self.finished(key, id: id) }
                return try await operation()
            }
            state.runs[key] = Run(id: id, task: task, isDetached: detached)
            return Handle(key: key, id: id, task: task, isNew: true)
        }
    }

    /// Whether a run for `key` is in flight.
    func isRunning(_ key: Key) -> Bool {
        state.withLock { $0.runs[key] != nil }
    }

    /// Lets `handle`'s run go on with nobody waiting: it is no longer cancelled by ``abandon(_:)``.
    func detach(_ handle: Handle) {
        state.withLock { state in
            if state.runs[handle.key]?.id == handle.id { state.runs[handle.key]?.isDetached = true }
        }
    }

    /// The caller waiting for `handle`'s run left (cancelled, or at its hard timeout): the run
    /// is cancelled and forgotten unless it is detached.
    func abandon(_ handle: Handle) {
        let cancels = state.withLock { state -> Bool in
            guard let run = state.runs[handle.key], run.id == handle.id, !run.isDetached else { return false }
            state.runs[handle.key] = nil
            return true
        }
        // Outside the lock: cancelling runs the loader's cancellation handlers (user code).
        if cancels { handle.task.cancel() }
    }

    private func finished(_ key: Key, id: UInt64) {
        state.withLock { state in
            if state.runs[key]?.id == id { state.runs[key] = nil }
        }
    }
}

/// How a wait for a run ended.
enum RunOutcome<Value: Sendable>: Sendable {
    case finished(Result<Value, any Error>)
    case softTimeout
    case hardTimeout
}

/// Waits for `task` until it finishes or `hard` passes on `clock`, whichever comes first; when
/// `soft` passes first and `atSoftTimeout` says so (a stale value is at hand), the wait ends
/// there instead, else it goes on, the hard limit still counted from the start. A cancelled
/// caller leaves at once with `CancellationError` (the task goes on: the caller decides, with
/// ``LoadRuns/abandon(_:)``, whether it is cancelled).
func awaitRun<Value: Sendable>(
    _ task: Task<Value, any Error>, soft: Duration?, hard: Duration?, clock: any Clock<Duration>,
    atSoftTimeout: @escaping @Sendable () async -> Bool = { true }
) async throws -> RunOutcome<Value> {
    let gate = OneShot<RunOutcome<Value>>()
    return try await gate.wait { gate in
        var helpers = [Task { gate.resolve(.success(.finished(await task.result))) }]
        if let soft {
            helpers.append(Task {
                do { try await clock.sleep(for: soft) } catch { return }
                if await atSoftTimeout() { gate.resolve(.success(.softTimeout)) }
            })
        }
        if let hard {
            helpers.append(Task {
                do { try await clock.sleep(for: hard) } catch { return }
                gate.resolve(.success(.hardTimeout))
            })
        }
        return helpers
    }
}

/// A continuation resumed exactly once, by whichever of its helpers (or the caller's
/// cancellation) resolves it first; the helpers are cancelled then.
private final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var result: Result<Value, any Error>?
        var helpers: [Task<Void, Never>] = []
    }

    private let state = Mutex(State())

    func wait(starting start: (OneShot) -> [Task<Void, Never>]) async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let early = state.withLock { state -> Result<Value, any Error>? in
                    if let result = state.result { return result }
                    state.continuation = continuation
                    return nil
                }
                if let early {
                    continuation.resume(with: early)
                    return
                }
                let helpers = start(self)
                let late = state.withLock { state -> Bool in
                    if state.result != nil { return true }
                    state.helpers = helpers
                    return false
                }
                if late { for helper in helpers { helper.cancel() } }
            }
        } onCancel: {
            resolve(.failure(CancellationError()))
        }
    }

    func resolve(_ result: Result<Value, any Error>) {
        let (continuation, helpers) = state.withLock { state -> (CheckedContinuation<Value, any Error>?, [Task<Void, Never>]) in
            guard state.result == nil else { return (nil, []) }
            state.result = result
            defer {
                state.continuation = nil
                state.helpers = []
            }
            return (state.continuation, state.helpers)
        }
        for helper in helpers { helper.cancel() }
        continuation?.resume(with: result)
    }
}
