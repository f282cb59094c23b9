public import Foundation

/// A value behind an `NSLock`, with `Mutex`'s `withLock` shape: the one lock wrapper of the
/// package.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer must see the lock: on Linux,
/// `Mutex` locks with raw futex calls that TSan does not intercept, so every access it guards is
/// reported as a race and the TSan CI step would be noise. `NSLock` is a pthread mutex, which
/// TSan understands. `withLock` hands its result out as `sending`, so a non-`Sendable` value
/// made inside the critical section can leave it safely.
///
/// The value lives in memory of its own, reached through a pointer, rather than in a stored
/// `var`: a class's stored `var` costs a dynamic exclusivity check (`swift_beginAccess` and
/// `swift_endAccess`, about 120 instructions) on every access, which the lock makes redundant.
@usableFromInline
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: the value behind `storage` is only read or written inside `lock`.
    @usableFromInline let lock = NSLock()
    @usableFromInline let storage: UnsafeMutablePointer<Value>

    package init(_ value: sending Value) {
        storage = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        storage.initialize(to: value)
    }

    deinit {
        storage.deinitialize(count: 1)
        storage.deallocate()
    }

    /// Runs `body` with exclusive access to the value. Keep `body` short: no user code, no
    /// I/O, no waiting on other locks.
    @inlinable
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> sending Result) throws(E) -> sending Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&storage.pointee)
    }

    /// ``withLock(_:)`` for an owner whose result is not `Sendable` and cannot be `sending`
    /// (a generic store handing out values of a type it does not constrain). The owner states
    /// why that is sound: ``MemoryStore`` is `Sendable` only where its values are.
    @inlinable
    package func withLockUnchecked<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&storage.pointee)
    }
}
