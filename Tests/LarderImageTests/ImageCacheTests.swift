import Foundation
import LarderTestSupport
import Larder
@testable import LarderImage

import Testing

@Suite(.timeLimit(.minutes(10)))
struct ImageCacheTests {
    let folder: TemporaryDirectory
    let png: Data
    let gif: Data
    let animatedGIF: Data
    let svg: Data

    init() throws {
        folder = try TemporaryDirectory("image-cache")
        func fixture(_ name: String) throws -> Data { try Fixture.all.first { $0.name == name }!.data }
        png = try fixture("image.png")
        gif = try fixture("image.gif")
        animatedGIF = try fixture("animated.gif")
        svg = try fixture("image.svg")
    }

    var directory: URL { folder.url.appendingPathComponent("images") }

    func makeCache(
        disk: Bool = true, fetcher: HTTPImageFetcher? = nil,
        _ configure: (inout ImageCache.Configuration) -> Void = { _ in }
    ) throws -> ImageCache {
        var configuration = ImageCache.Configuration()
        configuration.directory = disk ? directory : nil
        configuration.disk.logHandler = nil
        configure(&configuration)
        return try ImageCache(configuration: configuration, fetcher: fetcher)
    }

    static func key(_ name: String, size: Int? = nil, processors: [String] = []) -> ImageKey {
        ImageKey("https://img.example.com/\(name)", targetSize: size.map { .init(width: $0, height: $0) },
                 processors: processors)
    }

    /// Polls until `condition` holds (every millisecond, so the poll never hogs a shared core);
    /// the suite's time limit ends a wait that never succeeds. Used for internal states no
    /// continuation reports, such as how many callers joined a load.
    func eventually(_ condition: () -> Bool) async {
        while !condition() { try? await Task.sleep(for: .milliseconds(1)) }
    }

    // MARK: - Lookup order

    @Test func answersFromMemoryThenDiskThenFetchAndSaysWhich() async throws {
        // Given a disk-backed cache holding A, and a fetch that counts its calls
        let cache = try makeCache()
        let a = Self.key("a.png"), b = Self.key("b.png")
        try await cache.storeImage(png, for: a)
        let fetches = AsyncCounter()
        let png = self.png
        let fetch: @Sendable (ImageKey) async throws -> Data = { _ in fetches.increment(); return png }

        // When A is read, dropped from memory, read twice more, and B is read twice
        let first = try await cache.image(for: a, fetch: fetch)
        try await cache.storage.removeValue(forKey: a, tiers: .memory)
        let second = try await cache.image(for: a, fetch: fetch)
        let third = try await cache.image(for: a, fetch: fetch)
        let fetched = try await cache.image(for: b, fetch: fetch)
        let again = try await cache.image(for: b, fetch: fetch)

        // Then memory answers first, disk after a memory miss (promoting), the fetch last, once
        #expect(first.source == .memory)
        #expect(second.source == .disk)
        #expect(third.source == .memory)
        #expect(fetched.source == .network)
        #expect(again.source == .memory)
        #expect(fetches.value == 1)
        #expect([first, second, third, fetched].allSatisfy { $0.data == png })
    }

    @Test func reopeningADiskBackedCacheReturnsImagesWithTheirMetadata() async throws {
        // Given an animated GIF fetched with validators into a disk-backed cache
        let key = Self.key("anim.gif")
        let animatedGIF = self.animatedGIF
        do {
            let cache = try makeCache()
            _ = try await cache.image(for: key) { key in
                FetchedImage(data: animatedGIF, format: .gif, url: URL(string: key.source)!,
                             entityTag: "\"v7\"", lastModified: "Sat, 21 Nov 2026 10:00:00 GMT")
            }
        }
        // When a new cache opens the same directory
        let reopened = try makeCache()
        let result = try await reopened.image(for: key) { _ in
            Issue.record("a reopened cache must not fetch what its disk holds")
            return Data()
        }
        // Then the disk answers with the bytes and every piece of metadata, the default
        // lifetime (1 day: the response said nothing) included
        #expect(result.source == .disk)
        #expect(result.data == animatedGIF)
        let freshUntil = try #require(result.metadata.freshUntil)
        #expect(abs(freshUntil.timeIntervalSinceNow - 86_400) < 60)
        var expected = ImageMetadata(
            format: .gif, pixelWidth: 5, pixelHeight: 3, frameCount: 3, byteCount: animatedGIF.count,
            entityTag: "\"v7\"", lastModified: "Sat, 21 Nov 2026 10:00:00 GMT", freshUntil: freshUntil)
        expected.freshLifetime = .seconds(86_400)
        #expect(result.metadata == expected)
    }

    @Test func aDamagedDiskFrameIsAMissThatFetchesAgain() async throws {
        // Given a disk entry whose frame is not an image cache frame
        let cache = try makeCache()
        let key = Self.key("bad.png")
        try cache.storage.disk!.setValue(Data("LIMG-not-really".utf8), forKey: key.cacheKey)
        // When the image is requested
        let png = self.png
        let result = try await cache.image(for: key) { _ in png }
        // Then the damaged entry is treated as missing and replaced by the fetched image
        #expect(result.source == .network)
        #expect(try await cache.cachedImage(for: key)?.data == png)
    }

    // MARK: - Coalescing and cancellation

    @Test func fiftyConcurrentWaitersShareOneFetchAndGetIdenticalBytes() async throws {
        // Given a fetch that counts calls and holds until every waiter has joined
        let cache = try makeCache(disk: false)
        let key = Self.key("shared.png")
        let fetches = AsyncCounter(), gate = AsyncGate()
        let png = self.png
        let fetch: @Sendable (ImageKey) async throws -> Data = { _ in
            fetches.increment()
            try await gate.wait()
            return png
        }
        // When 50 tasks ask for the key at once
        let results = try await withThrowingTaskGroup(of: ImageResult.self) { group in
            for _ in 0..<50 { group.addTask { try await cache.image(for: key, fetch: fetch) } }
            await eventually { cache.loads.waiterCount(for: key) == 50 }
            gate.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        // Then the fetch ran once and every waiter got the same bytes from it
        #expect(fetches.value == 1)
        #expect(results.count == 50)
        #expect(results.allSatisfy { $0.data == png && $0.source == .network })
        #expect(cache.loads.operationCount == 0)
    }

    @Test func cancellingOneWaiterLeavesTheOthersAndTheFetchRunning() async throws {
        // Given five waiters on one held fetch that records whether it was cancelled
        let cache = try makeCache(disk: false)
        let key = Self.key("keep-going.png")
        let fetches = AsyncCounter(), gate = AsyncGate()
        let fetchSawCancellation = Locked(false)
        let png = self.png
        let fetch: @Sendable (ImageKey) async throws -> Data = { _ in
            fetches.increment()
            do { try await gate.wait() } catch {
                fetchSawCancellation.withLock { $0 = true }
                throw error
            }
            return png
        }
        let waiters = (0..<5).map { _ in Task { try await cache.image(for: key, fetch: fetch) } }
        await eventually { cache.loads.waiterCount(for: key) == 5 }

        // When one waiter is cancelled
        waiters[0].cancel()
        // Then it leaves at once with CancellationError, before the fetch has finished
        await #expect(throws: CancellationError.self) { try await waiters[0].value }
        #expect(cache.loads.waiterCount(for: key) == 4)

        // And once the fetch finishes, the other four succeed and the fetch was never cancelled
        gate.open()
        for waiter in waiters.dropFirst() {
            #expect(try await waiter.value.data == png)
        }
        #expect(fetches.value == 1)
        #expect(fetchSawCancellation.withLock { $0 } == false)
    }

    @Test func cancellingEveryWaiterCancelsTheFetchAndCachesNothing() async throws {
        // Given three waiters on one fetch that waits until it is cancelled
        let cache = try makeCache()
        let key = Self.key("abandoned.png")
        let fetches = AsyncCounter(), cancelledFetches = AsyncCounter(), gate = AsyncGate()
        let png = self.png
        let fetch: @Sendable (ImageKey) async throws -> Data = { _ in
            fetches.increment()
            do { try await gate.wait() } catch {
                cancelledFetches.increment()
                throw error
            }
            return png
        }
        let waiters = (0..<3).map { _ in Task { try await cache.image(for: key, fetch: fetch) } }
        await eventually { cache.loads.waiterCount(for: key) == 3 }
        await fetches.wait(until: 1)

        // When every waiter is cancelled
        for waiter in waiters { waiter.cancel() }

        // Then every waiter throws CancellationError, the fetch sees its cancellation, nothing is cached
        for waiter in waiters {
            await #expect(throws: CancellationError.self) { try await waiter.value }
        }
        await cancelledFetches.wait(until: 1)
        await eventually { cache.loads.operationCount == 0 }
        #expect(try await cache.cachedImage(for: key) == nil)
        // And a later request starts a fresh fetch
        gate.open()
        #expect(try await cache.image(for: key, fetch: fetch).source == .network)
        #expect(fetches.value == 2)
    }

    @Test func aFetchErrorReachesEveryWaiterCachesNothingAndIsNotRemembered() async throws {
        // Given ten waiters on a fetch that fails
        struct Offline: Error, Equatable {}
        let cache = try makeCache()
        let key = Self.key("offline.png")
        let fetches = AsyncCounter(), gate = AsyncGate()
        let failing: @Sendable (ImageKey) async throws -> Data = { _ in
            fetches.increment()
            try await gate.wait()
            throw Offline()
        }
        // When they all wait and the fetch fails
        let errors = await withTaskGroup(of: (any Error)?.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    do { _ = try await cache.image(for: key, fetch: failing); return nil } catch { return error }
                }
            }
            await eventually { cache.loads.waiterCount(for: key) == 10 }
            gate.open()
            return await group.reduce(into: []) { $0.append($1) }
        }
        // Then each waiter gets the fetch's error, the fetch ran once, and nothing is cached
        #expect(errors.count == 10)
        #expect(errors.allSatisfy { $0 is Offline })
        #expect(fetches.value == 1)
        #expect(try await cache.cachedImage(for: key) == nil)
        #expect(cache.storage.statistics.writes == 0)
        // And the next request fetches again
        let png = self.png
        #expect(try await cache.image(for: key) { _ in png }.source == .network)
    }

    // MARK: - Validation

    static let invalidBodies: [Data] = [Data(), Data("<html>not found</html>".utf8), Data([0x89, 0x50, 0x4E])]

    @Test(arguments: invalidBodies)
    func bytesThatAreNotAnImageAreRejectedAndNotCached(body: Data) async throws {
        // Given a fetch that returns bytes that are empty or of no known format
        let cache = try makeCache()
        let key = Self.key("invalid.png")
        // When the image is requested
        let error = await #expect(throws: ImageCacheError.self) {
            try await cache.image(for: key) { _ in body }
        }
        // Then the specific error is thrown and no tier holds anything
        guard case .invalidImageData? = error else {
            Issue.record("expected invalidImageData, got \(String(describing: error))")
            return
        }
        #expect(try await cache.cachedImage(for: key) == nil)
        #expect(cache.storage.statistics.writes == 0)
    }

    // MARK: - Variants

    @Test func aMissingVariantIsMadeFromTheCachedOriginalWithoutFetching() async throws {
        // Given a cached original and a resize processor that records what it was given
        let seen = Locked<[(Data, ImageKey)]>([])
        let gif = self.gif
        let cache = try makeCache {
            $0.processors = [.resize { image, key in
                seen.withLock { $0.append((image.data, key)) }
                return gif
            }]
        }
        let original = Self.key("photo.png"), thumbnail = Self.key("photo.png", size: 64)
        try await cache.storeImage(png, for: original)

        // When the variant is requested
        let result = try await cache.image(for: thumbnail) { _ in
            Issue.record("a variant that can be made from the cached original must not be fetched")
            return Data()
        }

        // Then the processor made it from the original's bytes, and it is cached as the variant
        #expect(result.source == .processed)
        #expect(result.data == gif && result.metadata.format == .gif)
        let calls = seen.withLock { $0 }
        #expect(calls.count == 1)
        #expect(calls.first?.0 == png)
        #expect(calls.first?.1 == thumbnail)
        #expect(try await cache.image(for: thumbnail) { _ in Data() }.source == .memory)
        #expect(try cache.storage.disk!.containsValue(forKey: thumbnail.cacheKey))
    }

    @Test func aVariantRunsResizeThenItsNamedProcessorsInOrder() async throws {
        // Given processors that append their names, each returning a valid image
        let log = Locked<[String]>([])
        let gif = self.gif
        func recording(_ name: String) -> ImageProcessor {
            ImageProcessor(name) { image, _ in
                log.withLock { $0.append("\(name)<\(image.metadata.format)") }
                return gif
            }
        }
        let cache = try makeCache(disk: false) { $0.processors = [recording("resize"), recording("blur")] }
        cache.register(recording("sepia"))
        try await cache.storeImage(png, for: Self.key("p.png"))
        // When a variant with a size and two processors is requested
        let result = try await cache.image(for: Self.key("p.png", size: 10, processors: ["sepia", "blur"])) { _ in Data() }
        // Then resize ran first on the original, then sepia and blur in the key's order
        #expect(result.source == .processed)
        #expect(log.withLock { $0 } == ["resize<png", "sepia<gif", "blur<gif"])
    }

    @Test func aVariantWithoutARegisteredProcessorIsFetchedInstead() async throws {
        // Given a cached original but no processor for "sepia"
        let cache = try makeCache()
        try await cache.storeImage(png, for: Self.key("q.png"))
        let variant = Self.key("q.png", processors: ["sepia"])
        let requested = Locked<[ImageKey]>([])
        let gif = self.gif
        // When the variant is requested
        let result = try await cache.image(for: variant) { key in
            requested.withLock { $0.append(key) }
            return gif
        }
        // Then the fetch is asked for the variant itself
        #expect(result.source == .network)
        #expect(requested.withLock { $0 } == [variant])
    }

    @Test func aProcessorThatReturnsNonImageBytesFailsAndCachesNoVariant() async throws {
        let cache = try makeCache { $0.processors = [.resize { _, _ in Data("oops".utf8) }] }
        try await cache.storeImage(png, for: Self.key("r.png"))
        let variant = Self.key("r.png", size: 8)
        await #expect(throws: ImageCacheError.self) { try await cache.image(for: variant) { _ in Data() } }
        #expect(try await cache.cachedImage(for: variant) == nil)
    }

    @Test(arguments: [true, false])
    func variantsOfASourceListExactlyItsCachedVariants(diskBacked: Bool) async throws {
        // Given an original, two of its variants, and a variant of another source
        let cache = try makeCache(disk: diskBacked)
        let small = Self.key("v.png", size: 16), blurred = Self.key("v.png", processors: ["blur"])
        for key in [Self.key("v.png"), small, blurred, Self.key("w.png", size: 16), Self.key("v.png2", size: 16)] {
            try await cache.storeImage(png, for: key)
        }
        // When the variants of the source are listed
        let variants = try await cache.variants(of: Self.key("v.png", size: 99))
        // Then exactly the two variants of that source come back, sorted
        #expect(variants == [small, blurred].sorted { $0.canonicalString < $1.canonicalString })
    }

    @Test func variantsIncludeThoseOnlyOnDiskOrOnlyInMemory() async throws {
        let cache = try makeCache()
        let onDisk = Self.key("t.png", size: 16), inMemory = Self.key("t.png", size: 32)
        try await cache.storeImage(png, for: onDisk)
        try await cache.storage.removeValue(forKey: onDisk, tiers: .memory)
        let image = try CachedImage(data: png)
        try await cache.storage.setValue(image, forKey: inMemory, tiers: .memory)
        #expect(try await cache.variants(of: Self.key("t.png")) == [onDisk, inMemory])
    }

    @Test(arguments: [true, false])
    func removeImageRemovesTheSourceAndEveryVariantOnly(diskBacked: Bool) async throws {
        // Given a source with two variants, and another source
        let cache = try makeCache(disk: diskBacked)
        let keys = [Self.key("x.png"), Self.key("x.png", size: 16), Self.key("x.png", processors: ["blur"])]
        let other = Self.key("y.png")
        for key in keys + [other] { try await cache.storeImage(png, for: key) }
        // When the source is removed
        let removed = try await cache.removeImage(source: Self.key("x.png", size: 16))
        // Then three keys went, from every tier, and the other source stayed
        #expect(removed == 3)
        for key in keys { #expect(try await cache.cachedImage(for: key) == nil) }
        #expect(try await cache.cachedImage(for: other) != nil)
        #expect(try await cache.removeImage(source: Self.key("x.png")) == 0)
    }

    // MARK: - Prefetching

    @Test func prefetchNeverRunsMoreThanTheConfiguredNumberOfFetchesAtOnce() async throws {
        // Given a bound of 3 and fetches that hold until the test lets them go
        let cache = try makeCache(disk: false) { $0.maximumConcurrentPrefetches = 3 }
        let keys = (0..<12).map { Self.key("pre\($0).png") }
        let started = AsyncCounter(), probe = ConcurrencyProbe(), gate = AsyncGate()
        let png = self.png
        // When twelve keys are prefetched
        let batch = cache.prefetch(keys) { _ in
            probe.enter()
            defer { probe.leave() }
            started.increment()
            try await gate.wait()
            return png
        }
        // Then three fetches start and, while they are held, no fourth one does
        await started.wait(until: 3)
        // A short pause only gives a broken bound the chance to show; a correct one passes anyway.
        try await Task.sleep(for: .milliseconds(100))
        #expect(started.value == 3)
        gate.open()
        let summary = await batch.value
        // And every key was loaded, never more than three at a time
        #expect(summary.loaded == 12 && summary.skipped == 0 && summary.failed == 0 && summary.cancelled == 0)
        #expect(probe.maximum == 3)
        #expect(started.value == 12)
    }

    @Test func prefetchSkipsWhatIsAlreadyCached() async throws {
        // Given five keys, two of them cached (one only on disk)
        let cache = try makeCache()
        let keys = (0..<5).map { Self.key("skip\($0).png") }
        try await cache.storeImage(png, for: keys[1])
        try await cache.storeImage(png, for: keys[3])
        try await cache.storage.removeValue(forKey: keys[3], tiers: .memory)
        let fetched = Locked<Set<ImageKey>>([])
        let png = self.png
        // When all five are prefetched
        let summary = await cache.prefetch(keys) { key in
            fetched.withLock { _ = $0.insert(key) }
            return png
        }.value
        // Then only the three missing ones were fetched, and all five are now cached
        #expect(summary.loaded == 3 && summary.skipped == 2 && summary.failed == 0)
        #expect(fetched.withLock { $0 } == [keys[0], keys[2], keys[4]])
        for key in keys { #expect(try await cache.cachedImage(for: key) != nil) }
    }

    @Test func prefetchCountsFailuresWithoutThrowing() async throws {
        let cache = try makeCache(disk: false)
        let png = self.png
        let summary = await cache.prefetch([Self.key("ok.png"), Self.key("bad.png")]) { key in
            key.source.hasSuffix("bad.png") ? Data("nope".utf8) : png
        }.value
        #expect(summary.loaded == 1 && summary.failed == 1)
    }

    @Test func cancelPrefetchingStopsTheRemainingWork() async throws {
        // Given ten keys prefetched two at a time by fetches that wait until cancelled
        let cache = try makeCache { $0.maximumConcurrentPrefetches = 2 }
        let keys = (0..<10).map { Self.key("stop\($0).png") }
        let started = AsyncCounter(), cancelled = AsyncCounter(), gate = AsyncGate()
        let png = self.png
        let batch = cache.prefetch(keys) { _ in
            started.increment()
            do { try await gate.wait() } catch {
                cancelled.increment()
                throw error
            }
            return png
        }
        await started.wait(until: 2)

        // When prefetching is cancelled
        cache.cancelPrefetching()
        let summary = await batch.value

        // Then both running fetches were cancelled, no other key started, and nothing was cached
        await cancelled.wait(until: 2)
        #expect(started.value == 2)
        #expect(summary.loaded == 0 && summary.cancelled == 10)
        gate.open()
        for key in keys { #expect(try await cache.cachedImage(for: key) == nil) }
    }

    @Test func aRequestJoinedToACancelledPrefetchStillGetsItsImage() async throws {
        // Given a prefetch whose fetch is held, and a request for the same key
        let cache = try makeCache(disk: false)
        let key = Self.key("joined.png")
        let gate = AsyncGate(), started = AsyncCounter()
        let png = self.png
        let fetch: @Sendable (ImageKey) async throws -> Data = { _ in
            started.increment()
            try await gate.wait()
            return png
        }
        let batch = cache.prefetch([key], fetch: fetch)
        await started.wait(until: 1)
        let request = Task { try await cache.image(for: key, fetch: fetch) }
        await eventually { cache.loads.waiterCount(for: key) == 2 }
        // When prefetching is cancelled and the fetch then finishes
        cache.cancelPrefetching()
        #expect(await batch.value.cancelled == 1)
        gate.open()
        // Then the request gets the image from the one fetch
        #expect(try await request.value.source == .network)
        #expect(started.value == 1)
    }

    // MARK: - Clearing

    @Test func clearingMemoryDiskOrBothReturnsTheCountsRemoved() async throws {
        // Given three images in both tiers
        let cache = try makeCache()
        let keys = (0..<3).map { Self.key("c\($0).png") }
        for key in keys { try await cache.storeImage(png, for: key) }

        // When memory is cleared, then one image is read back from disk
        let memoryOnly = try await cache.removeAll(tiers: .memory)
        #expect(memoryOnly == [.memory: 3])
        #expect(try await cache.cachedImage(for: keys[0])?.source == .disk)

        // And disk is cleared, then both
        let diskOnly = try await cache.removeAll(tiers: .disk)
        #expect(diskOnly == [.disk: 3])
        let both = try await cache.removeAll()
        #expect(both == [.memory: 1, .disk: 0])
        #expect(both.values.reduce(0, +) == 1)
        // Then nothing is left
        for key in keys { #expect(try await cache.cachedImage(for: key) == nil) }
    }

    @Test func clearingTheDiskOfAMemoryOnlyCacheIsAnError() async throws {
        let cache = try makeCache(disk: false)
        try await cache.storeImage(png, for: Self.key("m.png"))
        await #expect(throws: StorageError.self) { try await cache.removeAll(tiers: .disk) }
        #expect(try await cache.removeAll() == [.memory: 1])
    }

    // MARK: - Statistics

    @Test func eachRequestCountsOnceInTheCacheAndInTheStorage() async throws {
        // Given a disk-backed cache with a resize processor
        let png = self.png, gif = self.gif
        let cache = try makeCache { $0.processors = [.resize { _, _ in gif }] }
        let keys = (0..<5).map { Self.key("s\($0).png") }
        // When 5 images are downloaded (3 callers each, coalesced), read 4 more times from
        // memory, then from disk after memory is cleared, and a variant is made
        for key in keys {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<3 { group.addTask { _ = try await cache.image(for: key) { _ in png } } }
                try await group.waitForAll()
            }
        }
        for _ in 0..<4 { for key in keys { _ = try await cache.image(for: key) { _ in png } } }
        try await cache.removeAll(tiers: .memory)
        for key in keys { #expect(try await cache.image(for: key) { _ in png }.source == .disk) }
        let variant = try await cache.image(for: Self.key("s0.png", size: 2)) { _ in png }
        #expect(variant.source == .processed)
        await #expect(throws: ImageCacheError.self) { try await cache.image(for: Self.key("bad.png")) { _ in Data() } }
        // Then each request counted exactly once, and each download once however many waited
        let statistics = cache.statistics
        #expect(statistics.requests == 15 + 20 + 5 + 1 + 1)
        #expect(statistics.downloads == 6)                       // 5 images + the failed one
        // The 15 coalesced callers got their image from the download or, if they arrived
        // after it finished, from memory
        #expect(statistics.downloaded + statistics.memoryHits == 15 + 20)
        #expect(statistics.downloaded >= 5)
        #expect(statistics.tierHits["disk"] == 5)
        #expect(statistics.processed == 1)
        #expect(statistics.failures == 1)
        // And the storage counted each request once, in the tier that answered: a caller that
        // waited for another caller's download counts a miss as the downloading caller does
        let storage = cache.storage.statistics
        #expect(storage[.memory].hits == statistics.memoryHits)
        #expect(storage[.memory].hits + storage[.memory].misses == statistics.requests)
        #expect(storage[.disk].hits == 5)
        // the callers answered by a download, the variant, the failure
        #expect(storage.misses == statistics.downloaded + 1 + 1)
        #expect(storage[.disk].misses == storage.misses)
        #expect(storage[.memory].hits + storage[.disk].hits + storage.misses == statistics.requests)
    }

    @Test func callersThatWaitForAnotherCallersDownloadCountOnceInTheStorage() async throws {
        // Given a fetch that answers only once three callers wait for it
        let png = self.png
        let cache = try makeCache()
        let key = Self.key("joined.png")
        // When three callers ask for the missing image at once
        try await withThrowingTaskGroup(of: ImageResult.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await cache.image(for: key) { key in
                        while cache.loads.waiterCount(for: key) < 3 { try await Task.sleep(for: .milliseconds(5)) }
                        return png
                    }
                }
            }
            for try await result in group { #expect(result.source == .network) }
        }
        // Then the cache and the storage each count three requests: three misses in memory,
        // three on disk and three overall, with one download
        let statistics = cache.statistics
        #expect(statistics.downloaded == 3 && statistics.downloads == 1)
        let storage = cache.storage.statistics
        #expect(storage[.memory].misses == 3)
        #expect(storage[.disk].misses == 3 && storage[.disk].hits == 0)
        #expect(storage.misses == 3)
    }

    @Test func afterARelaunchCoalescedCallersCountTheirDiskHitsInBothStatistics() async throws {
        // Given 40 images on disk, and a new cache on the same directory (a relaunch)
        let png = self.png
        let keys = (0..<40).map { Self.key("relaunch\($0).png") }
        do {
            let first = try makeCache()
            for key in keys { try await first.storeImage(png, for: key) }
        }
        let cache = try makeCache()
        // When 8 callers ask for each image at once (those that arrive while another caller's
        // disk read is in flight wait for it)
        try await withThrowingTaskGroup(of: ImageResult.self) { group in
            for key in keys {
                for _ in 0..<8 { group.addTask { try await cache.image(for: key) { _ in Data() } } }
            }
            for try await result in group { #expect(result.source == .disk || result.source == .memory) }
        }
        // Then both sets of statistics count every request once, in the tier that answered
        let statistics = cache.statistics
        let storage = cache.storage.statistics
        #expect(statistics.requests == 320 && statistics.downloads == 0)
        #expect(storage[.memory].hits == statistics.memoryHits)
        #expect(storage[.memory].misses == 320 - statistics.memoryHits)
        #expect(storage[.disk].hits == statistics.tierHits["disk", default: 0])
        #expect(storage[.disk].hits == storage[.memory].misses)
        #expect(storage[.disk].misses == 0 && storage.misses == 0)
    }

    // MARK: - Memory cost and compression

    @Test func memoryCostIsTheDecodedEstimateOrElseTheByteCount() async throws {
        // Given a 5×3 PNG, a 3-frame 5×3 GIF and an SVG (whose size the header parser does not read)
        let cache = try makeCache(disk: false)
        // When each is cached alone
        var costs: [Int] = []
        for (name, data) in [("s.png", png), ("s.gif", animatedGIF), ("s.svg", svg)] {
            try await cache.removeAll()
            try await cache.storeImage(data, for: Self.key(name))
            costs.append(cache.storage.memory.totalCost)
        }
        // Then memory is charged width × height × 4 × frames, or the bytes when the size is unknown
        let expected: [Int] = [60, 180, svg.count]  // 5 × 3 × 4; 5 × 3 × 4 × 3 frames; SVG bytes
        #expect(costs == expected)
    }

    @Test func alreadyCompressedFormatsSkipGzipAndOthersUseIt() async throws {
        // Given a PNG padded with very compressible bytes, and a padded SVG
        let cache = try makeCache()
        let paddedPNG = png + Data(count: 8_192)
        let paddedSVG = svg + Data(String(repeating: "<!-- padding -->", count: 512).utf8)
        try await cache.storeImage(paddedPNG, for: Self.key("z.png"))
        try await cache.storeImage(paddedSVG, for: Self.key("z.svg"))
        // Then the PNG is stored raw, the SVG gzipped, and both read back intact
        let disk = try #require(cache.storage.disk)
        #expect(try disk.attributes(forKey: Self.key("z.png").cacheKey)?.encoding == .raw)
        #expect(try disk.attributes(forKey: Self.key("z.svg").cacheKey)?.encoding == .gzip)
        try await cache.removeAll(tiers: .memory)
        #expect(try await cache.cachedImage(for: Self.key("z.png"))?.data == paddedPNG)
        #expect(try await cache.cachedImage(for: Self.key("z.svg"))?.data == paddedSVG)
    }

    // MARK: - Frame encoding

    @Test func theDiskFrameRoundTripsAndRejectsTruncation() throws {
        let image = try CachedImage(data: png, entityTag: "e", lastModified: "l")
        let transformer = Transformer<CachedImage>.cachedImage
        let frame = try transformer.encode(image)
        #expect(try transformer.decode(frame) == image)
        for length in [0, 4, 9, frame.count - png.count - 1, frame.count - 1] {
            #expect(throws: StorageError.self) { try transformer.decode(frame.prefix(length)) }
        }
    }

    // MARK: - HTTP fetcher

    @Test func aCacheWithAnHTTPFetcherLoadsTheKeysSourceOnce() async throws {
        // Given a loopback server with a PNG and its ETag
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png"), ("ETag", "\"abc\"")], body: png)
        }
        let cache = try makeCache(fetcher: HTTPImageFetcher { $0.maximumAttempts = 1 })
        let key = ImageKey(server.url("/photo.png?token=1"), filter: nil)
        // When the image is requested twice without a closure
        let first = try await cache.image(for: key)
        let second = try await cache.image(for: key)
        // Then the server was asked once and the validator was cached
        #expect(first.source == .network && second.source == .memory)
        #expect(first.data == png && first.metadata.entityTag == "\"abc\"")
        #expect(server.requestCount("/photo.png?token=1") == 1)
    }

    @Test func equivalentURLsShareOneDownloadAndTheServerSeesTheCallersURL() async throws {
        // Given a server that records the exact request targets it receives
        let png = self.png
        let targets = Locked<[String]>([])
        let server = try TestHTTPServer { target, _ in
            targets.withLock { $0.append(target) }
            return TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        let cache = try makeCache(fetcher: HTTPImageFetcher { $0.maximumAttempts = 1 })
        // When one image is asked for through two equivalent URLs, the first with its query in
        // an order the server may care about (a signed URL)
        let signed = ImageKey(server.url("/img/%7ecat.png?sig=z&exp=1"))
        let plain = ImageKey(server.url("/img/~cat.png?exp=1&sig=z"))
        #expect(signed == plain)
        let first = try await cache.image(for: signed)
        let second = try await cache.image(for: plain)
        // Then one download served both, and it asked for the caller's URL as given
        #expect(first.source == .network && second.source == .memory)
        #expect(targets.withLock { $0 } == ["/img/%7ecat.png?sig=z&exp=1"])
    }

    @Test func aRequestCarriesItsHeadersAndReportsProgressThroughTheCache() async throws {
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        let cache = try makeCache(fetcher: HTTPImageFetcher { $0.maximumAttempts = 1 })
        let received = Locked<[Int64]>([])
        let result = try await cache.image(
            for: ImageKey(server.url("/private.png")), headers: ["Authorization": "Bearer secret"]
        ) { bytes, _ in received.withLock { $0.append(bytes) } }
        #expect(result.source == .network)
        #expect(server.requestHeaders("/private.png")["authorization"] == "Bearer secret")
        #expect(received.withLock { $0.last } == Int64(png.count))
    }

    @Test func visibleImagesDownloadAheadOfQueuedBackgroundLoads() async throws {
        // Given a fetcher with one download slot, held by a download the server answers only
        // when the test opens the gate
        let png = self.png
        let order = Locked<[String]>([])
        let gate = DispatchSemaphore(value: 0)
        let server = try TestHTTPServer { path, _ in
            order.withLock { $0.append(path) }
            if path == "/hold.png" { _ = gate.wait(timeout: .now() + 300) }
            return TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        // (A long request timeout: tests that block the cooperative pool, such as the crash
        // rounds, can stall this test's polling past the default 60 s while the held request waits.)
        let fetcher = HTTPImageFetcher {
            $0.maximumAttempts = 1
            $0.maximumConcurrentDownloads = 1
            $0.timeout = .seconds(300)
        }
        let cache = try makeCache(fetcher: fetcher) { $0.maximumConcurrentPrefetches = 4 }
        let hold = Task { try await cache.image(for: ImageKey(server.url("/hold.png"))) }
        while server.requestCount("/hold.png") == 0 { try await Task.sleep(for: .milliseconds(5)) }
        // When three prefetches queue up, then an image for display
        let prefetch = cache.prefetch((0..<3).map { ImageKey(server.url("/later\($0).png")) })
        while await fetcher.queuedDownloadCount < 3 { try await Task.sleep(for: .milliseconds(5)) }
        let visible = Task { try await cache.image(for: ImageKey(server.url("/visible.png")), priority: .high) }
        while await fetcher.queuedDownloadCount < 4 { try await Task.sleep(for: .milliseconds(5)) }
        gate.signal()
        // Then the visible image is downloaded as soon as the slot frees, before every prefetch
        _ = try await hold.value
        _ = try await visible.value
        _ = await prefetch.value
        let served = order.withLock { $0 }
        #expect(served.first == "/hold.png")
        #expect(served.dropFirst().first == "/visible.png", "order \(served)")
        #expect(Set(served.dropFirst(2)) == ["/later0.png", "/later1.png", "/later2.png"])
    }

    @Test func anHTTPFetcherVariantIsMadeFromTheFetchedOriginal() async throws {
        let png = self.png, gif = self.gif
        let server = try TestHTTPServer { _, _ in TestHTTPServer.Response(body: png) }
        let cache = try makeCache(fetcher: HTTPImageFetcher { $0.maximumAttempts = 1 }) {
            $0.processors = [.resize { _, _ in gif }]
        }
        let original = ImageKey(server.url("/big.png"))
        let variant = ImageKey(server.url("/big.png"), targetSize: .init(width: 4, height: 4))
        // When a variant is requested with nothing cached
        let result = try await cache.image(for: variant)
        // Then the original was downloaded once, cached, and processed into the variant
        #expect(result.source == .processed && result.data == gif)
        #expect(try await cache.cachedImage(for: original)?.data == png)
        #expect(server.requestCount("/big.png") == 1)
        // And a variant no processor can make is refused before any download
        await #expect(throws: ImageCacheError.processorNotRegistered(identifier: "sepia")) {
            try await cache.image(for: ImageKey(server.url("/other.png"), processors: ["sepia"]))
        }
        #expect(server.requestCount("/other.png") == 0)
    }

    @Test func withoutAFetcherOnlyCachedImagesCanBeLoaded() async throws {
        let cache = try makeCache()
        try await cache.storeImage(png, for: Self.key("have.png"))
        #expect(try await cache.image(for: Self.key("have.png")).source == .memory)
        await #expect(throws: ImageCacheError.noFetcher) { try await cache.image(for: Self.key("lack.png")) }
        let opaque = try makeCache(disk: false, fetcher: HTTPImageFetcher())
        await #expect(throws: ImageCacheError.unsupportedSource("avatar/42")) {
            try await opaque.image(for: ImageKey("avatar/42"))
        }
    }

    // MARK: - README

    /// The README's quick start, against the loopback server instead of example.com.
    @Test func readmeQuickStartWorks() async throws {
        let png = self.png
        let server = try TestHTTPServer { _, _ in TestHTTPServer.Response(body: png) }
        let nextPageURLs = [server.url("/next.png")]

        let cache = try ImageCache(fetcher: HTTPImageFetcher()) {
            $0.directory = directory
            $0.memory.costLimit = 100 << 20                        // decoded bytes, not file bytes
            $0.processors = [.resize { image, key in image.data }] // plug your resizer in here
        }
        let url = server.url("/cat.png")
        let result = try await cache.image(for: ImageKey(url))   // memory → disk → one download per key
        print(result.source, result.metadata.format, result.metadata.pixelWidth ?? 0)

        let thumbnail = try await cache.image(for: ImageKey(url, targetSize: .init(width: 120, height: 120)))
        print(thumbnail.source)                                    // processed: from the cached original
        let batch = cache.prefetch(nextPageURLs.map { ImageKey($0) }) // at most 4 at a time, skips cached
        let removed = try await cache.removeImage(source: ImageKey(url)) // the original and its variants

        #expect(result.source == .network && result.metadata.format == .png && result.metadata.pixelWidth == 5)
        #expect(thumbnail.source == .processed)
        #expect(await batch.value.loaded == 1)
        #expect(removed == 2)
    }
}
