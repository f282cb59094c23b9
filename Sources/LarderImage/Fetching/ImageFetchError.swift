/// Every error ``HTTPImageFetcher`` throws.
///
/// ```swift
/// do {
///     let image = try await fetcher.fetch(url)
/// } catch ImageFetchError.badStatus(let code) where code == 404 {
///     showPlaceholder()
/// }
/// ```
public enum ImageFetchError: Error, Equatable, CustomStringConvertible {
    /// The server answered with a status code outside 200–299.
    case badStatus(code: Int)
    /// The response is not an image: a non-image `Content-Type`, an empty body, bytes that no
    /// known ``ImageFormat`` signature matches, or a body longer than `Content-Length`.
    case invalidContent(reason: String)
    /// The body ended before the `Content-Length` the server announced.
    case truncated(expected: Int64, received: Int64)
    /// The request took longer than the configured timeout.
    case timedOut
    /// The URL failed recently with `underlying` (a 4xx status or content that is not an image)
    /// and the fetcher refused to try again before the failure expired.
    indirect case recentlyFailed(underlying: ImageFetchError)
    /// The origin (scheme, host and port) failed several requests in a row (connection refused,
    /// timeouts) and its circuit breaker is open: the fetcher fails at once instead of waiting on
    /// it, and lets one request through to test it after a short cooldown. `host` names the
    /// origin's host and port (`"example.com:8080"`); another port of the same host has a
    /// breaker of its own.
    case hostUnavailable(host: String)
    /// The request could not be made on this side: the URL is not an absolute `http` or `https`
    /// URL with a host, or the URL loading system refused it as bad or unsupported. A local
    /// failure: never retried, remembered or counted against the origin.
    case invalidRequest(reason: String)
    /// The calling task was cancelled.
    case cancelled
    /// The transport failed (connection refused, DNS, TLS, …); the message says how.
    case transport(String)

    public var description: String {
        switch self {
        case let .badStatus(code): return "The server answered with HTTP status \(code)"
        case let .invalidContent(reason): return "The response is not a usable image: \(reason)"
        case let .truncated(expected, received):
            return "The body ended after \(received) of \(expected) bytes"
        case .timedOut: return "The request timed out"
        case let .recentlyFailed(underlying): return "The URL failed recently (\(underlying)); not retrying yet"
        case let .hostUnavailable(host): return "The host \(host) failed repeatedly; not trying it until it recovers"
        case let .invalidRequest(reason): return "The request could not be made: \(reason)"
        case .cancelled: return "The request was cancelled"
        case let .transport(message): return "Transport error: \(message)"
        }
    }

    /// Whether another attempt may succeed: the server's failures (transport failures, timeouts,
    /// truncated bodies, 5xx and 429). Never 4xx, content errors, or local failures (an invalid
    /// request, cancellation).
    var isRetryable: Bool {
        switch self {
        case let .badStatus(code): return code == 429 || (500...599).contains(code)
        case .transport, .timedOut, .truncated: return true
        case .invalidContent, .recentlyFailed, .hostUnavailable, .cancelled, .invalidRequest: return false
        }
    }

    /// Whether the failure says something about the URL itself, worth remembering: a 4xx status
    /// (but 408 and 429, which are about timing) or content that is not an image. Transport
    /// errors, timeouts and 5xx say something about the host; the circuit breaker handles them.
    var isWorthRemembering: Bool {
        switch self {
        case let .badStatus(code): return (400...499).contains(code) && code != 408 && code != 429
        case .invalidContent: return true
        default: return false
        }
    }

    /// Whether the failure counts against the origin's circuit breaker: it could not be reached,
    /// reset the connection or did not answer in time. A 5xx or 429 is an answer (retried, with
    /// its `Retry-After`), and local failures say nothing about the server.
    var isHostFailure: Bool {
        switch self {
        case .transport, .timedOut: return true
        default: return false
        }
    }
}
