public import Foundation
public import Larder
import Dispatch
import Synchronization

/// A cache of encoded image bytes with their metadata, in memory and optionally on disk, that
/// loads what it lacks exactly once.
///
/// `ImageCache` sits on a `Storage` of ``CachedImage`` values keyed by ``ImageKey``.
/// ``image(for:fetch:)-(_,(ImageKey)->Data)`` answers from the first step that has the image:
///
/// 1. memory (``ImageResult/Source/memory``);
/// 2. disk, promoting the image to memory (``ImageResult/Source/disk``);
/// 3. for a variant key (a target size or processors), the cached original run through the
///    registered ``ImageProcessor``s (``ImageResult/Source/processed``), before any fetch;
/// 4. the fetch closure, or the ``HTTPImageFetcher`` the cache was created with
///    (``ImageResult/Source/network``).
///
/// Fetched and processed bytes must be non-empty and of a known ``ImageFormat``; anything else
/// throws ``ImageCacheError/invalidImageData(reason:)`` and caches nothing.
///
/// A downloaded image is fresh for the lifetime its response gives (``ImageFreshness``). A
/// stale one found in memory or on disk is revalidated before use: with the cache's fetcher,
/// a conditional request (`If-None-Match`, `If-Modified-Since`) whose `304` refreshes its
/// lifetime and validators without transferring or rewriting the bytes (the disk's index row
/// changes, not the blob file), and whose `200` replaces it; without a validator, or with a
/// fetch closure, a download. Within its `stale-while-revalidate` window it is returned at once
/// and one revalidation runs in the background; within its `stale-if-error` window it is
/// returned when revalidation fails with a transport error or a 5xx.
/// ``ImageResult/freshness`` says which happened.
///
/// Concurrent requests for one key share one load: the fetch runs once and every waiter gets
/// its result or its error. Cancelling one waiter's task makes that waiter throw
/// `CancellationError` at once and leaves the others and the fetch alone; the fetch's task is
/// cancelled only when every waiter has gone. A failed load caches nothing and is forgotten, so
/// the next request fetches again.
///
/// ```swift
/// let cache = try ImageCache { $0.directory = cachesURL.appendingPathComponent("images") }
/// let key = ImageKey(URL(string: "https://example.com/cat.png")!)
/// let result = try await cache.image(for: key) { key in
///     try await myHTTPClient.data(from: key.source)
/// }
/// print(result.source, result.metadata.format, result.metadata.pixelWidth ?? 0)  // "network png 640"
/// ```
///
/// The memory cost of an image is ``ImageMetadata/memoryCost``: its decoded size when the
/// header gives the pixel size, else its byte count. On disk, already-compressed formats skip
/// gzip.
///
/// - Important: Methods that reach the disk run that I/O off the caller's executor, on
///   Larder's I/O queues.
public final class ImageCache: Sendable {
    /// The configuration the cache was created with.
    public let configuration: Configuration
    /// The storage underneath: its `Storage/statistics` count each ``image(for:)`` request once
    /// per tier it reached: a memory hit, or a memory miss and then a hit in the tier that
    /// answered (a stale image being revalidated included) or a miss in every tier (a download
    /// or a processed variant), callers that waited for another caller's load included. A
    /// request that fails counts its memory miss, and below memory only when it made the read.
    public let storage: Storage<ImageKey, CachedImage>
    /// The fetcher ``image(for:)`` uses, or `nil` when the cache was created without one.
    public let fetcher: HTTPImageFetcher?

    private let processors: Locked<[String: ImageProcessor]>
    /// What ``statistics`` reports.
    let counters = ImageCacheCounters()
    /// Loads in flight, one per key.
    let loads = RequestCoalescer<ImageKey, ImageResult>()
    /// Prefetch batches in flight, for ``cancelPrefetching()``.
    let prefetches = Locked(PrefetchBatches())
    /// Shared by every prefetch batch, so the bound holds across batches.
    let prefetchPermits: AsyncSemaphore

    /// Creates a cache.
    ///
    /// - Parameters:
    ///   - configuration: The tiers, processors and prefetch bound.
    ///   - fetcher: The fetcher ``image(for:)`` and ``prefetch(_:)`` use to download
    ///     ``ImageKey/source``; `nil` when every call passes its own fetch closure.
    /// - Throws: `StorageError/invalidConfiguration(field:value:reason:)` for a bad
    ///   configuration, or the errors of opening the disk tier.
    public init(configuration: Configuration = .init(), fetcher: HTTPImageFetcher? = nil) throws {
        guard configuration.maximumConcurrentPrefetches > 0 else {
            throw StorageError.invalidConfiguration(
                field: "maximumConcurrentPrefetches", value: "\(configuration.maximumConcurrentPrefetches)",
                reason: "must be greater than 0")
        }
        var storageConfiguration = Storage<ImageKey, CachedImage>.Configuration(
            memory: configuration.memory, directory: configuration.directory, disk: configuration.disk,
            now: configuration.now, logHandler: configuration.logHandler)
        if storageConfiguration.memory.cost == nil {
            storageConfiguration.memory.cost = { $0.metadata.memoryCost }
        }
        self.configuration = configuration
        self.storage = try Storage(configuration: storageConfiguration, transformer: .cachedImage)
        self.fetcher = fetcher
        self.processors = Locked(Dictionary(configuration.processors.map { ($0.identifier, $0) }) { $1 })
        self.prefetchPermits = AsyncSemaphore(permits: configuration.maximumConcurrentPrefetches)
    }

    /// Creates a cache with a configuration edited by `configure`.
    ///
    /// ```swift
    /// let cache = try ImageCache(fetcher: HTTPImageFetcher()) { $0.directory = imagesURL }
    /// ```
    public convenience init(fetcher: HTTPImageFetcher? = nil, _ configure: (inout Configuration) -> Void) throws {
        var configuration = Configuration()
        configure(&configuration)
        try self.init(configuration: configuration, fetcher: fetcher)
    }

    /// What the cache did since it was created: one count per ``image(for:)`` request.
    public var statistics: ImageCacheStatistics {
        counters.snapshot
    }

    // MARK: - Processors

    /// Registers `processor`, replacing any processor with the same identifier.
    ///
    /// Loads already in flight may or may not see it.
    public func register(_ processor: ImageProcessor) {
        processors.withLock { $0[processor.identifier] = processor }
    }

    // MARK: - Loading

    /// The image for `key`: from memory, disk, the cached original through processors, or else
    /// `fetch`.
    ///
    /// While a load for `key` is in flight, other calls for `key` wait for it instead of
    /// starting their own; the first caller's `fetch` is the one that runs.
    ///
    /// - Parameters:
    ///   - key: The image, or a variant of it.
    ///   - fetch: Downloads the bytes for a key (the variant's key when a variant cannot be
    ///     made from a cached original). Runs in its own task, cancelled only when every
    ///     waiter has gone.
    /// - Returns: The image and the step that produced it.
    /// - Throws: `fetch`'s or a processor's error, ``ImageCacheError/invalidImageData(reason:)``
    ///   for bytes that are not an image, `CancellationError` when the calling task is
    ///   cancelled, or `StorageError` when the disk cannot be read.
    public func image(
        for key: ImageKey, fetch: @escaping @Sendable (ImageKey) async throws -> Data
    ) async throws -> ImageResult {
        try await load(key, from: .closure { FetchedBytes(data: try await fetch($0)) })
    }

    /// The image for `key`, fetching a ``FetchedImage`` so that its `ETag` and `Last-Modified`
    /// validators are cached with it.
    ///
    /// Works as ``image(for:fetch:)-(_,(ImageKey)->Data)`` does.
    public func image(
        for key: ImageKey, fetch: @escaping @Sendable (ImageKey) async throws -> FetchedImage
    ) async throws -> ImageResult {
        try await load(key, from: .closure { key in
            let fetched = try await fetch(key)
            return FetchedBytes(fetched)
        })
    }

    /// The image for `key`, downloading ``ImageKey/source`` with the cache's ``fetcher``.
    ///
    /// The fetcher downloads originals only: a missing variant is made from its original
    /// (fetched first when not cached) by the registered processors.
    ///
    /// The download requests ``ImageKey/requestString``, the URL exactly as the key was made
    /// from (volatile query items and their order included), with `headers`. While a load for
    /// `key` is in flight, later calls join it: the first call's headers, priority and
    /// progress are the ones used.
    ///
    /// - Parameters:
    ///   - headers: Header fields for the download (credentials, for example).
    ///   - priority: Where the download waits when the fetcher is at its concurrency bound;
    ///     prefetches use ``FetchPriority/low``.
    ///   - progress: Called as the download's bytes arrive, with the total when known.
    /// - Throws: ``ImageCacheError/noFetcher`` when the cache has no fetcher and the image is
    ///   not cached, ``ImageCacheError/unsupportedSource(_:)`` for a source that is not an
    ///   `http(s)` URL, ``ImageCacheError/processorNotRegistered(identifier:)`` for a variant
    ///   that no registered processors can make, and ``ImageFetchError`` from the fetcher.
    public func image(
        for key: ImageKey, headers: [String: String] = [:], priority: FetchPriority = .normal,
        progress: (@Sendable (_ received: Int64, _ expected: Int64?) -> Void)? = nil
    ) async throws -> ImageResult {
        let options = FetchOptions(headers: headers, priority: priority, progress: progress)
        return try await load(key, from: fetcher.map { .fetcher($0, options) } ?? .none)
    }

    /// The image for `key` if memory or disk holds it, without making, fetching or
    /// revalidating anything.
    ///
    /// The image may be past its lifetime (kept to be revalidated or served stale): see
    /// ``ImageMetadata/isFresh(at:)``.
    ///
    /// - Returns: The image with ``ImageResult/Source/memory`` or ``ImageResult/Source/disk``,
    ///   or `nil` on a miss.
    public func cachedImage(for key: ImageKey) async throws -> ImageResult? {
        guard let entry = try await storage.entry(forKey: key) else { return nil }
        return ImageResult(image: try await current(entry, forKey: key, now: now()), source: .tier(entry.tier))
    }

    /// Checks `data` and stores it for `key` in every tier.
    ///
    /// - Parameters:
    ///   - data: Encoded image bytes.
    ///   - key: The image or variant they are.
    ///   - entityTag: The `ETag` they were served with.
    ///   - lastModified: The `Last-Modified` date they were served with.
    /// - Returns: The stored image with its metadata.
    /// - Throws: ``ImageCacheError/invalidImageData(reason:)`` for bytes that are not an image
    ///   (nothing is stored), or `StorageError` when the disk write fails.
    @discardableResult
    public func storeImage(
        _ data: Data, for key: ImageKey, entityTag: String? = nil, lastModified: String? = nil
    ) async throws -> CachedImage {
        let image = try makeImage(data, entityTag: entityTag, lastModified: lastModified)
        try await storage.setValue(image, forKey: key)
        return image
    }

    /// Memory, then the coalesced rest of the lookup.
    ///
    /// Each call counts once in ``statistics`` and once in the storage's: a memory hit, or a
    /// miss in memory followed by one answer below it (a hit in the tier that answered, or a
    /// miss), whether the call made the read below memory or waited for another call's. A stale image in memory within its
    /// `stale-while-revalidate` window is returned at once and revalidated in the background;
    /// any other stale image goes the coalesced way, to be revalidated.
    func load(_ key: ImageKey, from source: FetchSource) async throws -> ImageResult {
        if let entry = storage.entryInMemory(forKey: key) {
            let now = self.now()
            if entry.value.metadata.isFresh(at: now) {
                counters.count(.memory)
                return ImageResult(image: entry.value, source: .memory)
            }
            if entry.value.metadata.allowsStaleWhileRevalidate(at: now), source.canRevalidate(key) {
                revalidateInBackground(key, from: source)
                let result = ImageResult(image: entry.value, source: .memory, freshness: .staleWhileRevalidate)
                counters.count(result)
                return result
            }
        }
        do {
            let leader = LeaderMark()
            let result = try await loads.value(for: key) {
                leader.mark()
                return try await self.resolve(key, from: source)
            }
            if !leader.isMarked { countJoinedRead(result) }
            counters.count(result)
            if result.freshness == .staleWhileRevalidate { revalidateInBackground(key, from: source) }
            return result
        } catch {
            counters.countFailure()
            throw error
        }
    }

    /// Counts in the storage's statistics what the read this caller joined counted there, so a
    /// coalesced caller counts once in the tier that answered, as the caller that made the read
    /// does: a disk hit for an image from disk (fresh, stale or revalidated), a miss in every
    /// tier for a download or a variant made by processors.
    private func countJoinedRead(_ result: ImageResult) {
        switch result.source {
        case .network, .processed: storage.countJoinedRead(answeredBy: nil)
        default: storage.countJoinedRead(answeredBy: StorageTier(result.source.name))
        }
    }

    /// Disk (memory again, in case a load just finished), variant from the original, fetch.
    ///
    /// A stale image is revalidated, or returned as ``ImageResult/Freshness/staleWhileRevalidate``
    /// (for the caller to start the background revalidation) unless this is that revalidation.
    func resolve(_ key: ImageKey, from source: FetchSource, inBackground: Bool = false) async throws -> ImageResult {
        if let entry = try await storage.entryAfterMemoryMiss(forKey: key) {
            let now = self.now()
            let image = try await current(entry, forKey: key, now: now)
            let tier = Source.tier(entry.tier)
            if image.metadata.isFresh(at: now) { return ImageResult(image: image, source: tier) }
            if !inBackground, image.metadata.allowsStaleWhileRevalidate(at: now), source.canRevalidate(key) {
                return ImageResult(image: image, source: tier, freshness: .staleWhileRevalidate)
            }
            if source.canRevalidate(key) { return try await revalidate(image, from: tier, forKey: key, source: source) }
        }
        if !key.isOriginal, case let .success(steps) = processingSteps(for: key),
           let original = try await storage.entryAfterMemoryMiss(forKey: key.original) {
            let image = try await current(original, forKey: key.original, now: now())
            if let expiry = variantExpiry(of: image.metadata, storedUntil: original.expirationDate) {
                return try await makeVariant(of: image, for: key, steps: steps, expiry: expiry)
            }
        }
        switch source {
        case let .closure(fetch):
            counters.countDownload()
            return try await storeDownloaded(try await fetch(key), for: key)
        case let .fetcher(fetcher, options) where key.isOriginal:
            let url = try Self.url(of: key)
            counters.countDownload()
            let fetched: FetchedImage
            do {
                fetched = try await fetcher.fetch(
                    url, headers: options.headers, priority: options.priority,
                    partialDownloadFile: partialDownloadFile(for: key), progress: options.progress)
            } catch {
                trimPartialDownloads()
                throw error
            }
            return try await storeDownloaded(FetchedBytes(fetched), for: key)
        case .fetcher:
            let steps = try processingSteps(for: key).get()
            let original = try await load(key.original, from: source)
            let expiry = variantExpiry(of: original.image.metadata, storedUntil: nil)
            return try await makeVariant(of: original.image, for: key, steps: steps, expiry: expiry)
        case .none:
            throw ImageCacheError.noFetcher
        }
    }

    /// How long a variant made from an original with `metadata` may be kept: no longer than the
    /// original stays fresh (or, without an HTTP lifetime, stays cached); `nil` when the
    /// original is stale, so the variant is not made from it.
    private func variantExpiry(of metadata: ImageMetadata, storedUntil: Date?) -> Expiry?? {
        guard let freshUntil = metadata.freshUntil else { return .some(storedUntil.map(Expiry.date)) }
        return freshUntil > now() ? .some(.date(freshUntil)) : nil
    }

    /// The processors that make `key` from its original, in order, or the first one missing.
    func processingSteps(for key: ImageKey) -> Result<[ImageProcessor], ImageCacheError> {
        let registered = processors.withLock { $0 }
        let identifiers = (key.targetSize == nil ? [] : [ImageProcessor.resizeIdentifier]) + key.processors
        var steps: [ImageProcessor] = []
        for identifier in identifiers {
            guard let processor = registered[identifier] else {
                return .failure(.processorNotRegistered(identifier: identifier))
            }
            steps.append(processor)
        }
        return .success(steps)
    }

    /// Runs `steps` on `original` and stores the variant with `expiry` (`.none`: the variant
    /// is returned but not stored, its original being stale).
    private func makeVariant(
        of original: CachedImage, for key: ImageKey, steps: [ImageProcessor], expiry: Expiry??
    ) async throws -> ImageResult {
        var image = original
        for step in steps {
            try Task.checkCancellation()
            image = try makeImage(try await step.process(image, key))
        }
        if case let .some(expiry) = expiry { await store(image, for: key, expiry: expiry) }
        return ImageResult(image: image, source: .processed)
    }

    /// Checks downloaded bytes and stores them for as long as the response (or the fixed
    /// ``Configuration/freshness``) allows; a `no-store` answer is returned but not stored.
    ///
    /// - Parameter replacing: Whether the download replaces a stale cached image, which a
    ///   `no-store` answer then removes.
    func storeDownloaded(_ fetched: FetchedBytes, for key: ImageKey, replacing: Bool = false) async throws -> ImageResult {
        var image = try makeImage(fetched.data, entityTag: fetched.entityTag, lastModified: fetched.lastModified)
        let decision = configuration.freshness.decision(
            cacheControl: fetched.cacheControl, expires: fetched.expires, date: fetched.date, age: fetched.age,
            now: now(), hasValidator: fetched.entityTag != nil || fetched.lastModified != nil)
        if case let .store(lifetime) = decision {
            image = CachedImage(checkedData: image.data, metadata: lifetime.applied(to: image.metadata))
            await store(image, for: key, expiry: lifetime.expiry)
        } else if replacing {
            // A no-store answer is not cached, and the stale image it replaces is outdated.
            _ = try? await storage.removeValue(forKey: key)
        }
        return ImageResult(image: image, source: .network)
    }

    /// Checks bytes about to be cached: a known format, and a complete file when the
    /// configuration requires it.
    private func makeImage(_ data: Data, entityTag: String? = nil, lastModified: String? = nil) throws -> CachedImage {
        let image = try CachedImage(data: data, entityTag: entityTag, lastModified: lastModified)
        if configuration.requiresCompleteImages,
           let problem = ImageCompleteness.problem(with: data, format: image.metadata.format) {
            throw ImageCacheError.invalidImageData(reason: problem)
        }
        return image
    }

    /// Stores a loaded image. A disk failure (a full disk, an image over the size limit) does
    /// not fail the load that already has the image: it is logged and kept in memory only.
    private func store(_ image: CachedImage, for key: ImageKey, expiry: Expiry? = nil) async {
        do {
            try await storage.setValue(image, forKey: key, expiry: expiry)
        } catch {
            log("image \(key) kept in memory only: \(error)")
            _ = try? await storage.setValue(image, forKey: key, expiry: expiry, tiers: .memory)
        }
    }

    /// The URL to fetch: exactly what the caller gave (``ImageKey/requestString``), not the
    /// canonical key.
    static func url(of key: ImageKey) throws -> URL {
        guard let url = URL(string: key.requestString), let scheme = url.scheme?.lowercased(),
              scheme == "http" || scheme == "https", url.host != nil
        else { throw ImageCacheError.unsupportedSource(key.source) }
        return url
    }

    // MARK: - Variants and removal

    /// The cached variants of `source`'s image (every key with its source and a target size or
    /// processors), sorted by canonical string.
    ///
    /// Every tier is searched (`Storage/keys(withPrefix:tiers:)`): on disk that is a range scan
    /// of the key index; memory, which can hold variants the disk has evicted or never stored,
    /// costs O(n) in the entries it holds.
    ///
    /// - Parameter source: Any key of the image; only its ``ImageKey/source`` matters.
    public func variants(of source: ImageKey) async throws -> [ImageKey] {
        try await storage.keys(withPrefix: source.variantPrefix).compactMap { string in
            ImageKey(canonicalString: string).flatMap { $0.isVariant(of: source) ? $0 : nil }
        }
    }

    /// Removes `source`'s original and every cached variant from every tier, and the bytes
    /// kept of an interrupted download of the original.
    ///
    /// Loads in flight are not cancelled; one that finishes afterwards stores its image.
    ///
    /// - Parameter source: Any key of the image; only its ``ImageKey/source`` matters.
    /// - Returns: The number of keys removed (each counted once, whatever tiers held it).
    @discardableResult
    public func removeImage(source: ImageKey) async throws -> Int {
        removePartialDownload(for: source)
        var removed = 0
        for key in [source.original] + (try await variants(of: source)) where try await storage.removeValue(forKey: key) {
            removed += 1
        }
        return removed
    }

    /// Removes every image from `tiers` (and, with the disk, the bytes kept of interrupted
    /// downloads).
    ///
    /// - Parameter tiers: The tiers to clear; defaults to every tier.
    /// - Returns: The entries each cleared tier held when the clear began, expired ones included.
    /// - Throws: `StorageError` with code `invalidInput` when `tiers` names no tier the cache has
    ///   (the disk of a memory-only cache), or the tiers' errors.
    @discardableResult
    public func removeAll(tiers: StorageTiers = .all) async throws -> [StorageTier: Int] {
        if tiers.contains(.disk) { removeAllPartialDownloads() }
        return try await storage.removeAll(tiers: tiers)
    }

    // MARK: - Helpers

    /// The cache's clock: the configuration's, else the system's.
    func now() -> Date {
        configuration.now?() ?? Date()
    }

    /// Reports through the configuration's log handler, else the disk's.
    func log(_ message: String) {
        (configuration.logHandler ?? configuration.disk.logHandler)?(message)
    }
}

/// Set by the operation a caller started in the coalescer, so the caller can tell whether it
/// made the read itself or joined another caller's.
final class LeaderMark: Sendable {
    private let marked = Atomic<Bool>(false)

    func mark() { marked.store(true, ordering: .relaxed) }

    /// Read after the coalescer returned, which orders it after the operation's `mark()`.
    var isMarked: Bool { marked.load(ordering: .relaxed) }
}

extension ImageCache {
    /// Where the bytes of a missing image come from.
    enum FetchSource: Sendable {
        case closure(@Sendable (ImageKey) async throws -> FetchedBytes)
        case fetcher(HTTPImageFetcher, FetchOptions)
        case none

        /// Whether a stale image for `key` can be revalidated (or downloaded again) from here.
        func canRevalidate(_ key: ImageKey) -> Bool {
            switch self {
            case .closure: return true
            case .fetcher: return key.isOriginal
            case .none: return false
            }
        }
    }

    /// How the cache's fetcher downloads for one request.
    struct FetchOptions: Sendable {
        var headers: [String: String] = [:]
        var priority: FetchPriority = .normal
        var progress: (@Sendable (Int64, Int64?) -> Void)?
    }

    /// Fetched bytes with their validators, whatever the fetch closure returned.
    struct FetchedBytes: Sendable {
        var data: Data
        var entityTag: String? = nil
        var lastModified: String? = nil
        var cacheControl: String? = nil
        var expires: String? = nil
        var date: String? = nil
        var age: String? = nil

        init(data: Data) {
            self.data = data
        }

        init(_ fetched: FetchedImage) {
            data = fetched.data
            entityTag = fetched.entityTag
            lastModified = fetched.lastModified
            cacheControl = fetched.cacheControl
            expires = fetched.expires
            date = fetched.date
            age = fetched.age
        }
    }

    typealias Source = ImageResult.Source
}

