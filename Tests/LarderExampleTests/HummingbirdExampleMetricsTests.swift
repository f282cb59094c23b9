#if Hummingbird && Metrics
import Foundation
import LarderTestSupport
import Testing

/// Runs the `LarderHummingbirdExample` app as a process, with a Python `http.server` as the
/// origin of its images, sends it real requests and checks its `/metrics` page against them.
@Suite(.timeLimit(.minutes(5)))
struct HummingbirdExampleMetricsTests {
    /// A 1×1 24-bit BMP (one red pixel).
    static var bmp: Data {
        var bytes: [UInt8] = Array("BM".utf8)
        func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        func u16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        u32(58); u32(0); u32(54)                      // file size, reserved, pixel offset
        u32(40); u32(1); u32(1); u16(1); u16(24)      // header size, width, height, planes, bits
        u32(0); u32(4); u32(2835); u32(2835); u32(0); u32(0)
        bytes += [0, 0, 255, 0]                       // one pixel (BGR) and its row padding
        return Data(bytes)
    }

    @Test func metricsPageCountsTheImagesServed() async throws {
        let folder = try TemporaryDirectory("hummingbird-example")
        let origin = folder.url.appendingPathComponent("origin")
        try FileManager.default.createDirectory(at: origin, withIntermediateDirectories: true)
        try Self.bmp.write(to: origin.appendingPathComponent("photo.bmp"))

        try await withChildProcesses { scope in
            // Given the origin, and the example app on a free port
            let server = try scope.start(
                try ExampleApp.executable("python3", inPath: true),
                arguments: ["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", origin.path])
            let serving = try #require(
                await server.waitForOutputLine(prefix: "Serving HTTP on 127.0.0.1 port ", timeout: .seconds(300)),
                "origin did not start: \(server.standardError)")
            let originPort = try #require(Int(serving.prefix { $0.isNumber }))
            let port = try ExampleApp.freePort()
            let app = try scope.start(
                try ExampleApp.executable("LarderHummingbirdExample", inPath: false),
                arguments: [],
                environment: [
                    "ORIGIN_URL": "http://127.0.0.1:\(originPort)",
                    "CACHE_DIRECTORY": folder.url.appendingPathComponent("cache").path,
                    "PORT": "\(port)",
                ])
            let base = "http://127.0.0.1:\(port)"
            // (polled: the app may take long to start on a loaded machine)
            let deadline = ContinuousClock.now + .seconds(300)
            while (try? await ExampleApp.get("\(base)/metrics")) == nil {
                try #require(app.isRunning && ContinuousClock.now < deadline, "app did not start: \(app.standardError)")
                try await Task.sleep(for: .milliseconds(100))
            }

            // When it serves the image three times: one fetch from the origin, then two hits
            for _ in 0..<3 {
                let (status, _) = try await ExampleApp.get("\(base)/images/photo.bmp")
                #expect(status == 200)
            }

            // Then its /metrics page counts exactly that
            let (status, page) = try await ExampleApp.get("\(base)/metrics")
            #expect(status == 200)
            let storage = ("storage", "images")
            #expect(ExampleApp.value(in: page, "larder_hits_total", [storage, ("tier", "memory")]) == 2)
            #expect(ExampleApp.value(in: page, "larder_writes_total", [storage, ("tier", "disk")]) == 1)
            #expect(ExampleApp.value(in: page, "larder_entries", [storage, ("tier", "disk")]) == 1)
            #expect(ExampleApp.value(in: page, "larder_bytes", [storage, ("tier", "disk")]) ?? 0 > 0)
        }
    }
}
#endif
