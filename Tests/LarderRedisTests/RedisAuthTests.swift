#if Redis
import Foundation
import Larder
@testable import LarderRedis
import LarderTestSupport
import Testing

/// ACL `AUTH` through `HELLO 3 AUTH`: a wrong password is a clear error at startup.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisAuthTests {
    static let arguments = ["--requirepass", "default-secret", "--user", "alice", "on", ">wonderland", "~*", "&*", "+@all"]

    @Test func theRightUserAndPasswordWorkWithTracking() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, arguments: Self.arguments, password: "default-secret")
            let store = try await RedisStore.connect(configuration: .init(
                port: server.port, username: "alice", password: "wonderland", deadline: .seconds(300)))
            try await store.setValue(Data("v".utf8), forKey: "k", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try await store.entry(forKey: "k")?.data == Data("v".utf8))
            #expect(await eventually { store.isTrackingLive })
            // The default user's password (no username) works too.
            let other = try await RedisStore.connect(configuration: .init(
                port: server.port, password: "default-secret", deadline: .seconds(300), isTrackingEnabled: false))
            #expect(try await other.entry(forKey: "k")?.data == Data("v".utf8))
            await store.close()
            await other.close()
        }
    }

    @Test(arguments: [("alice", "wrong"), ("mallory", "wonderland"), (nil, "wrong")] as [(String?, String)])
    func aWrongPasswordIsAnAuthenticationErrorAtStartup(username: String?, password: String) async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, arguments: Self.arguments, password: "default-secret")
            await #expect {
                _ = try await RedisStore.connect(configuration: .init(
                    port: server.port, username: username, password: password, deadline: .seconds(300)))
            } throws: { error in
                guard let error = error as? RedisError else { return false }
                return error.code == .authentication && error.message.contains("WRONGPASS")
            }
        }
    }

    @Test func noPasswordAtAllIsAnAuthenticationError() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, arguments: Self.arguments, password: "default-secret")
            await #expect {
                _ = try await RedisStore.connect(configuration: .init(port: server.port, deadline: .seconds(300), isTrackingEnabled: false))
            } throws: { error in
                (error as? RedisError)?.code == .authentication
            }
        }
    }

    @Test func aLazyStoreWithAWrongPasswordMissesAndSaysWhy() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, arguments: Self.arguments, password: "default-secret")
            let store = try RedisStore(configuration: .init(
                port: server.port, username: "alice", password: "wrong", deadline: .seconds(300), isTrackingEnabled: false))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            #expect(try await storage.value(forKey: "k") == nil)
            #expect(store.statistics.errors >= 1)
            await #expect {
                _ = try await store.entry(forKey: "k")
            } throws: { error in
                "\(error)".contains("WRONGPASS")
            }
            await store.close()
        }
    }
}
#endif
