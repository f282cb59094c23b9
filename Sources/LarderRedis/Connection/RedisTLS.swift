#if Redis
import Larder
import NIOCore
import NIOSSL

/// TLS settings of a ``RedisStore``: whom to trust, which certificate to show, and the name
/// the server's certificate must carry.
///
/// Every connection of the store (the pipelined ones and the tracking connection) then speaks
/// TLS 1.2 or later through swift-nio-ssl and verifies the server's certificate chain and name.
/// Point ``RedisStore/Configuration/port`` at the server's `tls-port`.
///
/// ```swift
/// let remote = try await RedisStore.connect(configuration: .init(
///     host: "cache.internal", port: 6380, username: "app", password: secret,
///     tls: .init(trustRoots: .certificateFile("/etc/ssl/redis-ca.pem"),
///                clientCertificateFile: "/etc/ssl/app.pem", clientPrivateKeyFile: "/etc/ssl/app.key")))
/// ```
///
/// A certificate the trust roots do not vouch for, or one that does not name the server, is a
/// ``RedisError`` with code ``RedisError/Code/tls`` from ``RedisStore/connect(configuration:tierID:)``
/// (and a miss, counted as an error, through ``Larder/Storage``). Files that cannot be read are a
/// ``Larder/StorageError`` with code `.invalidConfiguration` when the store is created.
public struct RedisTLS: Sendable, Hashable {
    /// The certificate authorities a server's certificate must chain to; an open set.
    public struct TrustRoots: Sendable, Hashable {
        enum Source: Hashable {
            case system
            case file(String)
            case pem(String)
        }

        let source: Source

        /// The operating system's trust store.
        public static var system: TrustRoots { TrustRoots(source: .system) }

        /// The PEM certificates in the file at `path` (a private CA, as Redis's `tls-ca-cert-file`).
        public static func certificateFile(_ path: String) -> TrustRoots { TrustRoots(source: .file(path)) }

        /// The PEM certificates in `pem`.
        public static func pem(_ pem: String) -> TrustRoots { TrustRoots(source: .pem(pem)) }
    }

    /// The authorities the server's certificate must chain to. Defaults to ``TrustRoots/system``.
    public var trustRoots: TrustRoots
    /// A PEM file with the client's certificate chain, for servers that require one
    /// (`tls-auth-clients yes`, Redis's default); `nil` shows none. Defaults to `nil`.
    public var clientCertificateFile: String?
    /// A PEM file with the client certificate's private key; set with
    /// ``clientCertificateFile``. Defaults to `nil`.
    public var clientPrivateKeyFile: String?
    /// The name the server's certificate must carry (or else the address connected to), also
    /// sent as SNI; `nil` uses the configuration's host (an IP address is then matched against
    /// the certificate's IP entries and no SNI is sent). Defaults to `nil`.
    public var serverName: String?

    /// TLS settings with a default for every setting.
    public init(
        trustRoots: TrustRoots = .system, clientCertificateFile: String? = nil, clientPrivateKeyFile: String? = nil,
        serverName: String? = nil
    ) {
        self.trustRoots = trustRoots
        self.clientCertificateFile = clientCertificateFile
        self.clientPrivateKeyFile = clientPrivateKeyFile
        self.serverName = serverName
    }
}

/// A ``RedisTLS`` made ready for connections: one `NIOSSLContext` (certificates and keys read
/// once) and the name each handshake verifies.
struct TLSClient: Sendable {
    let context: NIOSSLContext
    /// The SNI and verified name; `nil` verifies the peer's IP address.
    let serverHostname: String?

    /// - Throws: ``Larder/StorageError`` with code `.invalidConfiguration` for a file that
    ///   cannot be read or parsed, or a certificate without its key.
    init(_ settings: RedisTLS, host: String) throws {
        guard (settings.clientCertificateFile == nil) == (settings.clientPrivateKeyFile == nil) else {
            throw StorageError.invalidConfiguration(
                field: "tls", value: settings.clientCertificateFile ?? settings.clientPrivateKeyFile ?? "",
                reason: "a client certificate needs its private key, and a key its certificate")
        }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateVerification = .fullVerification
        do {
            switch settings.trustRoots.source {
            case .system:
                configuration.trustRoots = .default
            case .file(let path):
                configuration.trustRoots = .certificates(try Self.nonEmpty(NIOSSLCertificate.fromPEMFile(path)))
            case .pem(let pem):
                configuration.trustRoots = .certificates(try Self.nonEmpty(NIOSSLCertificate.fromPEMBytes(Array(pem.utf8))))
            }
            if let certificate = settings.clientCertificateFile, let key = settings.clientPrivateKeyFile {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            }
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw StorageError.invalidConfiguration(
                field: "tls", value: "\(settings.trustRoots.source), \(settings.clientCertificateFile ?? "no client certificate")",
                reason: "cannot load the certificates or key: \(error)")
        }
        let name = settings.serverName ?? host
        // SNI never carries an address; an address is verified against the certificate's IP entries.
        serverHostname = Self.isAddress(name) ? nil : name
    }

    /// Adds the TLS handler in front of `channel`'s pipeline (called in its initializer).
    func addHandler(to channel: any Channel) throws {
        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: serverHostname))
    }

    private static func nonEmpty(_ certificates: [NIOSSLCertificate]) throws -> [NIOSSLCertificate] {
        guard !certificates.isEmpty else { throw RedisError(.tls, "no PEM certificate in the trust roots") }
        return certificates
    }

    static func isAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}

extension RedisError {
    /// `error` as a ``RedisError``: a failed TLS handshake or TLS record is ``Code/tls``,
    /// anything else not already a `RedisError` is ``Code/connection``.
    init(wrapping error: any Error, context: String? = nil) {
        if let error = error as? RedisError {
            self = error
        } else if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            self.init(.tls, "\(context.map { "\($0): " } ?? "")TLS failed: \(error)")
        } else {
            self.init(.connection, "\(context.map { "\($0): " } ?? "")\(error)")
        }
    }
}
#endif
