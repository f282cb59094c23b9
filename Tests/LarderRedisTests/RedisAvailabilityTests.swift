#if Redis
import Foundation
import Testing

/// Says how many server suites were skipped on a machine without redis-server; fails under CI.
@Suite(.timeLimit(.minutes(10)))
struct RedisAvailabilityTests {
    @Test func redisIsPresentOrItsSuitesAreReportedSkipped() {
        if RedisServer.binary == nil || RedisServer.cliBinary == nil {
            #expect(!RedisServer.isCI, "CI=true: redis-server and redis-cli are required (apt-get install -y redis-server)")
            print("redis-server not found: skipped \(RedisServer.serverSuites.count) suites: \(RedisServer.serverSuites.joined(separator: ", "))")
        } else {
            #expect(RedisServer.shouldRun)
        }
    }
}
#endif
