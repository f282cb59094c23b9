#if canImport(Glibc)
public import Glibc
#elseif canImport(Musl)
public import Musl
#elseif canImport(Darwin)
public import Darwin
#endif

/// A value behind a pthread mutex, with `Mutex`'s `withLock` shape: the one lock wrapper of the
/// package.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer must see the lock: on Linux,
/// `Mutex` locks with raw futex calls that TSan does not intercept, so every access it guards is
/// reported as a race and the TSan CI step would be noise. A pthread mutex is what TSan
/// understands. `withLock` hands its result out as `sending`, so a non-`Sendable` value made
/// inside the critical section can leave it safely.
///
/// By default the mutex is the one `NSLock` wraps, set up as `NSLock` sets it up (default
/// attributes: a thread that finds it held sleeps at once), called directly rather than through
/// the class. With `spinsBeforeSleeping` it is adaptive on glibc (`PTHREAD_MUTEX_ADAPTIVE_NP`):
/// a thread that finds it held spins briefly first. That suits a lock many threads take for a
/// moment on an operation (``DiskStore``'s pool of read connections: when every read took it
/// twice, two threads reading one store slept on it about once in 25 reads), never one held
/// across I/O. With `ownsCacheLines` the mutex and the value each start on a 128-byte boundary
/// and fill their lines alone, so that locks one thread takes over and over (``DiskStore``'s
/// read lanes) do not share cache lines with other threads' locks.
///
/// The value lives in memory of its own, reached through a pointer, rather than in a stored
/// `var`: a class's stored `var` costs a dynamic exclusivity check (`swift_beginAccess` and
/// `swift_endAccess`, about 120 instructions) on every access, which the lock makes redundant.
@usableFromInline
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: the value behind `storage` is only read or written inside `mutex`.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let storage: UnsafeMutablePointer<Value>

    package init(_ value: sending Value, spinsBeforeSleeping: Bool = false, ownsCacheLines: Bool = false) {
        if ownsCacheLines {
            // Each in memory of its own, from a cache-line boundary to the next: a lock one
            // thread takes over and over stays in that thread's core even while other threads
            // take locks allocated beside it.
            mutex = Self.allocateOwningCacheLines(pthread_mutex_t.self)
            storage = Self.allocateOwningCacheLines(Value.self)
        } else {
            mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            storage = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        }
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if canImport(Glibc)
        if spinsBeforeSleeping { pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP)) }
        #endif
        // Fails only for invalid attributes or without memory: our bug, not the caller's input.
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "pthread_mutex_init failed (\(status))")
        storage.initialize(to: value)
    }

    /// Two cache lines' worth (adjacent-line prefetch pairs lines on x86), or as many as `type` needs.
    private static func allocateOwningCacheLines<T>(_ type: T.Type) -> UnsafeMutablePointer<T> {
        let line = 128
        let size = (MemoryLayout<T>.stride + line - 1) / line * line
        return UnsafeMutableRawPointer.allocate(byteCount: max(size, line), alignment: line)
            .bindMemory(to: T.self, capacity: 1)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        storage.deinitialize(count: 1)
        storage.deallocate()
    }

    /// Runs `body` with exclusive access to the value. Keep `body` short: no user code, no
    /// I/O, no waiting on other locks.
    @inlinable
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&storage.pointee)
    }

    /// ``withLock(_:)`` for an owner whose result is not `Sendable` and cannot be `sending`
    /// (a generic store handing out values of a type it does not constrain). The owner states
    /// why that is sound: ``MemoryStore`` is `Sendable` only where its values are.
    @inlinable
    package func withLockUnchecked<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&storage.pointee)
    }
}
