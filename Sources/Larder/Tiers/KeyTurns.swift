import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Per-key ordering for ``Storage``: at most one writer of a key at a time, waiters served in
/// arrival order, and a generation per key that tells a reader whether a write completed while
/// it was reading.
///
/// A turn is not a thread lock held across I/O: nothing blocks while holding the internal lock,
/// a holder may do I/O or `await`, and a waiter waits for the holder (a thread on a semaphore,
/// a task on a continuation), never for a lock around caller code. Reads take no turn; they
/// record ``token(for:)`` before reading the slower tiers and promote what they found only
/// through ``withTurnIfUnchanged(_:since:_:)``, which never waits: if a writer holds the key or
/// finished since the token was taken, the promotion is skipped (the value is still returned).
///
/// - Invariant: a key is in `held` exactly while one caller holds its turn; a key's generation
///   changes each time a turn on it ends; `epoch` changes when ``advanceEpoch()`` runs.
final class KeyTurns<Key: Hashable & Sendable>: Sendable {
    /// One waiter for a turn.
    enum Waiter {
        case thread(DispatchSemaphore)
        case task(CheckedContinuation<Void, Never>)

        func resume() {
            switch self {
            case .thread(let semaphore): semaphore.signal()
            case .task(let continuation): continuation.resume()
            }
        }
    }

    /// What a reader saw before reading (``KeyTurnToken``).
    typealias Token = KeyTurnToken

    struct State {
        /// Keys whose turn is held, each with its waiters in arrival order.
        var held: [Key: [Waiter]] = [:]
        /// Generations by hash stripe: a collision only makes a promotion skip needlessly.
        var generations = [UInt64](repeating: 0, count: KeyTurns.stripeCount)
        var epoch: UInt64 = 0
        /// Promotions between their check and their end (see ``drainPromotions()``).
        var activePromotions = 0
        /// Keys ``invalidate(_:)`` or ``invalidateAll()`` named while their turn was held:
        /// the holder may still write an older value, so the turn runs the drop hook before it
        /// ends.
        var invalidatedWhileHeld: Set<Key> = []
    }

    static var stripeCount: Int { 1_024 }
    private let state = Locked(State())
    /// Drops the local copy of a key invalidated while its turn was held; runs holding that
    /// turn, just before it ends.
    private let dropInvalidated: (@Sendable (Key) -> Void)?

    init(droppingInvalidated dropInvalidated: (@Sendable (Key) -> Void)? = nil) {
        self.dropInvalidated = dropInvalidated
    }

    private static func stripe(of key: Key) -> Int {
        Int(UInt(bitPattern: key.hashValue) % UInt(stripeCount))
    }

    /// What a reader records before it reads the tiers below memory.
    func token(for key: Key) -> Token {
        let stripe = Self.stripe(of: key)
        return state.withLock { Token(generation: $0.generations[stripe], epoch: $0.epoch) }
    }

    /// Takes `key`'s turn, blocking the calling thread while another caller holds it.
    func acquire(_ key: Key) {
        let semaphore: DispatchSemaphore? = state.withLock { state in
            guard state.held[key] != nil else {
                state.held[key] = []
                return nil
            }
            let semaphore = DispatchSemaphore(value: 0)
            state.held[key]!.append(.thread(semaphore))
            return semaphore
        }
        semaphore?.wait()
    }

    /// Takes `key`'s turn, suspending the task while another caller holds it.
    nonisolated(nonsending) func acquire(_ key: Key) async {
        let isFree: Bool = state.withLock { state in
            guard state.held[key] != nil else {
                state.held[key] = []
                return true
            }
            return false
        }
        if isFree { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let handedOver: Bool = state.withLock { state in
                // The holder may have finished between the two critical sections.
                guard state.held[key] != nil else {
                    state.held[key] = []
                    return true
                }
                state.held[key]!.append(.task(continuation))
                return false
            }
            if handedOver { continuation.resume() }
        }
    }

    /// Ends `key`'s turn: bumps its generation and hands the turn to the next waiter, if any.
    func release(_ key: Key) {
        let stripe = Self.stripe(of: key)
        endTurn(key) { $0.generations[stripe] &+= 1 }
    }

    /// Ends `key`'s turn: `finish` under the lock, then the hand-over to the next waiter. A key
    /// invalidated while held first has its copy dropped (``dropInvalidated``), still holding
    /// the turn.
    private func endTurn(_ key: Key, _ finish: (inout State) -> Void) {
        while true {
            let next: Waiter?? = state.withLock { state in
                if Self.takeInvalidation(key, in: &state) { return nil }
                finish(&state)
                return .some(Self.handOver(key, in: &state))
            }
            guard let next else {
                dropInvalidated?(key)
                continue
            }
            next?.resume()
            return
        }
    }

    /// Whether `key` was invalidated while held (clearing the mark); cheap while none was.
    private static func takeInvalidation(_ key: Key, in state: inout State) -> Bool {
        !state.invalidatedWhileHeld.isEmpty && state.invalidatedWhileHeld.remove(key) != nil
    }

    /// Runs `body` holding `key`'s turn (blocking the thread while waiting for it).
    func withTurn<T>(_ key: Key, _ body: () throws -> T) rethrows -> T {
        acquire(key)
        defer { release(key) }
        return try body()
    }

    /// Runs `body` holding `key`'s turn, suspending while waiting for it.
    nonisolated(nonsending) func withTurn<T>(_ key: Key, _ body: nonisolated(nonsending) () async throws -> T) async rethrows -> T {
        await acquire(key)
        defer { release(key) }
        return try await body()
    }

    /// Runs `body` holding the turns of all `keys` (distinct), taken one after another in the
    /// order given. Every caller that holds several turns at once takes them in one order
    /// (``Storage`` sorts by cache key), so two such callers never wait for each other.
    nonisolated(nonsending) func withTurns<T>(_ keys: [Key], _ body: nonisolated(nonsending) () async throws -> T) async rethrows -> T {
        for key in keys { await acquire(key) }
        defer { for key in keys.reversed() { release(key) } }
        return try await body()
    }

    /// Runs `body` holding `key`'s turn only if the turn is free right now and nothing was
    /// written to `key` (and no ``advanceEpoch()`` ran) since `token` was taken. Never waits.
    ///
    /// - Returns: `body`'s result, or `nil` when it did not run.
    func withTurnIfUnchanged<T>(_ key: Key, since token: Token, _ body: () throws -> T) rethrows -> T? {
        guard tryAcquire(key, since: token) else { return nil }
        defer { endPromotion(key) }
        return try body()
    }

    /// The async form of ``withTurnIfUnchanged(_:since:_:)``.
    nonisolated(nonsending) func withTurnIfUnchanged<T>(
        _ key: Key, since token: Token, _ body: nonisolated(nonsending) () async throws -> T
    ) async rethrows -> T? {
        guard tryAcquire(key, since: token) else { return nil }
        defer { endPromotion(key) }
        return try await body()
    }

    private func tryAcquire(_ key: Key, since token: Token) -> Bool {
        let stripe = Self.stripe(of: key)
        return state.withLock { state in
            guard state.held[key] == nil, state.epoch == token.epoch,
                  state.generations[stripe] == token.generation else { return false }
            state.held[key] = []
            state.activePromotions += 1
            return true
        }
    }

    /// Ends a promotion's turn without bumping the generation: a promotion copies the value a
    /// reader already saw, it writes nothing new.
    private func endPromotion(_ key: Key) {
        endTurn(key) { $0.activePromotions -= 1 }
    }

    /// Ends the holder's turn on `key`: the next waiter (resumed by the caller, outside the
    /// lock) now holds it, or the key is free.
    private static func handOver(_ key: Key, in state: inout State) -> Waiter? {
        guard var waiters = state.held[key] else {
            preconditionFailure("KeyTurns: ending a turn that is not held")
        }
        if waiters.isEmpty {
            state.held[key] = nil
            return nil
        }
        let next = waiters.removeFirst()
        state.held[key] = waiters
        return next
    }

    /// Whether `key`'s turn is free now and nothing was written to it since `token` was taken.
    func isUnchanged(_ key: Key, since token: Token) -> Bool {
        let stripe = Self.stripe(of: key)
        return state.withLock { state in
            state.held[key] == nil && state.epoch == token.epoch && state.generations[stripe] == token.generation
        }
    }

    /// Changes `key`'s generation without taking its turn: a promotion whose token was taken
    /// earlier is skipped (an invalidation pushed by a shared tier).
    ///
    /// - Returns: Whether `key`'s turn was held at that moment: only then can a promotion
    ///   already past its check still write.
    func bump(_ key: Key) -> Bool {
        let stripe = Self.stripe(of: key)
        return state.withLock { state in
            state.generations[stripe] &+= 1
            return state.held[key] != nil
        }
    }

    /// Changes `key`'s generation, so that a promotion whose token was taken earlier is
    /// skipped, and, when its turn is held, has the turn drop the key's copy before it ends
    /// (the holder may be writing an older value): a change another store made to the key.
    func invalidate(_ key: Key) {
        let stripe = Self.stripe(of: key)
        state.withLock { state in
            state.generations[stripe] &+= 1
            if state.held[key] != nil { state.invalidatedWhileHeld.insert(key) }
        }
    }

    /// ``invalidate(_:)`` for every key: every token taken so far is invalidated, and every
    /// turn held now drops its key's copy before it ends.
    func invalidateAll() {
        state.withLock { state in
            state.epoch &+= 1
            state.invalidatedWhileHeld.formUnion(state.held.keys)
        }
    }

    /// The keys whose turn is held now.
    func heldKeys() -> [Key] {
        state.withLock { Array($0.held.keys) }
    }

    /// How many callers wait for `key`'s turn (for tests and diagnostics).
    func waiterCount(_ key: Key) -> Int {
        state.withLock { $0.held[key]?.count ?? 0 }
    }

    /// Invalidates every token taken so far and waits for promotions already past their check
    /// to finish, so that after it returns no promotion started earlier can write anything.
    ///
    /// Used by ``Storage/removeAll(tiers:)`` before it clears memory.
    func advanceEpoch() {
        state.withLock { $0.epoch &+= 1 }
        // Promotions hold their turn only for one memory or tier write: spin briefly.
        while state.withLock({ $0.activePromotions }) > 0 {
            sched_yield()
        }
    }
}

/// What a reader of ``KeyTurns`` saw before reading: the key's generation stripe and the epoch.
/// Outside the generic class so that it has no generic parameter: code that is not specialized
/// for a key type (a batch read in `Storage`) then needs no run-time metadata lookup for it.
struct KeyTurnToken: Equatable {
    var generation: UInt64
    var epoch: UInt64
}
