#if Redis
import Foundation
import LarderTestSupport

/// A private CA, a server certificate it signed for `localhost` and `127.0.0.1`, a client
/// certificate it signed, an unrelated second CA, and a server certificate the CA signed for
/// `redis.test` only: PEM files the `openssl` command makes in a temporary folder (deleted with
/// this value).
struct TestCertificates: Sendable {
    let folder: TemporaryDirectory
    /// The CA that signed the server's and the client's certificates.
    let authority: String
    /// The certificate the server shows.
    var serverCertificate: String
    var serverKey: String
    let clientCertificate: String
    let clientKey: String
    /// A CA that signed nothing here: trusting only it must refuse the server.
    let otherAuthority: String
    /// Signed by ``authority`` for the name `redis.test` alone (no IP address).
    let namedOnlyCertificate: String
    let namedOnlyKey: String

    /// The same files, the server showing the certificate for `redis.test` alone.
    var showingNamedOnlyCertificate: TestCertificates {
        var certificates = self
        certificates.serverCertificate = namedOnlyCertificate
        certificates.serverKey = namedOnlyKey
        return certificates
    }

    static let openssl: String? = ["/usr/bin/openssl", "/usr/local/bin/openssl"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Makes the files (P-256 keys: quick to generate on a loaded machine).
    static func make() throws -> TestCertificates {
        let folder = try TemporaryDirectory("redis-tls")
        func path(_ name: String) -> String { folder.url.appendingPathComponent(name).path }
        func newKey() -> [String] { ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"] }
        for name in ["ca", "other-ca"] {
            try run(["req", "-x509"] + newKey() + [
                "-keyout", path("\(name).key"), "-out", path("\(name).pem"), "-days", "2", "-subj", "/CN=Larder test \(name)",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        }
        for (name, names) in [
            ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"), ("client", "subjectAltName=DNS:larder-client"),
            ("named-only", "subjectAltName=DNS:redis.test"),
        ] {
            try run(["req"] + newKey() + ["-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=\(name)"])
            try Data((names + "\n").utf8).write(to: URL(fileURLWithPath: path("\(name).ext")))
            try run([
                "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-out", path("\(name).pem"), "-days", "2", "-extfile", path("\(name).ext"),
            ])
        }
        return TestCertificates(
            folder: folder, authority: path("ca.pem"), serverCertificate: path("server.pem"), serverKey: path("server.key"),
            clientCertificate: path("client.pem"), clientKey: path("client.key"), otherAuthority: path("other-ca.pem"),
            namedOnlyCertificate: path("named-only.pem"), namedOnlyKey: path("named-only.key"))
    }

    private static func run(_ arguments: [String]) throws {
        guard let openssl else { throw TestFailure("the openssl command is not installed (apt-get install -y openssl)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = arguments
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestFailure("openssl \(arguments.prefix(2).joined(separator: " ")) failed: \(String(decoding: message, as: UTF8.self))")
        }
    }
}
#endif
