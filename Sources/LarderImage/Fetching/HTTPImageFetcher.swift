public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Larder

/// Downloads image bytes over HTTP(S) with timeouts, retries, validation and bounded concurrency.
///
/// Each ``fetch(_:progress:)``:
///
/// 1. fails at once with ``ImageFetchError/invalidRequest(reason:)`` for a URL that is not an
///    absolute `http(s)` URL with a host; requests the URL with its scheme and host lower-cased
///    (every spelling ``ImageKey`` treats as equal reaches the server); fails fast with
///    ``ImageFetchError/recentlyFailed(underlying:)`` if the URL failed with a
///    4xx or non-image content less than ``Configuration/failureMemoryDuration`` ago, and with
///    ``ImageFetchError/hostUnavailable(host:)`` while the origin's circuit breaker is open (one
///    breaker per scheme, host and port);
/// 2. waits for one of ``Configuration/maximumConcurrentDownloads`` permits (an async
///    semaphore: no thread blocks);
/// 3. downloads through `URLSession` (FoundationNetworking on Linux), reporting progress;
/// 4. checks the status (2xx), the length (a body shorter than `Content-Length` is
///    ``ImageFetchError/truncated(expected:received:)``, a longer one invalid), the
///    `Content-Type` when present (`image/*` or one of ``Configuration/genericContentTypes``)
///    and the bytes (``ImageFormat/detect(_:)`` must recognise them);
/// 5. retries transport errors, timeouts, truncation, 5xx and 429 after
///    ``Configuration/retryDelay`` (doubling), or after the `Retry-After` a 429 or 503 asks for
///    (bounded by ``Configuration/maximumRetryAfter``), up to ``Configuration/maximumAttempts``.
///
/// Local failures (an invalid or unsupported URL, cancellation) are never retried, remembered
/// or counted by the breaker. Cancelling the calling task cancels the request in flight and
/// throws ``ImageFetchError/cancelled``.
///
/// ```swift
/// let fetcher = HTTPImageFetcher()
/// let image = try await fetcher.fetch(url) { received, expected in
///     print("\(received) of \(expected.map(String.init) ?? "?") bytes")
/// }
/// print(image.format, image.entityTag ?? "")
/// ```
///
/// - Important: The fetcher owns a `URLSession`; it is invalidated when the fetcher is released.
public final class HTTPImageFetcher: Sendable {
    /// The configuration the fetcher was created with.
    public let configuration: Configuration

    private let session: URLSession
    private let delegate: SessionDelegate
    private let semaphore: AsyncSemaphore

    /// How many downloads wait for a download slot (for tests that order them).
    var queuedDownloadCount: Int {
        get async { await semaphore.waiterCount }
    }
    private let failures: Locked<[String: (error: ImageFetchError, until: Date)]>
    private let breakers: HostBreakers

    /// The most URLs the failure memory holds; the oldest is forgotten first.
    static let failureMemoryCapacity = 1024

    /// Creates a fetcher.
    public init(configuration: Configuration = .init()) {
        configuration.validate()
        self.configuration = configuration
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = configuration.timeout.wholeSecondsTimeInterval
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfiguration.urlCache = nil
        self.delegate = SessionDelegate(maximumBodySize: configuration.maximumBodySize)
        self.session = URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: nil)
        self.semaphore = AsyncSemaphore(permits: configuration.maximumConcurrentDownloads)
        self.failures = Locked([:])
        self.breakers = HostBreakers(
            threshold: configuration.hostFailureThreshold, cooldown: configuration.hostCooldown.timeInterval)
    }

    /// Creates a fetcher, changing the default configuration in `configure` (Nuke style).
    public convenience init(_ configure: (inout Configuration) -> Void) {
        var configuration = Configuration()
        configure(&configuration)
        self.init(configuration: configuration)
    }

    deinit {
        session.invalidateAndCancel()
    }

    /// Downloads and validates the image at `url`.
    ///
    /// - Parameters:
    ///   - url: The image's address, requested as given but for its scheme and host, which
    ///     are lower-cased.
    ///   - headers: Header fields for this request (credentials, for example), on top of the
    ///     configuration's ``Configuration/additionalHeaders``.
    ///   - priority: When the fetcher is at its concurrency bound, waiting downloads start by
    ///     priority, then in arrival order.
    ///   - partialDownloadFile: Where to keep the bytes of a download that is cut off, so that
    ///     the next attempt (of this fetch or of a later one given the same file, after a
    ///     relaunch too) asks only for the rest; `nil` starts every attempt from zero. See the
    ///     discussion.
    ///   - progress: Called as bytes arrive, with the bytes received so far in this attempt and
    ///     the expected total (`Content-Length`) when known. Called on a URLSession queue.
    /// - Returns: The bytes, their format and the response's validators.
    /// - Throws: ``ImageFetchError``, and nothing else.
    ///
    /// ### Resumable downloads
    ///
    /// With a `partialDownloadFile`, a `200` response with a strong `ETag` or a `Last-Modified`
    /// date, a `Content-Length` and no content coding that is cut off (or cancelled) part way
    /// leaves its bytes in the file. The next attempt sends `Range: bytes=<kept>-` and
    /// `If-Range` with that validator: a `206` whose `Content-Range` starts at the bytes kept
    /// (with the same total and validators) continues them, and the assembled body is checked
    /// as any other response (length, type, format) and returned with status `200`; a `200`
    /// (the image changed, or the server ignores ranges) starts from zero; a `416` or a `206`
    /// that does not continue the bytes discards them and asks for the whole image at once.
    /// The file is removed when the fetch succeeds or fails for good (a 4xx, content that is
    /// not an image), and a file that does not read back exactly for this URL is ignored. It
    /// holds at most ``Configuration/maximumBodySize`` bytes. ``ImageCache`` passes a file in
    /// its disk directory for each original it downloads.
    public func fetch(
        _ url: URL,
        headers: [String: String] = [:],
        priority: FetchPriority = .normal,
        partialDownloadFile: URL? = nil,
        progress: (@Sendable (_ received: Int64, _ expected: Int64?) -> Void)? = nil
    ) async throws -> FetchedImage {
        guard case let .modified(image) = try await run(url, headers: headers, priority: priority, progress: progress,
                                                        conditional: false, partialFile: partialDownloadFile)
        else { throw ImageFetchError.badStatus(code: 304) }
        return image
    }

    /// Asks whether the image at `url` changed since the validators a cached copy came with:
    /// a conditional request with `If-None-Match` (the `ETag`) and `If-Modified-Since` (the
    /// `Last-Modified` date).
    ///
    /// A `304 Not Modified` returns ``ImageRevalidation/notModified(_:)`` with the answer's
    /// header fields (no body is transferred); a `200` returns the new image, validated as
    /// ``fetch(_:headers:priority:partialDownloadFile:progress:)`` validates one. Without either validator the
    /// request is unconditional. Retries, the failure memory and the circuit breaker work as
    /// for ``fetch(_:headers:priority:partialDownloadFile:progress:)``.
    ///
    /// ```swift
    /// let outcome = try await fetcher.revalidate(url, entityTag: "\"v1\"", lastModified: nil)
    /// ```
    ///
    /// - Throws: ``ImageFetchError``, and nothing else.
    public func revalidate(
        _ url: URL,
        entityTag: String?,
        lastModified: String?,
        headers: [String: String] = [:],
        priority: FetchPriority = .normal,
        progress: (@Sendable (_ received: Int64, _ expected: Int64?) -> Void)? = nil
    ) async throws -> ImageRevalidation {
        var headers = headers
        if let entityTag { headers["If-None-Match"] = entityTag }
        if let lastModified { headers["If-Modified-Since"] = lastModified }
        return try await run(url, headers: headers, priority: priority, progress: progress,
                             conditional: entityTag != nil || lastModified != nil)
    }

    /// One fetch with its retries; a `304` is an answer only for a `conditional` request.
    private func run(
        _ url: URL, headers: [String: String], priority: FetchPriority,
        progress: (@Sendable (Int64, Int64?) -> Void)?, conditional: Bool, partialFile: URL? = nil
    ) async throws -> ImageRevalidation {
        // A URL that cannot be requested fails here, before the failure memory and the breaker:
        // it says nothing about the server.
        guard let target = Self.requestURL(for: url), let origin = Origin(target) else {
            throw ImageFetchError.invalidRequest(reason: "\(url.absoluteString) is not an absolute http(s) URL with a host")
        }
        let key = target.absoluteString
        if let failure = recentFailure(key) { throw ImageFetchError.recentlyFailed(underlying: failure) }
        let host = origin.key
        let admission = breakers.admit(host, now: configuration.now())
        if admission == .reject { throw ImageFetchError.hostUnavailable(host: origin.authority) }
        var request = URLRequest(url: target)
        request.timeoutInterval = configuration.timeout.wholeSecondsTimeInterval
        request.setValue("image/*, application/octet-stream;q=0.8", forHTTPHeaderField: "Accept")
        for (field, value) in configuration.additionalHeaders { request.setValue(value, forHTTPHeaderField: field) }
        for (field, value) in headers { request.setValue(value, forHTTPHeaderField: field) }
        // A caller that sets its own range gets exactly what it asked for.
        let partialFile = request.value(forHTTPHeaderField: "Range") == nil ? partialFile : nil
        var partial = partialFile.flatMap { PartialDownload.read(from: $0, url: key) }

        var delay = configuration.retryDelay
        var nextDelay: Duration?
        var lastError = ImageFetchError.transport("no attempt was made")
        let attempts = admission == .probe ? 1 : configuration.maximumAttempts
        var attempt = 0
        // A resumption the server could not continue starts over at once, once per fetch,
        // without counting as an attempt.
        var mayRestart = true
        var restarting = false
        attempts: while attempt < attempts {
            if attempt > 0, !restarting {
                let wait = nextDelay ?? delay
                do { try await Task.sleep(for: wait) } catch {
                    if admission == .probe { breakers.abandonedProbe(host) }
                    throw ImageFetchError.cancelled
                }
                delay *= 2
            }
            if !restarting { attempt += 1 }
            restarting = false
            do { try await semaphore.acquire(priority: priority.rawValue) } catch {
                if admission == .probe { breakers.abandonedProbe(host) }
                throw ImageFetchError.cancelled
            }
            var attemptRequest = request
            partial?.addRangeHeaders(to: &attemptRequest)
            let transfer = await perform(attemptRequest, progress: progress)
            await semaphore.release()
            var outcome = transfer.result
            if let partialFile {
                switch resume(transfer, partial: &partial, file: partialFile, url: key) {
                case let .outcome(resumed):
                    outcome = resumed
                case .restart where mayRestart:
                    mayRestart = false
                    restarting = true
                    continue attempts
                case .restart:
                    outcome = .failure(.invalidContent(reason: "the server did not continue the interrupted download"))
                }
            }
            nextDelay = nil
            if case let .success(response) = outcome {
                breakers.answered(host)
                nextDelay = retryAfter(response.response)
            }
            switch outcome.flatMap({ validate($0, conditional: conditional) }) {
            case let .success(image):
                if let partialFile { PartialDownload.remove(partialFile) }
                return image
            case let .failure(error):
                if error == .cancelled || Task.isCancelled {
                    if admission == .probe { breakers.abandonedProbe(host) }
                    throw ImageFetchError.cancelled
                }
                if case .invalidRequest = error {
                    if admission == .probe { breakers.abandonedProbe(host) }
                    throw error
                }
                lastError = error
                if error.isHostFailure, breakers.failed(host, now: configuration.now()) { break attempts }
                if !error.isRetryable { break attempts }
            }
        }
        // Bytes kept for a URL that failed for good (a 4xx, content that is not an image) are
        // of no further use; a server failure keeps them for the next fetch.
        if let partialFile, !lastError.isRetryable { PartialDownload.remove(partialFile) }
        if lastError.isWorthRemembering { rememberFailure(key, lastError) }
        throw lastError
    }

    /// What a resumable download does with one transfer.
    private enum ResumeStep {
        /// Go on with this outcome: a `206` assembled into a complete `200`, or the transfer's own.
        case outcome(Result<DownloadedResponse, ImageFetchError>)
        /// The server did not continue the bytes kept (they are discarded): ask for everything.
        case restart
    }

    /// Applies one transfer to the download kept in `file`: a `206` continues it (and, when
    /// complete, becomes the whole response), a `200` replaces it, a `416` or a `206` that does
    /// not continue it discards it, and a transfer cut off keeps what arrived for next time.
    private func resume(
        _ transfer: Transfer, partial: inout PartialDownload?, file: URL, url: String
    ) -> ResumeStep {
        // The response head and the body as far as it came, whether or not the transfer ended well.
        let received: DownloadedResponse?
        switch transfer.result {
        case let .success(response): received = response
        case .failure: received = transfer.received
        }
        guard let received else { return .outcome(transfer.result) }
        let status = received.response.statusCode
        if let kept = partial {
            if status == 206 {
                guard let continued = kept.continued(by: received) else {
                    PartialDownload.remove(file)
                    partial = nil
                    return .restart
                }
                if case .success = transfer.result {
                    // A complete 206 ends the download; one that ended early is a failure below.
                    guard continued.isComplete, let whole = continued.completeResponse(from: received) else {
                        PartialDownload.remove(file)
                        partial = nil
                        return .outcome(.failure(.truncated(expected: kept.header.total, received: Int64(continued.data.count))))
                    }
                    return .outcome(.success(whole))
                }
                continued.write(to: file)
                partial = continued
                return .outcome(.failure(.truncated(expected: kept.header.total, received: Int64(continued.data.count))))
            }
            if status == 416 {
                PartialDownload.remove(file)
                partial = nil
                return .restart
            }
            if (200...299).contains(status) {
                // The whole image again (it changed, or the server ignores ranges): from zero.
                PartialDownload.remove(file)
                partial = nil
            }
        }
        if case .failure = transfer.result,
           let started = PartialDownload.start(received, url: url, maximumSize: configuration.maximumBodySize) {
            started.write(to: file)
            partial = started
        }
        return .outcome(transfer.result)
    }

    /// Forgets every remembered failure, so each URL is tried again at its next fetch.
    public func forgetFailures() {
        failures.withLock { $0.removeAll() }
    }

    /// Forgets the remembered failure of `url`, if any.
    public func forgetFailure(for url: URL) {
        let key = Self.requestURL(for: url)?.absoluteString ?? url.absoluteString
        failures.withLock { _ = $0.removeValue(forKey: key) }
    }

    /// `url` as it is requested: the scheme and host lower-cased (an internationalised host in
    /// its ASCII, punycode form), everything else as given; `nil` when it is not an absolute
    /// `http` or `https` URL with a host.
    ///
    /// Linux's URL loading refuses a scheme spelled `HTTP` or `Http` as unsupported, and
    /// ``ImageKey`` treats those spellings (and upper-case hosts) as the same image, so every
    /// spelling a key accepts must reach the server.
    static func requestURL(for url: URL) -> URL? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = components.encodedHost, !host.isEmpty
        else { return nil }
        components.scheme = scheme
        components.encodedHost = host.lowercased()
        return components.url
    }

    /// The wait a 429 or 503 answer asks for with `Retry-After` (seconds or an HTTP date),
    /// bounded by ``Configuration/maximumRetryAfter``; `nil` for other answers.
    private func retryAfter(_ response: HTTPURLResponse) -> Duration? {
        guard [429, 503].contains(response.statusCode),
              let value = response.value(forHTTPHeaderField: "Retry-After")?.trimmingCharacters(in: .whitespaces)
        else { return nil }
        let seconds: Double
        if let whole = Int(value), whole >= 0 {
            seconds = Double(whole)
        } else if let date = Self.httpDate(value) {
            seconds = max(0, date.timeIntervalSince(configuration.now()))
        } else {
            return nil
        }
        return min(.milliseconds(Int64((seconds * 1_000).rounded(.up))), configuration.maximumRetryAfter)
    }

    /// An HTTP date (RFC 9110 section 5.6.7: IMF-fixdate, or the obsolete RFC 850 and asctime forms).
    static func httpDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    // MARK: - One attempt

    private func perform(
        _ request: URLRequest,
        progress: (@Sendable (Int64, Int64?) -> Void)?
    ) async -> Transfer {
        let handle = TaskHandle()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let task = session.dataTask(with: request)
                delegate.register(task, progress: progress, continuation: continuation)
                if handle.attach(task) {
                    task.resume()
                } else {
                    delegate.abandon(task, with: Transfer(result: .failure(.cancelled)))
                }
            }
        } onCancel: {
            handle.cancel()
        }
    }

    private func validate(_ response: DownloadedResponse, conditional: Bool) -> Result<ImageRevalidation, ImageFetchError> {
        let http = response.response
        if conditional, http.statusCode == 304 {
            return .success(.notModified(NotModifiedResponse(
                url: http.url ?? response.url, entityTag: http.value(forHTTPHeaderField: "ETag"),
                lastModified: http.value(forHTTPHeaderField: "Last-Modified"),
                cacheControl: http.value(forHTTPHeaderField: "Cache-Control"),
                expires: http.value(forHTTPHeaderField: "Expires"), date: http.value(forHTTPHeaderField: "Date"),
                age: http.value(forHTTPHeaderField: "Age"))))
        }
        guard (200...299).contains(http.statusCode) else { return .failure(.badStatus(code: http.statusCode)) }
        let received = Int64(response.data.count)
        let encoding = http.value(forHTTPHeaderField: "Content-Encoding")?.lowercased()
        if http.expectedContentLength >= 0, encoding == nil || encoding == "identity" {
            if received < http.expectedContentLength {
                return .failure(.truncated(expected: http.expectedContentLength, received: received))
            }
            if received > http.expectedContentLength {
                return .failure(.invalidContent(reason: "body of \(received) bytes is longer than Content-Length \(http.expectedContentLength)"))
            }
        }
        let contentType = http.value(forHTTPHeaderField: "Content-Type")
        if let contentType {
            let mime = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            guard mime.hasPrefix("image/") || configuration.genericContentTypes.contains(mime) else {
                return .failure(.invalidContent(reason: "Content-Type \(contentType) is not an image"))
            }
        }
        guard !response.data.isEmpty else { return .failure(.invalidContent(reason: "the body is empty")) }
        guard let format = ImageFormat.detect(response.data) else {
            return .failure(.invalidContent(reason: "the bytes match no known image format"))
        }
        return .success(.modified(FetchedImage(
            data: response.data, format: format, url: http.url ?? response.url, statusCode: http.statusCode,
            entityTag: http.value(forHTTPHeaderField: "ETag"),
            lastModified: http.value(forHTTPHeaderField: "Last-Modified"), contentType: contentType,
            cacheControl: http.value(forHTTPHeaderField: "Cache-Control"),
            expires: http.value(forHTTPHeaderField: "Expires"), date: http.value(forHTTPHeaderField: "Date"),
            age: http.value(forHTTPHeaderField: "Age")
        )))
    }

    // MARK: - Failure memory

    private func recentFailure(_ key: String) -> ImageFetchError? {
        guard configuration.failureMemoryDuration > .zero else { return nil }
        let now = configuration.now()
        return failures.withLock { failures in
            guard let failure = failures[key] else { return nil }
            if failure.until > now { return failure.error }
            failures[key] = nil
            return nil
        }
    }

    private func rememberFailure(_ key: String, _ error: ImageFetchError) {
        guard configuration.failureMemoryDuration > .zero else { return }
        let now = configuration.now()
        let until = now.addingTimeInterval(configuration.failureMemoryDuration.timeInterval)
        failures.withLock { failures in
            if failures.count >= Self.failureMemoryCapacity {
                failures = failures.filter { $0.value.until > now }
                while failures.count >= Self.failureMemoryCapacity,
                      let oldest = failures.min(by: { $0.value.until < $1.value.until }) {
                    failures[oldest.key] = nil
                }
            }
            failures[key] = (error, until)
        }
    }
}

/// Where a request goes, for the circuit breaker: scheme, host and port (the default port of
/// the scheme when the URL names none), so a dead port never blocks a live one on the same host.
struct Origin: Hashable, Sendable {
    var scheme: String
    var host: String
    var port: Int

    /// The origin of a URL from ``HTTPImageFetcher/requestURL(for:)``.
    init?(_ url: URL) {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
              let scheme = components.scheme?.lowercased(), let host = components.encodedHost?.lowercased()
        else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
    }

    /// `host:port`, as ``ImageFetchError/hostUnavailable(host:)`` names it.
    var authority: String { "\(host):\(port)" }

    /// The breaker's key.
    var key: String { "\(scheme)://\(authority)" }
}

// MARK: - URLSession plumbing

/// A completed transfer: the body and the response head.
struct DownloadedResponse: Sendable {
    var data: Data
    var response: HTTPURLResponse
    var url: URL
}

/// How one transfer ended, with what arrived before a failure (the response head and the body
/// so far), which a resumable download keeps.
struct Transfer: Sendable {
    var result: Result<DownloadedResponse, ImageFetchError>
    var received: DownloadedResponse? = nil
}

/// Links a task to the Swift task that awaits it, so cancellation that races task creation
/// still cancels the request.
private final class TaskHandle: Sendable {
    private let state = Locked<(task: URLSessionDataTask?, isCancelled: Bool)>((nil, false))

    /// Stores `task`; returns `false` when cancellation already happened.
    func attach(_ task: URLSessionDataTask) -> Bool {
        state.withLock { state in
            if state.isCancelled { return false }
            state.task = task
            return true
        }
    }

    func cancel() {
        let task = state.withLock { state in
            state.isCancelled = true
            return state.task
        }
        task?.cancel()
    }
}

/// The session delegate: collects each task's bytes, reports progress and resumes its waiter.
///
/// `@unchecked Sendable` because it inherits from `NSObject`; its only mutable state is the
/// table of transfers inside a `Locked`, and no lock is held while calling out.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private struct Progress {
        var continuation: CheckedContinuation<Transfer, Never>
        var progress: (@Sendable (Int64, Int64?) -> Void)?
        var data = Data()
        var response: HTTPURLResponse?
        var rejection: ImageFetchError?
    }

    private let transfers = Locked<[Int: Progress]>([:])
    private let maximumBodySize: Int64

    init(maximumBodySize: Int64) {
        self.maximumBodySize = maximumBodySize
    }

    func register(_ task: URLSessionDataTask, progress: (@Sendable (Int64, Int64?) -> Void)?,
                  continuation: CheckedContinuation<Transfer, Never>) {
        transfers.withLock { $0[task.taskIdentifier] = Progress(continuation: continuation, progress: progress) }
    }

    /// Resumes the waiter of a task that was never started.
    func abandon(_ task: URLSessionDataTask, with result: Transfer) {
        transfers.withLock { $0.removeValue(forKey: task.taskIdentifier) }?.continuation.resume(returning: result)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        transfers.withLock { $0[dataTask.taskIdentifier]?.response = response as? HTTPURLResponse }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let report = transfers.withLock { transfers -> (progress: (@Sendable (Int64, Int64?) -> Void)?, received: Int64, expected: Int64?)? in
            guard var transfer = transfers[dataTask.taskIdentifier] else { return nil }
            transfer.data.append(data)
            let received = Int64(transfer.data.count)
            if received > maximumBodySize {
                transfer.rejection = .invalidContent(reason: "the body exceeds \(maximumBodySize) bytes")
            }
            transfers[dataTask.taskIdentifier] = transfer
            let expected = transfer.response.map(\.expectedContentLength).flatMap { $0 >= 0 ? $0 : nil }
            return (transfer.progress, received, expected)
        }
        guard let report else { return }
        if report.received > maximumBodySize {
            dataTask.cancel()
            return
        }
        report.progress?(report.received, report.expected)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        transfer.continuation.resume(returning: Self.outcome(of: transfer, task: task, error: error))
    }

    private static func outcome(of transfer: Progress, task: URLSessionTask, error: (any Error)?) -> Transfer {
        let response = transfer.response ?? task.response as? HTTPURLResponse
        let received = response.map { response in
            DownloadedResponse(data: transfer.data, response: response,
                               url: task.originalRequest?.url ?? response.url ?? URL(fileURLWithPath: "/"))
        }
        if let failure = failure(of: transfer, error: error) { return Transfer(result: .failure(failure), received: received) }
        guard let received else { return Transfer(result: .failure(.transport("the response is not HTTP"))) }
        return Transfer(result: .success(received))
    }

    /// The failure a transfer ended with, or `nil` when it ended well.
    private static func failure(of transfer: Progress, error: (any Error)?) -> ImageFetchError? {
        if let rejection = transfer.rejection { return rejection }
        guard let error else { return nil }
        let received = Int64(transfer.data.count)
        let nsError = error as NSError
        if nsError.domain == NSURLErrorDomain {
            switch nsError.code {
            case NSURLErrorCancelled: return .cancelled
            case NSURLErrorTimedOut: return .timedOut
            // Refused on this side before anything reached the server.
            case NSURLErrorBadURL, NSURLErrorUnsupportedURL: return .invalidRequest(reason: describe(nsError))
            default: break
            }
        }
        // A body cut short surfaces as a transport error; the response head tells how short.
        if let expected = transfer.response?.expectedContentLength, expected >= 0, received < expected {
            return .truncated(expected: expected, received: received)
        }
        return .transport(describe(nsError))
    }

    /// The most specific message in an `NSError` (FoundationNetworking often leaves the
    /// description of the outer error empty and puts the message in the underlying one).
    private static func describe(_ error: NSError) -> String {
        if let message = error.userInfo[NSLocalizedDescriptionKey] as? String { return message }
        if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError,
           let message = underlying.userInfo[NSLocalizedDescriptionKey] as? String {
            return message
        }
        return "\(error.domain) \(error.code)"
    }
}
