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
                try ExampleApp.executable("python3", inPath: true),
                arguments: ["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", upstreamFolder.path])
            let serving = try #require(
                await upstream.waitForOutputLine(prefix: "Serving HTTP on 127.0.0.1 port ", timeout: .seconds(300)),
                "upstream did not start: \(upstream.standardError)")
            let upstreamPort = try #require(Int(serving.prefix { $0.isNumber }))
            let port = try ExampleApp.freePort()
            let app = try scope.start(
                try ExampleApp.executable("LarderVaporExample", inPath: false),
                arguments: ["serve", "--hostname", "127.0.0.1", "--port", "\(port)"],
                environment: [
                    "UPSTREAM_URL": "http://127.0.0.1:\(upstreamPort)/forecast.json",
                    "CACHE_DIRECTORY": folder.url.appendingPathComponent("cache").path,
                ])
            let base = "http://127.0.0.1:\(port)"
            // (polled: the app may take long to start on a loaded machine)
            let deadline = ContinuousClock.now + .seconds(300)
            while (try? await ExampleApp.get("\(base)/metrics")) == nil {
                try #require(app.isRunning && ContinuousClock.now < deadline, "app did not start: \(app.standardError)")
                try await Task.sleep(for: .milliseconds(100))
            }

            // When it serves /forecast five times: one miss that fetches upstream, four hits
            for _ in 0..<5 {
                let (status, body) = try await ExampleApp.get("\(base)/forecast")
                #expect(status == 200)
                #expect(body == #"{"temperature":21.5}"#)
            }

            // Then its /metrics page counts exactly that
            let (status, page) = try await ExampleApp.get("\(base)/metrics")
            #expect(status == 200)
            let storage = ("storage", "forecast")
            #expect(ExampleApp.value(in: page, "larder_hits_total", [storage, ("tier", "memory")]) == 4)
            #expect(ExampleApp.value(in: page, "larder_hits_total", [storage, ("tier", "disk")]) == 0)
            // (the adapter reads memory alone first, so the one miss reaches the disk once; the
            // storage-wide `larder_request_misses_total` counts both reads)
            #expect(ExampleApp.value(in: page, "larder_misses_total", [storage, ("tier", "disk")]) == 1)
            #expect(ExampleApp.value(in: page, "larder_request_misses_total", [storage]) ?? 0 >= 1)
            #expect(ExampleApp.value(in: page, "larder_request_writes_total", [storage]) == 1)
            #expect(ExampleApp.value(in: page, "larder_entries", [storage, ("tier", "disk")]) == 1)
        }
    }
}
#endif
