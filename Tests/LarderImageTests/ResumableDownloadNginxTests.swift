import Foundation
import LarderTestSupport
import Larder
@testable import LarderImage

import Testing

/// Resumption against nginx (``NginxServer``): its own ranges, `If-Range` and validators.
/// nginx sends a download without a range slowly after its first 64 KiB; the test cuts it
/// part way by cancelling the load, as an app does when an image scrolls out of view.
@Suite(.timeLimit(.minutes(10)), .enabled(if: NginxServer.shouldRun, "nginx is not installed"))
struct ResumableDownloadNginxTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory("resumable-nginx")
    }

    func makeFetcher() -> HTTPImageFetcher {
        HTTPImageFetcher {
            $0.timeout = .seconds(300)
            $0.maximumAttempts = 1
            $0.hostFailureThreshold = 0
        }
    }

    func makeCache() throws -> ImageCache {
        try ImageCache(fetcher: makeFetcher()) {
            $0.directory = directory.url.appendingPathComponent("cache")
            $0.disk.logHandler = nil
        }
    }

    /// Starts `load` with a progress closure; returns its task once 60,000 bytes have arrived
    /// (or the load has ended).
    func startPartWay(
        _ load: @escaping @Sendable (_ progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws -> Void
    ) async -> Task<Void, any Error> {
        let (arrived, signal) = AsyncStream.makeStream(of: Void.self)
        let task = Task {
            // A load that ends before the bytes arrive ends the wait too (and fails the test).
            defer { signal.finish() }
            try await load { received, _ in
                if received >= 60_000 { signal.yield() }
            }
        }
        for await _ in arrived { break }
        return task
    }

    /// Runs `load` with a progress closure and cancels it once 60,000 bytes have arrived.
    func cancelPartWay(
        _ load: @escaping @Sendable (_ progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws -> Void
    ) async {
        let task = await startPartWay(load)
        task.cancel()
        await #expect(throws: (any Error).self) { try await task.value }
    }

    /// The kept download in `file` once it is there (a cancelled cache load returns before its
    /// download task has finished writing it).
    func keptDownload(in file: URL, for url: URL) async throws -> PartialDownload {
        let end = ContinuousClock.now + .seconds(300)
        while ContinuousClock.now < end {
            if let kept = PartialDownload.read(from: file, url: url.absoluteString) { return kept }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("no bytes were kept in \(file.path) within 300 s")
    }

    @Test(arguments: [true, false])
    func aCancelledDownloadFromNginxResumesAfterARelaunchAndNoByteIsSentTwice(entityTags: Bool) async throws {
        try await withChildProcesses { scope in
            // Given nginx serving a 200 KB PNG with a strong ETag and a Last-Modified date (or
            // the date alone), and a cache whose load of it is cancelled part way
            let image = try ResumableDownloadTests.largePNG(seed: 5)
            let nginx = try await NginxServer.start(
                in: scope, serving: ["big.png": image], entityTags: entityTags, in: directory.url)
            let key = ImageKey(nginx.url("big.png"))
            let file = try #require(try makeCache().partialDownloadFile(for: key))
            do {
                let cache = try makeCache()
                await cancelPartWay { progress in _ = try await cache.image(for: key, progress: progress) }
            }
            // Then the bytes that arrived are kept in the disk tier's directory
            let kept = try await keptDownload(in: file, for: nginx.url("big.png"))
            let count = kept.data.count
            #expect(count >= 60_000 && count < image.count)
            #expect(kept.data == image.prefix(count))

            // When a new cache on the same directory (a relaunch) loads the image
            let result = try await makeCache().image(for: key)
            // Then nginx continued with a 206 for the rest, and no byte that arrived was sent again
            #expect(result.source == .network && result.data == image)
            // (nginx logs the cancelled response when it next writes to it: maybe after the 206)
            let logged = try await nginx.responses("big.png", count: 2)
            try #require(logged.count == 2, "\(logged)")
            let whole = try #require(logged.first { $0.range == nil }, "\(logged)")
            let rest = try #require(logged.first { $0.range != nil }, "\(logged)")
            #expect(whole.status == 200 && whole.bodyBytes >= count)
            #expect(rest.status == 206 && rest.range == "bytes=\(count)-")
            #expect(rest.ifRange == (entityTags ? kept.header.entityTag : kept.header.lastModified))
            #expect(rest.bodyBytes == image.count - count)
            // And the kept bytes are gone, the image is cached whole
            #expect(!FileManager.default.fileExists(atPath: file.path))
            #expect(try await makeCache().cachedImage(for: key)?.data == image)
        }
    }

    @Test
    func aFileChangedOnNginxAfterACancelledDownloadIsSentWholeAgain() async throws {
        try await withChildProcesses { scope in
            // Given a download from nginx cancelled part way, after which the file changes
            let first = try ResumableDownloadTests.largePNG(seed: 6)
            let second = try ResumableDownloadTests.largePNG(seed: 7) + Data([0])
            let nginx = try await NginxServer.start(
                in: scope, serving: ["c.png": first], entityTags: true, in: directory.url)
            let url = nginx.url("c.png")
            let file = directory.url.appendingPathComponent("partial")
            let fetcher = makeFetcher()
            await cancelPartWay { progress in _ = try await fetcher.fetch(url, partialDownloadFile: file, progress: progress) }
            let kept = try #require(PartialDownload.read(from: file, url: url.absoluteString))
            // (another size and modification time: another ETag and Last-Modified)
            let changed = nginx.root.appendingPathComponent("c.png")
            try second.write(to: changed)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: changed.path)

            // When it is fetched again
            let fetched = try await fetcher.fetch(url, partialDownloadFile: file)
            // Then nginx's If-Range did not match: the whole new file came, nothing of the old one
            #expect(fetched.data == second && fetched.statusCode == 200)
            let logged = try await nginx.responses("c.png", count: 2)
            try #require(logged.count == 2, "\(logged)")
            let again = try #require(logged.first { $0.range != nil }, "\(logged)")
            #expect(again.range == "bytes=\(kept.data.count)-" && again.ifRange == kept.header.entityTag)
            #expect(again.status == 200 && again.bodyBytes == second.count)
            #expect(!FileManager.default.fileExists(atPath: file.path))
        }
    }

    @Test
    func aDownloadThatNginxCutsOffPartWayResumesWithTheRest() async throws {
        try await withChildProcesses { scope in
            // Given nginx serving a 200 KB PNG, and a fetch of it under way
            let image = try ResumableDownloadTests.largePNG(seed: 8)
            let nginx = try await NginxServer.start(
                in: scope, serving: ["cut.png": image], entityTags: true, in: directory.url)
            let served = nginx.root.appendingPathComponent("cut.png")
            let modified = try #require(
                try FileManager.default.attributesOfItem(atPath: served.path)[.modificationDate] as? Date)
            let url = nginx.url("cut.png")
            let file = directory.url.appendingPathComponent("partial")
            let fetcher = makeFetcher()
            let first = await startPartWay { progress in
                _ = try await fetcher.fetch(url, partialDownloadFile: file, progress: progress)
            }
            // When the file shrinks while nginx sends it, so that nginx cuts the connection
            let handle = try FileHandle(forWritingTo: served)
            try handle.truncate(atOffset: 1_000)
            try handle.close()
            let error = await #expect(throws: ImageFetchError.self) { try await first.value }
            guard case .truncated? = error else { Issue.record("expected truncated, got \(String(describing: error))"); return }
            let kept = try #require(PartialDownload.read(from: file, url: url.absoluteString))
            let count = kept.data.count
            #expect(kept.data == image.prefix(count))
            // And the file is put back as it was (its size and modification time: its ETag)
            try image.write(to: served)
            try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: served.path)
            let fetched = try await fetcher.fetch(url, partialDownloadFile: file)

            // Then the next fetch asked for the rest and nginx sent only the rest
            #expect(fetched.data == image && fetched.statusCode == 200)
            let logged = try await nginx.responses("cut.png", count: 2)
            try #require(logged.count == 2, "\(logged)")
            let rest = try #require(logged.first { $0.range != nil }, "\(logged)")
            #expect(rest.status == 206 && rest.range == "bytes=\(count)-" && rest.ifRange == kept.header.entityTag)
            #expect(rest.bodyBytes == image.count - count)
            #expect(!FileManager.default.fileExists(atPath: file.path))
        }
    }
}
