public import Foundation

/// A `Clock` that moves only when a test advances it: get-or-load's soft and hard timeouts sleep
/// on it (`Storage.Configuration.loadClock`), so a test decides when they pass, whatever the
/// machine's scheduling.
public final class ManualClock: Clock, Sendable {
    public struct Instant: InstantProtocol {
        public var offset: Duration

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var nextID = 0
    }

    private let state = TestLock(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// How many tasks sleep on the clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = state.withLock { state in
                    if Task.isCancelled { return .some(CancellationError()) }
                    if deadline <= state.now { return .some(nil) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return .none
                }
                if case let .some(error) = resumeNow {
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Waits (in real time, up to 5 minutes: a stalled machine resumes tasks late) until at least
    /// `count` tasks sleep on the clock; returns whether they did.
    public func waitForSleepers(_ count: Int) async -> Bool {
        await pollUntil { self.sleeperCount >= count }
    }
}

/// A loader a test drives: each call succeeds at once, fails at once, or hangs until the test
/// releases it (a hanging call that is cancelled leaves with `CancellationError`, counted).
public final class LoaderControl<Value: Sendable>: Sendable {
    public enum Mode: Sendable {
        case succeed(Value)
        case fail
        case hang
    }

    /// The error a failing call throws.
    public struct Failure: Error, Equatable {
        public init() {}
    }

    private struct State {
        var mode: Mode
        var calls = 0
        var cancellations = 0
        var keysAsked: [[String]] = []
        var hanging: [Int: CheckedContinuation<Value, any Error>] = [:]
        var nextID = 0
    }

    private let state: TestLock<State>

    public init(_ mode: Mode) {
        state = TestLock(State(mode: mode))
    }

    public func set(_ mode: Mode) {
        state.withLock { $0.mode = mode }
    }

    /// Calls so far.
    public var calls: Int { state.withLock { $0.calls } }
    /// Hanging calls that were cancelled.
    public var cancellations: Int { state.withLock { $0.cancellations } }
    /// Calls hanging now.
    public var hangingCount: Int { state.withLock { $0.hanging.count } }
    /// The keys of each bulk call, in order (see ``loadMany(_:_:)``).
    public var keysAsked: [[String]] { state.withLock { $0.keysAsked } }

    /// One call of the loader.
    public func load() async throws -> Value {
        let (mode, id) = state.withLock { state -> (Mode, Int) in
            state.calls += 1
            state.nextID += 1
            return (state.mode, state.nextID)
        }
        switch mode {
        case .succeed(let value): return value
        case .fail: throw Failure()
        case .hang:
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                    let cancelled = state.withLock { state -> Bool in
                        if Task.isCancelled {
                            state.cancellations += 1
                            return true
                        }
                        state.hanging[id] = continuation
                        return false
                    }
                    if cancelled { continuation.resume(throwing: CancellationError()) }
                }
            } onCancel: {
                let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
                    guard let continuation = state.hanging.removeValue(forKey: id) else { return nil }
                    state.cancellations += 1
                    return continuation
                }
                continuation?.resume(throwing: CancellationError())
            }
        }
    }

    /// One bulk call: records the keys, then behaves as ``load()`` and maps every key to the
    /// value made from it by `make`.
    public func loadMany(_ keys: [String], _ make: (String) -> Value) async throws -> [String: Value] {
        state.withLock { $0.keysAsked.append(keys) }
        _ = try await load()
        return Dictionary(uniqueKeysWithValues: keys.map { ($0, make($0)) })
    }

    /// Ends every hanging call with `result`.
    public func release(_ result: Result<Value, any Error>) {
        let hanging = state.withLock { state in
            defer { state.hanging.removeAll() }
            return Array(state.hanging.values)
        }
        for continuation in hanging { continuation.resume(with: result) }
    }

    /// Waits (in real time, up to 5 minutes) until `count` calls hang; returns whether they did.
    public func waitForHanging(_ count: Int) async -> Bool {
        await pollUntil { self.hangingCount >= count }
    }
}

/// Polls `condition` every few milliseconds for up to 5 minutes of real time; returns whether it
/// became true. Not 60 s: a full CI run on a shared 2-core machine once stalled every test of the
/// process for about 115 s, so only the suites' own time limits bound these waits.
public func pollUntil(_ condition: @Sendable () async throws -> Bool) async rethrows -> Bool {
    let end = ContinuousClock.now + .seconds(300)
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try await condition()
}
