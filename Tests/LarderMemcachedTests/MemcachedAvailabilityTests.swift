#if Memcached
import Foundation
import Testing

/// Says how many server suites were skipped on a machine without memcached; fails under CI.
@Suite(.timeLimit(.minutes(5)))
struct MemcachedAvailabilityTests {
    @Test func memcachedIsPresentOrItsSuitesAreReportedSkipped() {
        if MemcachedServer.binary == nil {
            #expect(!MemcachedServer.isCI, "CI=true: the memcached binary is required (apt-get install -y memcached)")
            print("memcached not found: skipped \(MemcachedServer.serverSuites.count) suites: \(MemcachedServer.serverSuites.joined(separator: ", "))")
        } else {
            #expect(MemcachedServer.shouldRun)
        }
    }
}
#endif
