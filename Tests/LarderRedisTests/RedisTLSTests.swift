#if Redis
import Foundation
import Larder
@testable import LarderRedis
import NIOCore
import NIOPosix
import LarderTestSupport
import Testing

/// TLS through swift-nio-ssl against a real redis-server listening only on a `tls-port`, with
/// certificates `openssl` makes for each test: values and invalidations flow, `AUTH` works over
/// TLS, and a certificate the client must not trust is a clear error at connect.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisTLSTests {
    let certificates: TestCertificates

    init() throws {
        certificates = try TestCertificates.make()
    }

    func tls(trusting authority: String? = nil, withClientCertificate: Bool = true, serverName: String? = nil) -> RedisTLS {
        RedisTLS(
            trustRoots: .certificateFile(authority ?? certificates.authority),
            clientCertificateFile: withClientCertificate ? certificates.clientCertificate : nil,
            clientPrivateKeyFile: withClientCertificate ? certificates.clientKey : nil,
            serverName: serverName)
    }

    /// Expects ``RedisStore/connect(configuration:tierID:)`` with `tls` to fail with code
    /// `.tls`, its message naming `cause`.
    func expectRefusal(
        port: Int, _ tls: RedisTLS, tracking: Bool = false, naming cause: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await #expect(sourceLocation: sourceLocation) {
            _ = try await RedisStore.connect(configuration: .init(
                port: port, tls: tls, deadline: .seconds(300), isTrackingEnabled: tracking))
        } throws: { error in
            guard let error = error as? RedisError else { return false }
            return error.code == .tls && cause.map { error.message.contains($0) } != false
        }
    }

    // MARK: - Values and invalidations over TLS

    @Test func valuesAndInvalidationsFlowOverTLSWithAClientCertificate() async throws {
        try await withChildProcesses { scope in
            // Given a server that speaks only TLS and requires a client certificate (Redis's default)
            let server = try await RedisServer.start(in: scope, certificates: certificates)
            func storage() async throws -> (Storage<String, String>, RedisStore) {
                let store = try await RedisStore.connect(configuration: .init(
                    port: server.port, tls: tls(), namespace: "tls:", deadline: .seconds(300), localCopyMaxAge: .seconds(3_600)))
                return (try Storage(configuration: .init(), additionalTiers: [store], transformer: .string), store)
            }
            let (first, firstStore) = try await storage()
            let (second, secondStore) = try await storage()
            #expect(await eventually { firstStore.isTrackingLive && secondStore.isTrackingLive })

            // When one instance writes, the other reads it; when it overwrites, the other's local copy goes
            try await first.setValue("one", forKey: "k", expiry: .seconds(3_600))
            #expect(try await second.value(forKey: "k") == "one")
            try await first.setValue("two", forKey: "k", expiry: .seconds(3_600))
            #expect(await eventually { (try? await second.value(forKey: "k")) == "two" })

            // Then the server holds the value under the namespace (read with redis-cli over TLS)
            #expect(try server.cli("--scan", "--pattern", "tls:*").contains("tls:{"))
            #expect(secondStore.statistics.invalidationsReceived >= 1)
            #expect(secondStore.statistics.errors == 0)
            await firstStore.close()
            await secondStore.close()
        }
    }

    @Test func theServerNameSettingNamesTheCertificateToExpect() async throws {
        try await withChildProcesses { scope in
            // Given a server whose certificate names `redis.test` and no address
            let server = try await RedisServer.start(in: scope, certificates: certificates.showingNamedOnlyCertificate)
            // When the store expects that name, it connects to 127.0.0.1 and works
            let store = try await RedisStore.connect(configuration: .init(
                port: server.port, tls: tls(serverName: "redis.test"), deadline: .seconds(300), isTrackingEnabled: false))
            try await store.setValue(Data("v".utf8), forKey: "k", expiry: .seconds(60), metadata: nil, isCompressible: false)
            #expect(try await store.entry(forKey: "k")?.data == Data("v".utf8))
            await store.close()
        }
    }

    // MARK: - AUTH over TLS

    @Test func aclAuthWorksOverTLSAndAWrongPasswordIsRefused() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(
                in: scope, arguments: RedisAuthTests.arguments, password: "default-secret", certificates: certificates)
            let store = try await RedisStore.connect(configuration: .init(
                port: server.port, username: "alice", password: "wonderland", tls: tls(), deadline: .seconds(300)))
            try await store.setValue(Data("v".utf8), forKey: "k", expiry: .seconds(60), metadata: nil, isCompressible: false)
            #expect(try await store.entry(forKey: "k")?.data == Data("v".utf8))
            #expect(await eventually { store.isTrackingLive })
            await store.close()

            await #expect {
                _ = try await RedisStore.connect(configuration: .init(
                    port: server.port, username: "alice", password: "wrong", tls: tls(), deadline: .seconds(300)))
            } throws: { error in
                (error as? RedisError)?.code == .authentication && "\(error)".contains("WRONGPASS")
            }
        }
    }

    // MARK: - Certificates the client must refuse

    @Test func aServerCertificateFromAnotherAuthorityIsATLSErrorAtConnect() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, certificates: certificates)
            for tracking in [true, false] {
                await expectRefusal(
                    port: server.port, tls(trusting: certificates.otherAuthority), tracking: tracking, naming: "CERTIFICATE_VERIFY_FAILED")
            }
        }
    }

    @Test func aCommandWrittenAfterAFailedHandshakeClosedTheConnectionNamesTheTLSCause() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, certificates: certificates)
            let connection = try await RedisConnection.connect(
                host: "127.0.0.1", port: server.port, on: MultiThreadedEventLoopGroup.singleton.next(), timeout: .seconds(300), maxBulkLength: 1 << 20,
                tls: TLSClient(tls(trusting: certificates.otherAuthority), host: "127.0.0.1")
            ).get()
            // Given a handshake that failed before any command was written (the channel is closed)
            try await connection.channel.closeFuture.get()
            // Then a command written now fails with the handshake's error, not "I/O on closed channel"
            await #expect {
                _ = try await connection.send([[.string("PING")]], deadline: .now() + .seconds(300)).get()
            } throws: { error in
                (error as? RedisError)?.code == .tls && "\(error)".contains("CERTIFICATE_VERIFY_FAILED")
            }
        }
    }

    @Test func aLazyStoreThatTrustsAnotherAuthorityMissesAndSaysWhy() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, certificates: certificates)
            let store = try RedisStore(configuration: .init(
                port: server.port, tls: tls(trusting: certificates.otherAuthority), deadline: .seconds(300),
                isTrackingEnabled: false))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            // Through Storage a failure is a miss, counted; used directly, every error names the cause.
            #expect(try await storage.value(forKey: "k") == nil)
            #expect(store.statistics.errors >= 1)
            await #expect {
                _ = try await store.entry(forKey: "k")
            } throws: { error in
                ((error as? StorageError)?.cause as? RedisError)?.code == .tls && "\(error)".contains("CERTIFICATE_VERIFY_FAILED")
            }
            await store.close()
        }
    }

    @Test func aCertificateThatDoesNotNameTheServerIsATLSError() async throws {
        try await withChildProcesses { scope in
            // The certificate chains to the trusted CA but names `redis.test`, not 127.0.0.1
            // (the host) nor `cache.example.com`.
            let server = try await RedisServer.start(in: scope, certificates: certificates.showingNamedOnlyCertificate)
            for serverName in [nil, "cache.example.com"] {
                await expectRefusal(port: server.port, tls(serverName: serverName), naming: "failedToValidateHostname")
            }
        }
    }

    @Test func aServerThatRequiresAClientCertificateRefusesAStoreWithout() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope, certificates: certificates)
            await expectRefusal(port: server.port, tls(withClientCertificate: false))
        }
    }

    // MARK: - Settings checked when the store is made

    @Test func unreadableCertificatesAreAConfigurationError() throws {
        let missing = certificates.folder.url.appendingPathComponent("missing.pem").path
        for settings in [
            RedisTLS(trustRoots: .certificateFile(missing)),
            RedisTLS(trustRoots: .pem("not a certificate")),
            RedisTLS(trustRoots: .certificateFile(certificates.authority), clientCertificateFile: certificates.clientCertificate),
            RedisTLS(
                trustRoots: .certificateFile(certificates.authority), clientCertificateFile: certificates.clientCertificate,
                clientPrivateKeyFile: missing),
        ] {
            #expect {
                _ = try RedisStore(configuration: .init(tls: settings, isTrackingEnabled: false))
            } throws: { error in
                (error as? StorageError)?.code == .invalidConfiguration && (error as? StorageError)?.field == "tls"
            }
        }
    }
}
#endif
