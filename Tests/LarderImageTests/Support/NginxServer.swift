import Foundation
import LarderTestSupport
import Testing

/// A real nginx serving files on a free loopback port, started by a test in its child-process
/// scope (killed and reaped when the scope ends) and stopped by its PID.
///
/// One process (`daemon off`, `master_process off`) with its own configuration, logs and
/// temporary directories inside the test's directory. nginx answers ranges and `If-Range` on
/// its own (a strong `ETag` made of the file's modification time and size, and a
/// `Last-Modified` date; with `entityTags: false` the date alone). A request without `Range` is
/// sent its first 64 KiB at full speed and the rest at 1 KiB/s (over two minutes for a 200 KB
/// image), so a test can cut it part way even when its task stalls; a range request is sent at
/// full speed. nginx reads at most 4 KiB ahead of what it sent, so a file that shrinks under it
/// makes it cut the connection within seconds. The access log records each response's path,
/// status, `Range`, `If-Range` and body bytes sent.
///
/// Without the `nginx` binary the suites that need one are disabled; with `CI=true` a missing
/// binary fails (`.ci/run` installs nginx).
struct NginxServer: Sendable {
    static let binary: String? = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static var shouldRun: Bool { binary != nil || ProcessInfo.processInfo.environment["CI"] == "true" }

    /// The directory nginx serves.
    let root: URL
    let port: UInt16
    let process: ChildProcess
    private let accessLog: URL

    /// One response, as the access log records it.
    struct LoggedResponse: Equatable, CustomStringConvertible {
        var path: String
        var status: Int
        /// The request's `Range` and `If-Range` header fields (`nil` when absent).
        var range: String?
        var ifRange: String?
        var bodyBytes: Int

        var description: String { "\(path) \(status) range=\(range ?? "-") if-range=\(ifRange ?? "-") \(bodyBytes) bytes" }
    }

    /// Starts nginx in `scope`, serving `files` from `directory`, and waits until it listens.
    static func start(
        in scope: ChildProcessScope, serving files: [String: Data], entityTags: Bool, in directory: URL
    ) async throws -> NginxServer {
        guard let binary else {
            Issue.record("nginx is not installed (CI=true requires it): apt-get install -y nginx")
            throw CancellationError()
        }
        let root = directory.appendingPathComponent("served", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        for (name, data) in files { try data.write(to: root.appendingPathComponent(name)) }
        var attempt = 1
        while true {
            // A port the system just gave out and let go; another socket may take it before
            // nginx binds it, and then nginx exits and the next attempt takes another.
            let reserved = try ReservedPort()
            let port = reserved.port
            reserved.release()
            let prefix = directory.appendingPathComponent("nginx-\(attempt)", isDirectory: true)
            try FileManager.default.createDirectory(
                at: prefix.appendingPathComponent("temp", isDirectory: true), withIntermediateDirectories: true)
            let configuration = prefix.appendingPathComponent("nginx.conf")
            try Self.configuration(prefix: prefix, root: root, port: port, entityTags: entityTags)
                .write(to: configuration, atomically: true, encoding: .utf8)
            let process = try scope.start(URL(fileURLWithPath: binary), arguments: [
                "-p", prefix.path, "-e", prefix.appendingPathComponent("error.log").path, "-c", configuration.path,
            ])
            let server = NginxServer(
                root: root, port: port, process: process, accessLog: prefix.appendingPathComponent("access.log"))
            if try await server.waitUntilListening(pidFile: prefix.appendingPathComponent("nginx.pid")) { return server }
            let errors = (try? String(contentsOf: prefix.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
            guard attempt < 3, errors.contains("in use") else { throw TestFailure("nginx did not start: \(errors)") }
            attempt += 1
        }
    }

    private static func configuration(prefix: URL, root: URL, port: UInt16, entityTags: Bool) -> String {
        let temp = prefix.appendingPathComponent("temp").path
        return """
            daemon off;
            master_process off;
            worker_processes 1;
            pid "\(prefix.appendingPathComponent("nginx.pid").path)";
            events { worker_connections 64; }
            http {
                log_format sent escape=none '$uri|$status|$http_range|$http_if_range|$body_bytes_sent';
                access_log "\(prefix.appendingPathComponent("access.log").path)" sent;
                client_body_temp_path "\(temp)/body";
                proxy_temp_path "\(temp)/proxy";
                fastcgi_temp_path "\(temp)/fastcgi";
                uwsgi_temp_path "\(temp)/uwsgi";
                scgi_temp_path "\(temp)/scgi";
                types { image/png png; }
                map $http_range $whole_rate { "" 1k; default 0; }
                server {
                    listen 127.0.0.1:\(port);
                    root "\(root.path)";
                    etag \(entityTags ? "on" : "off");
                    limit_rate_after 64k;
                    limit_rate $whole_rate;
                    # Reads of at most 4 KiB ahead of what is sent: a file that shrinks is noticed soon.
                    output_buffers 1 4k;
                }
            }

            """
    }

    /// Waits until nginx has written its pid file, which it does once its socket is bound and
    /// listening; `false` when it exited instead (its port was taken).
    private func waitUntilListening(pidFile: URL) async throws -> Bool {
        // Generous: on a loaded machine this task may not be resumed for a minute or more.
        let end = ContinuousClock.now + .seconds(300)
        while ContinuousClock.now < end {
            if let text = try? String(contentsOf: pidFile, encoding: .utf8),
               Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) == process.processIdentifier {
                return true
            }
            if !process.isRunning { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("nginx did not start listening on port \(port) within 300 s")
    }

    func url(_ name: String) -> URL { URL(string: "http://127.0.0.1:\(port)/\(name)")! }

    /// The responses for `name` logged so far, in order.
    func responses(_ name: String) -> [LoggedResponse] {
        let text = (try? String(contentsOf: accessLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 5, fields[0] == "/\(name)", let status = Int(fields[1]), let bytes = Int(fields[4])
            else { return nil }
            // An absent header field logs as "" (`escape=none`) or "-".
            let range = ["", "-"].contains(fields[2]) ? nil : fields[2]
            let ifRange = ["", "-"].contains(fields[3]) ? nil : fields[3]
            return LoggedResponse(path: fields[0], status: status, range: range, ifRange: ifRange, bodyBytes: bytes)
        }
    }

    /// The responses for `name` once at least `count` are logged (nginx logs a response whose
    /// client went away when it next tries to write to it).
    func responses(_ name: String, count: Int) async throws -> [LoggedResponse] {
        let end = ContinuousClock.now + .seconds(300)
        while ContinuousClock.now < end {
            let logged = responses(name)
            if logged.count >= count { return logged }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("nginx logged \(responses(name)) for /\(name) within 300 s, not \(count) responses")
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
