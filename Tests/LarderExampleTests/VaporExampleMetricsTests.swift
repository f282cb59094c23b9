#if Vapor && Metrics
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LarderTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Runs the `LarderVaporExample` app as a process, with a Python `http.server` as its upstream,
/// sends it real requests and checks its `/metrics` page against them.
@Suite(.timeLimit(.minutes(5)))
struct VaporExampleMetricsTests {
    @Test func metricsPageCountsTheRequestsSent() async throws {
        let folder = try TemporaryDirectory("vapor-example")
        let upstreamFolder = folder.url.appendingPathComponent("upstream")
        try FileManager.default.createDirectory(at: upstreamFolder, withIntermediateDirectories: true)
        try Data(#"{"temperature":21.5}"#.utf8).write(to: upstreamFolder.appendingPathComponent("forecast.json"))

        try await withChildProcesses { scope in
            // Given the upstream, and the example app on a free port
            let upstream = try scope.start(
                try Self.executable("python3", inPath: true),
                arguments: ["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", upstreamFolder.path])
            let serving = try #require(
                await upstream.waitForOutputLine(prefix: "Serving HTTP on 127.0.0.1 port ", timeout: .seconds(60)),
                "upstream did not start: \(upstream.standardError)")
            let upstreamPort = try #require(Int(serving.prefix { $0.isNumber }))
            let port = try Self.freePort()
            let app = try scope.start(
                try Self.executable("LarderVaporExample", inPath: false),
                arguments: ["serve", "--hostname", "127.0.0.1", "--port", "\(port)"],
                environment: [
                    "UPSTREAM_URL": "http://127.0.0.1:\(upstreamPort)/forecast.json",
                    "CACHE_DIRECTORY": folder.url.appendingPathComponent("cache").path,
                ])
            let base = "http://127.0.0.1:\(port)"
            // (polled: the app may take long to start on a loaded machine)
            let deadline = ContinuousClock.now + .seconds(60)
            while (try? await Self.get("\(base)/metrics")) == nil {
                try #require(app.isRunning && ContinuousClock.now < deadline, "app did not start: \(app.standardError)")
                try await Task.sleep(for: .milliseconds(100))
            }

            // When it serves /forecast five times: one miss that fetches upstream, four hits
            for _ in 0..<5 {
                let (status, body) = try await Self.get("\(base)/forecast")
                #expect(status == 200)
                #expect(body == #"{"temperature":21.5}"#)
            }

            // Then its /metrics page counts exactly that
            let (status, page) = try await Self.get("\(base)/metrics")
            #expect(status == 200)
            let storage = ("storage", "forecast")
            #expect(Self.value(in: page, "larder_hits_total", [storage, ("tier", "memory")]) == 4)
            #expect(Self.value(in: page, "larder_hits_total", [storage, ("tier", "disk")]) == 0)
            // (the adapter reads memory alone first, so the one miss reaches the disk once; the
            // storage-wide `larder_request_misses_total` counts both reads)
            #expect(Self.value(in: page, "larder_misses_total", [storage, ("tier", "disk")]) == 1)
            #expect(Self.value(in: page, "larder_request_misses_total", [storage]) ?? 0 >= 1)
            #expect(Self.value(in: page, "larder_request_writes_total", [storage]) == 1)
            #expect(Self.value(in: page, "larder_entries", [storage, ("tier", "disk")]) == 1)
        }
    }

    /// The value of the sample of `name` whose labels include every one of `labels`.
    static func value(in page: String, _ name: String, _ labels: [(String, String)]) -> Double? {
        for line in page.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            guard labels.allSatisfy({ line.contains("\($0.0)=\"\($0.1)\"") }),
                  let number = line.split(separator: " ").last else { continue }
            return Double(number)
        }
        return nil
    }

    /// Status and body of a GET.
    static func get(_ url: String) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 60
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    /// A loopback port nothing listens on now (the kernel's pick for port 0).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// `name` found on `PATH`, or built by SwiftPM next to the test binary.
    static func executable(_ name: String, inPath: Bool) throws -> URL {
        if inPath {
            for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
                let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            }
        } else {
            let binary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
            var directory = binary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: name])
    }
}
#endif
