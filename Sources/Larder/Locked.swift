public import Foundation

/// A value behind an `NSLock`, with `Mutex`'s `withLock` shape: the one lock wrapper of the
/// package.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer must see the lock: on Linux,
/// `Mutex` locks with raw futex calls that TSan does not intercept, so every access it guards is
/// reported as a race and the TSan CI step would be noise. `NSLock` is a pthread mutex, which
/// TSan understands. `withLock` hands its result out as `sending`, so a non-`Sendable` value
/// made inside the critical section can leave it safely.
@usableFromInline
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only read or written inside `lock`.
    @usableFromInline let lock = NSLock()
    @usableFromInline var value: Value

    package init(_ value: sending Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value. Keep `body` short: no user code, no
    /// I/O, no waiting on other locks.
    @inlinable
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> sending Result) throws(E) -> sending Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
