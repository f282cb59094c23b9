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

        /// How long a URL whose fetch failed with a 4xx status (but 408 and 429) or content that
        /// is not an image fails fast with ``ImageFetchError/recentlyFailed(underlying:)``.
        /// Transport errors, timeouts and 5xx are not remembered per URL (see
        /// ``hostFailureThreshold``). Defaults to 30 seconds; `.zero` turns the memory off.
        public var failureMemoryDuration: Duration

        /// Generic `Content-Type`s accepted when the bytes sniff as an image, besides `image/*`
        /// and a missing header. Defaults to `application/octet-stream` and `binary/octet-stream`
        /// (S3's default); HTML, JSON and text are refused.
        public var genericContentTypes: Set<String>

        /// The longest a `Retry-After` (seconds or an HTTP date) on a 429 or 503 answer is
        /// waited before the next attempt. Defaults to 60 seconds.
        public var maximumRetryAfter: Duration

        /// Consecutive transport failures or timeouts after which an origin's circuit breaker
        /// opens (one breaker per scheme, host and port): fetches from it fail at once with
        /// ``ImageFetchError/hostUnavailable(host:)``, and after ``hostCooldown`` (doubling to
        /// 30 s while it stays down) one fetch is let through to test it; its success closes the
        /// breaker. Local failures (an invalid URL, cancellation) never count. Defaults to 3; 0
        /// turns it off.
        public var hostFailureThreshold: Int

        /// How long an open breaker waits before it lets one fetch test the host. Defaults to
        /// 1 second.
        public var hostCooldown: Duration

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
            genericContentTypes: Set<String> = ["application/octet-stream", "binary/octet-stream"],
            maximumRetryAfter: Duration = .seconds(60),
            hostFailureThreshold: Int = 3,
            hostCooldown: Duration = .seconds(1),
            maximumBodySize: Int64 = 50_000_000,
            additionalHeaders: [String: String] = [:],
            now: @escaping @Sendable () -> Date = Date.init
        ) {
            self.timeout = timeout
            self.maximumAttempts = maximumAttempts
            self.retryDelay = retryDelay
            self.maximumConcurrentDownloads = maximumConcurrentDownloads
            self.failureMemoryDuration = failureMemoryDuration
            self.genericContentTypes = genericContentTypes
            self.maximumRetryAfter = maximumRetryAfter
            self.hostFailureThreshold = hostFailureThreshold
            self.hostCooldown = hostCooldown
            self.maximumBodySize = maximumBodySize
            self.additionalHeaders = additionalHeaders
            self.now = now
        }

        func validate() {
            precondition(maximumAttempts >= 1, "maximumAttempts must be at least 1")
            precondition(maximumConcurrentDownloads >= 1, "maximumConcurrentDownloads must be at least 1")
            precondition(timeout > .zero, "timeout must be positive")
            precondition(retryDelay >= .zero && failureMemoryDuration >= .zero && maximumRetryAfter >= .zero
                         && hostCooldown >= .zero, "durations must not be negative")
            precondition(hostFailureThreshold >= 0, "hostFailureThreshold must not be negative")
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
