import Foundation
import Larder

// Stale images: conditional requests, 304 refreshes in place, stale-while-revalidate in the
// background (through the cache's one coalescer) and stale-if-error.
extension ImageCache {
    /// Revalidates a stale `image` held by `tier`: a conditional request when it has a
    /// validator and the cache's fetcher is used, else a download. A `304` refreshes it in
    /// place; a new image replaces it; a transport error or 5xx within its `stale-if-error`
    /// window returns it as it is.
    func revalidate(
        _ image: CachedImage, from tier: Source, forKey key: ImageKey, source: FetchSource
    ) async throws -> ImageResult {
        do {
            switch source {
            case let .fetcher(fetcher, options):
                let url = try Self.url(of: key)
                let metadata = image.metadata
                guard metadata.entityTag != nil || metadata.lastModified != nil else {
                    counters.countDownload()
                    let fetched = try await fetcher.fetch(
                        url, headers: options.headers, priority: options.priority, progress: options.progress)
                    return try await storeDownloaded(FetchedBytes(fetched), for: key, replacing: true)
                }
                counters.countRevalidation()
                switch try await fetcher.revalidate(
                    url, entityTag: metadata.entityTag, lastModified: metadata.lastModified, headers: options.headers,
                    priority: options.priority, progress: options.progress) {
                case let .notModified(response):
                    return try await refresh(image, from: tier, forKey: key, with: response)
                case let .modified(fetched):
                    return try await storeDownloaded(FetchedBytes(fetched), for: key, replacing: true)
                }
            case let .closure(fetch):
                counters.countDownload()
                return try await storeDownloaded(try await fetch(key), for: key, replacing: true)
            case .none:
                throw ImageCacheError.noFetcher
            }
        } catch where Self.allowsStale(after: error) && image.metadata.allowsStaleIfError(at: now()) {
            log("image \(key) served stale after revalidation failed: \(error)")
            return ImageResult(image: image, source: tier, freshness: .staleIfError)
        }
    }

    /// Applies a `304`'s header fields: new lifetime and validators, written to the disk's index
    /// row and memory's copy without rewriting the bytes (nor the blob file).
    private func refresh(
        _ image: CachedImage, from tier: Source, forKey key: ImageKey, with response: NotModifiedResponse
    ) async throws -> ImageResult {
        var metadata = image.metadata
        metadata.entityTag = response.entityTag ?? metadata.entityTag
        metadata.lastModified = response.lastModified ?? metadata.lastModified
        let decision = configuration.freshness.decision(
            cacheControl: response.cacheControl, expires: response.expires, date: response.date, age: response.age,
            now: now(), hasValidator: true, previous: image.metadata)
        guard case let .store(lifetime) = decision, let expiry = lifetime.expiry else {
            // The answer forbids storing (no-store): the bytes are current, but are not kept.
            _ = try await storage.removeValue(forKey: key)
            return ImageResult(image: CachedImage(checkedData: image.data, metadata: metadata), source: tier,
                               freshness: .revalidated)
        }
        let refreshed = CachedImage(checkedData: image.data, metadata: lifetime.applied(to: metadata))
        do {
            try await storage.refresh(
                forKey: key, expiry: expiry, metadata: FreshnessRecord(refreshed.metadata).encoded(), value: refreshed)
        } catch {
            log("image \(key) revalidated but its new lifetime was not stored: \(error)")
        }
        return ImageResult(image: refreshed, source: tier, freshness: .revalidated)
    }

    /// Starts one revalidation of `key` in the background, unless a load of it is in flight
    /// already. It goes through the cache's coalescer, so callers that arrive meanwhile join
    /// it, and it first checks whether another revalidation has just refreshed the image.
    ///
    /// The request carries the caller's headers at ``FetchPriority/low`` (behind images being
    /// waited for) and without its progress closure: the caller has its image already.
    func revalidateInBackground(_ key: ImageKey, from source: FetchSource) {
        guard loads.waiterCount(for: key) == 0 else { return }
        var source = source
        if case let .fetcher(fetcher, options) = source {
            source = .fetcher(fetcher, FetchOptions(headers: options.headers, priority: .low, progress: nil))
        }
        Task { [source] in
            do {
                _ = try await loads.value(for: key) { try await self.resolve(key, from: source, inBackground: true) }
            } catch {
                log("background revalidation of image \(key) failed: \(error)")
            }
        }
    }

    /// `entry`'s image with the lifetime and validators a `304` gave it, when the copy read is
    /// stale and the disk's index row holds newer ones (a refresh changes the row, not the
    /// frame in the blob). Memory then takes the corrected copy.
    func current(_ entry: Storage<ImageKey, CachedImage>.Entry, forKey key: ImageKey, now: Date) async throws -> CachedImage {
        let image = entry.value
        guard !image.metadata.isFresh(at: now), storage.disk != nil,
              let record = FreshnessRecord(decoding: try await storage.metadata(forKey: key, tiers: .disk))
        else { return image }
        let metadata = record.applied(to: image.metadata)
        guard metadata != image.metadata else { return image }
        let corrected = CachedImage(checkedData: image.data, metadata: metadata)
        _ = try? await storage.refresh(
            forKey: key, expiry: entry.expirationDate.map(Expiry.date) ?? .never, metadata: nil, value: corrected,
            tiers: .memory)
        return corrected
    }

    /// Whether a failed revalidation may fall back to the stale image (`stale-if-error`): a
    /// transport error, a timeout, a cut-short body, an unavailable host or a 5xx; never a
    /// 4xx, content that is not an image, or cancellation. An error of a fetch closure that is
    /// not an ``ImageFetchError`` counts as a transport error.
    static func allowsStale(after error: any Error) -> Bool {
        switch error {
        case let error as ImageFetchError:
            switch error {
            case let .badStatus(code): return (500...599).contains(code)
            case .transport, .timedOut, .truncated, .hostUnavailable: return true
            case let .recentlyFailed(underlying): return allowsStale(after: underlying)
            case .invalidContent, .cancelled, .invalidRequest: return false
            }
        case is CancellationError, is ImageCacheError: return false
        default: return true
        }
    }
}

/// The lifetime and validators of a revalidated image, kept in the disk's index row beside the
/// frame (whose own copy is what the image was first stored with): JSON with short keys.
struct FreshnessRecord: Codable, Equatable {
    var e: String?
    var l: String?
    var u: Int64?
    var r: Double
    var x: Double
    var t: Double?

    init(_ metadata: ImageMetadata) {
        e = metadata.entityTag
        l = metadata.lastModified
        u = metadata.freshUntil.map(Self.milliseconds)
        r = metadata.staleWhileRevalidate.timeInterval
        x = metadata.staleIfError.timeInterval
        t = metadata.freshLifetime?.timeInterval
    }

    /// A record read back; `nil` for no bytes or bytes that are not a record.
    init?(decoding data: Data?) {
        guard let data, let record = try? JSONDecoder().decode(FreshnessRecord.self, from: data) else { return nil }
        self = record
    }

    func encoded() -> Data? {
        try? JSONEncoder().encode(self)
    }

    /// `metadata` with this record's lifetime and validators.
    func applied(to metadata: ImageMetadata) -> ImageMetadata {
        var metadata = metadata
        metadata.entityTag = e
        metadata.lastModified = l
        metadata.freshUntil = u.map(Self.date)
        metadata.staleWhileRevalidate = .storedSeconds(r)
        metadata.staleIfError = .storedSeconds(x)
        metadata.freshLifetime = t.map(Duration.storedSeconds)
        return metadata
    }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000).rounded())
    }

    static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
    }
}

extension Duration {
    /// The duration in seconds, or `nil` when it is zero (so a frame leaves the field out).
    var nonZeroSeconds: Double? {
        self == .zero ? nil : timeInterval
    }

    /// Seconds read back from a frame or an index row as a duration: zero for a negative or
    /// non-finite number, at most about 317 years, so damaged bytes never trap.
    static func storedSeconds(_ seconds: Double) -> Duration {
        seconds.isFinite && seconds > 0 ? .seconds(min(seconds, 1e10)) : .zero
    }
}
