public import Foundation

extension HTTPImageFetcher {
    /// How an ``HTTPImageFetcher`` downloads: timeouts, retries, concurrency and failure memory.
    ///
    /// ```swift
    /// let fetcher = HTTPImageFetcher {
    ///     $0.timeout = .seconds(10)
    ///     $0.maximumAttempts = 2
    ///     $0.maximumConcurrentDownloads = 4
    /// }
    /// ```
    public struct Configuration: Sendable {
        /// The longest the fetcher waits for the next bytes of a request. Defaults to 30 seconds.
        ///
        /// - Important: On Linux, FoundationNetworking's `URLSession` works in whole seconds and
        ///   times out at once for a value below one second (checked with Swift 6.3.1), so the
        ///   fetcher rounds the timeout up to whole seconds.
        public var timeout: Duration

        /// The most attempts per fetch, the first included. Defaults to 3.
        ///
        /// Transport errors, timeouts, truncated bodies, 5xx and 429 are retried; 4xx and
        /// content errors are not.
        public var maximumAttempts: Int

        /// The wait before the second attempt; it doubles before each further one. Defaults to 0.5 seconds.
        public var retryDelay: Duration

        /// The most downloads in flight at once, across all callers. Defaults to 6.
        public var maximumConcurrentDownloads: Int

        /// How long a URL whose fetch failed fails fast with ``ImageFetchError/recentlyFailed``.
        /// Defaults to 30 seconds; `.zero` turns the memory off.
        public var failureMemoryDuration: Duration

        /// The largest body accepted, in bytes; a larger one is cancelled. Defaults to 50 MB.
        public var maximumBodySize: Int64

        /// Header fields added to every request (for example `User-Agent`). Defaults to none.
        public var additionalHeaders: [String: String]

        /// The clock for the failure memory. Defaults to `Date.init`; tests inject their own.
        public var now: @Sendable () -> Date

        /// Creates a configuration; every parameter has the default its property documents.
        ///
        /// - Precondition: `maximumAttempts` and `maximumConcurrentDownloads` are at least 1,
        ///   the durations are not negative and `timeout` and `maximumBodySize` are positive.
        public init(
            timeout: Duration = .seconds(30),
            maximumAttempts: Int = 3,
            retryDelay: Duration = .milliseconds(500),
            maximumConcurrentDownloads: Int = 6,
            failureMemoryDuration: Duration = .seconds(30),
            maximumBodySize: Int64 = 50_000_000,
            additionalHeaders: [String: String] = [:],
            now: @escaping @Sendable () -> Date = Date.init
        ) {
            self.timeout = timeout
            self.maximumAttempts = maximumAttempts
            self.retryDelay = retryDelay
            self.maximumConcurrentDownloads = maximumConcurrentDownloads
            self.failureMemoryDuration = failureMemoryDuration
            self.maximumBodySize = maximumBodySize
            self.additionalHeaders = additionalHeaders
            self.now = now
        }

        func validate() {
            precondition(maximumAttempts >= 1, "maximumAttempts must be at least 1")
            precondition(maximumConcurrentDownloads >= 1, "maximumConcurrentDownloads must be at least 1")
            precondition(timeout > .zero, "timeout must be positive")
            precondition(retryDelay >= .zero && failureMemoryDuration >= .zero, "durations must not be negative")
            precondition(maximumBodySize > 0, "maximumBodySize must be positive")
        }
    }
}

extension Duration {
    /// The duration rounded up to whole seconds, at least one: what FoundationNetworking honours.
    var wholeSecondsTimeInterval: TimeInterval {
        Swift.max(1, timeInterval.rounded(.up))
    }

    /// The duration in seconds, for Foundation APIs.
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
