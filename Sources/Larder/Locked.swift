import Foundation

/// A value behind an `NSLock`, with `Mutex`'s `withLock` shape.
///
/// Used instead of `Synchronization.Mutex` where ThreadSanitizer must see the lock: on Linux,
/// `Mutex` locks with raw futex calls that TSan does not intercept, so every access it guards is
/// reported as a race and the TSan CI step would be noise. `NSLock` is a pthread mutex, which
/// TSan understands.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only read or written inside `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value. Keep `body` short: no user code, no
    /// waiting on other locks.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
