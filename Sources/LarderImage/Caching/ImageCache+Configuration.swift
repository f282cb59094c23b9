public import Foundation
public import Larder

extension ImageCache {
    /// The settings of an ``ImageCache``: its memory tier, an optional disk directory, the
    /// processors that make variants, and how many prefetches run at once.
    ///
    /// ```swift
    /// var configuration = ImageCache.Configuration(directory: cachesURL.appendingPathComponent("images"))
    /// configuration.memory.costLimit = 200 << 20          // decoded bytes, not file bytes
    /// configuration.disk.sizeLimit = 1 << 30
    /// configuration.maximumConcurrentPrefetches = 6
    /// configuration.processors = [.resize { image, key in try scale(image.data, to: key.targetSize!) }]
    /// let cache = try ImageCache(configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The memory tier's configuration. A `nil` `MemoryStore/Configuration/cost` means
        /// ``ImageMetadata/memoryCost``: the decoded size when the header gives it, else the byte
        /// count. Defaults to `MemoryStore.Configuration()` (100 MiB of cost, no count limit).
        public var memory: MemoryStore<ImageKey, CachedImage>.Configuration
        /// The directory of the disk tier; `nil` makes a memory-only cache. Defaults to `nil`.
        public var directory: URL?
        /// The disk tier's configuration, used when ``directory`` is set. Defaults to
        /// `DiskStore.Configuration()` with `compression` `.gzip(level: 6)`: only formats that
        /// are not already compressed (SVG, BMP, TIFF, ICO, PDF) are gzipped.
        public var disk: DiskStore.Configuration
        /// The most images ``ImageCache/prefetch(_:fetch:)-(_,(ImageKey)->Data)`` loads at once,
        /// across every prefetch batch. Must be positive. Defaults to 4.
        public var maximumConcurrentPrefetches: Int
        /// Whether bytes must be a complete file of their format before they are cached (see
        /// `ImageFormat.isComplete(_:)`): a truncated download is refused, never cached.
        /// `false` checks only the signature and header. Defaults to `true`.
        public var requiresCompleteImages: Bool
        /// How long a downloaded image stays cached: from the response's `Cache-Control`,
        /// `Expires`, `Date` and `Age` within bounds (the default: 1 minute to 30 days, 1 day
        /// when the response says nothing), or a fixed expiry (``ImageFreshness/fixed(_:)``).
        public var freshness: ImageFreshness
        /// Processors that make missing variants from cached originals; a later one replaces an
        /// earlier one with the same identifier. More can be added with
        /// ``ImageCache/register(_:)``. Defaults to none.
        public var processors: [ImageProcessor]
        /// The clock of every tier, set once here (see `Storage.Configuration.now`). Defaults to
        /// `nil`: each tier keeps its own configuration's clock.
        public var now: (@Sendable () -> Date)?
        /// Where the cache and every tier report what they recover from (see
        /// `Storage.Configuration.logHandler`). Defaults to `nil`: the disk's own handler.
        public var logHandler: (@Sendable (String) -> Void)?

        /// Creates a configuration; every parameter has the default documented on its property.
        public init(
            memory: MemoryStore<ImageKey, CachedImage>.Configuration = .init(),
            directory: URL? = nil,
            disk: DiskStore.Configuration = .init(compression: .gzip(level: 6)),
            maximumConcurrentPrefetches: Int = 4,
            requiresCompleteImages: Bool = true,
            freshness: ImageFreshness = .fromResponse(),
            processors: [ImageProcessor] = [],
            now: (@Sendable () -> Date)? = nil,
            logHandler: (@Sendable (String) -> Void)? = nil
        ) {
            self.now = now
            self.requiresCompleteImages = requiresCompleteImages
            self.freshness = freshness
            self.logHandler = logHandler
            self.memory = memory
            self.directory = directory
            self.disk = disk
            self.maximumConcurrentPrefetches = maximumConcurrentPrefetches
            self.processors = processors
        }
    }

    /// What one prefetch batch did with its keys.
    ///
    /// Every key is counted exactly once: `loaded + skipped + failed + cancelled == keys.count`.
    ///
    /// ```swift
    /// let summary = await cache.prefetch(keys) { try await download($0) }.value
    /// print(summary.loaded, summary.skipped)
    /// ```
    public struct PrefetchSummary: Sendable, Hashable {
        /// Keys that were loaded into the cache (fetched or processed).
        public var loaded = 0
        /// Keys that were already cached, so nothing was done.
        public var skipped = 0
        /// Keys whose load failed (the error is dropped; prefetching is best effort).
        public var failed = 0
        /// Keys left unloaded because the batch was cancelled.
        public var cancelled = 0

        /// Creates a summary with every count at zero.
        public init() {}
    }
}
