#if Memcached
import Foundation
import Testing

/// Says how many server suites were skipped on a machine without memcached; fails under CI.
@Suite(.timeLimit(.minutes(10)))
struct MemcachedAvailabilityTests {
    @Test func memcachedIsPresentOrItsSuitesAreReportedSkipped() {
        if MemcachedServer.binary == nil {
            #expect(!MemcachedServer.isCI, "CI=true: the memcached binary is required (apt-get install -y memcached)")
            print("memcached not found: skipped \(MemcachedServer.serverSuites.count) suites: \(MemcachedServer.serverSuites.joined(separator: ", "))")
        } else {
            #expect(MemcachedServer.shouldRun)
        }
    }

    /// The servers' ports come from below the ephemeral range (no outgoing connection can hold
    /// one), each once per process, and each free to bind when handed out.
    @Test func serverPortsComeFromBelowTheEphemeralRangeOncePerProcess() throws {
        let range = try #require(MemcachedServer.ephemeralPortRange())
        var seen = Set<Int>()
        for _ in 0..<50 {
            let port = try MemcachedServer.freePort()
            #expect(port >= 10_000 && port < range.lowerBound, "port \(port) is not below \(range.lowerBound)")
            #expect(seen.insert(port).inserted, "port \(port) handed out twice")
        }
    }
}
#endif
