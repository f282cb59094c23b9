#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation

/// The system's wall clock at the resolution of its scheduler tick (a few milliseconds), read
/// without a syscall: cheap enough to stamp every memory hit with.
@usableFromInline
enum CoarseClock {
    /// Seconds since the reference date (2001-01-01), as `Date.timeIntervalSinceReferenceDate`.
    @usableFromInline
    static func now() -> Double {
        #if os(Linux)
        var time = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &time)
        return Double(time.tv_sec) - Date.timeIntervalBetween1970AndReferenceDate + Double(time.tv_nsec) * 1e-9
        #else
        return Date().timeIntervalSinceReferenceDate
        #endif
    }
}
