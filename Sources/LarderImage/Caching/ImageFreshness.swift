import Foundation
public import Larder

/// How long a downloaded image stays fresh in an ``ImageCache``: from the response's
/// `Cache-Control`, `Expires`, `Date` and `Age` (RFC 9111, as a private cache), within bounds,
/// or a fixed lifetime that ignores the server.
///
/// ```swift
/// let cache = try ImageCache(fetcher: HTTPImageFetcher()) {
///     $0.freshness = .fromResponse(minimum: .seconds(60), maximum: .seconds(7 * 86_400))
///     // or: $0.freshness = .fixed(.seconds(3_600))
/// }
/// ```
///
/// `no-store` keeps the image out of every tier (it is still returned). A fresh image is used
/// as it is; a stale one is revalidated before use (see ``ImageCache``): with `If-None-Match` /
/// `If-Modified-Since` when it has an `ETag` or `Last-Modified` (a `304` refreshes its lifetime
/// without transferring or rewriting the bytes), else by downloading it again. `no-cache` and
/// `max-age=0` make it stale at once, so it is revalidated at every use (without a validator
/// or a stale window it is not stored at all); `immutable` gives it the maximum lifetime.
/// `stale-while-revalidate=N` lets the stale image be returned at once for N seconds while one
/// revalidation runs in the background; `stale-if-error=N` lets it be returned for N seconds
/// when revalidation fails with a transport error or a 5xx (`must-revalidate` and `no-cache`
/// forbid both). A response that says nothing gets the default lifetime.
public struct ImageFreshness: Sendable, Hashable {
    enum Rule: Sendable, Hashable {
        case fromResponse(minimum: Duration, maximum: Duration, default: Duration, staleRetention: Duration)
        case fixed(Expiry?)
    }

    let rule: Rule

    /// Lifetimes from the response, clamped to `minimum...maximum`, `default` when the
    /// response says nothing. Defaults: 1 minute, 30 days, 1 day.
    ///
    /// - Parameter staleRetention: How long a stale image with an `ETag` or `Last-Modified` is
    ///   kept to be revalidated (a `304` costs no body) rather than downloaded again. Defaults
    ///   to 7 days.
    public static func fromResponse(
        minimum: Duration = .seconds(60), maximum: Duration = .seconds(30 * 86_400), default: Duration = .seconds(86_400),
        staleRetention: Duration = .seconds(7 * 86_400)
    ) -> ImageFreshness {
        ImageFreshness(rule: .fromResponse(
            minimum: minimum, maximum: max(minimum, maximum), default: `default`, staleRetention: max(.zero, staleRetention)))
    }

    /// The same expiry for every image, whatever the server says; `nil` takes the tiers' own
    /// default expiry (what the cache did before it read HTTP headers). Images are never
    /// revalidated.
    public static func fixed(_ expiry: Expiry?) -> ImageFreshness {
        ImageFreshness(rule: .fixed(expiry))
    }

    /// How long a response lets the cache keep and use an image.
    struct Lifetime: Equatable {
        /// The tiers' expiry: the end of freshness plus whatever stale use remains possible;
        /// `nil` takes the tiers' default.
        var expiry: Expiry?
        /// The end of freshness; `nil` for a fixed policy (fresh while cached).
        var freshUntil: Date?
        /// The fresh lifetime, reused when a `304` says nothing about it.
        var freshLifetime: Duration?
        var staleWhileRevalidate: Duration = .zero
        var staleIfError: Duration = .zero

        /// `metadata` with this lifetime.
        func applied(to metadata: ImageMetadata) -> ImageMetadata {
            var metadata = metadata
            metadata.freshUntil = freshUntil
            metadata.freshLifetime = freshLifetime
            metadata.staleWhileRevalidate = staleWhileRevalidate
            metadata.staleIfError = staleIfError
            return metadata
        }
    }

    /// What a response's headers decide for the cache.
    enum Decision: Equatable {
        /// Store for this lifetime.
        case store(Lifetime)
        /// Do not store (`no-store`, or no fresh lifetime, validator or stale window at all).
        case skip
    }

    /// The decision for a response with these headers, received at `now`.
    ///
    /// - Parameters:
    ///   - hasValidator: Whether the response has an `ETag` or `Last-Modified`, so a stale
    ///     image can be revalidated without a download.
    ///   - previousLifetime: The fresh lifetime of the cached image a `304` confirmed, used
    ///     (with its stale windows) when the response says nothing about freshness.
    func decision(
        cacheControl: String?, expires: String?, date: String?, age: String?, now: Date, hasValidator: Bool = false,
        previous: ImageMetadata? = nil
    ) -> Decision {
        guard case let .fromResponse(minimum, maximum, fallback, staleRetention) = rule else {
            if case let .fixed(expiry) = rule { return .store(Lifetime(expiry: expiry)) }
            return .store(Lifetime(expiry: nil))
        }
        let directives = Self.directives(cacheControl)
        if directives["no-store"] != nil { return .skip }
        let clamp = { (seconds: Double) -> Double in
            seconds > 0 ? min(max(seconds, minimum.timeInterval), maximum.timeInterval) : 0
        }
        let window = { (name: String) -> Duration in
            guard directives["no-cache"] == nil, directives["must-revalidate"] == nil,
                  let seconds = directives[name].flatMap({ $0 }).flatMap(Double.init), seconds > 0 else { return .zero }
            return .seconds(min(seconds, maximum.timeInterval))
        }
        let ageSeconds = age.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }.map { max(0, $0) } ?? 0
        var lifetime: Double
        var staleWhileRevalidate = window("stale-while-revalidate")
        var staleIfError = window("stale-if-error")
        if directives["no-cache"] != nil {
            lifetime = 0
        } else if directives["immutable"] != nil {
            lifetime = maximum.timeInterval
        } else if let maxAge = directives["max-age"].flatMap({ $0 }).flatMap(Double.init) {
            lifetime = clamp(maxAge - ageSeconds)
        } else if let expires {
            // An invalid Expires (such as "0") means already expired.
            if let expiresDate = HTTPImageFetcher.httpDate(expires) {
                let origin = date.flatMap(HTTPImageFetcher.httpDate) ?? now
                lifetime = clamp(expiresDate.timeIntervalSince(origin) - ageSeconds)
            } else {
                lifetime = 0
            }
        } else if let previous, let previousLifetime = previous.freshLifetime, cacheControl == nil {
            // A 304 that says nothing about freshness keeps what the image had.
            lifetime = previousLifetime.timeInterval
            staleWhileRevalidate = previous.staleWhileRevalidate
            staleIfError = previous.staleIfError
        } else {
            lifetime = clamp(fallback.timeInterval)
        }
        guard lifetime > 0 || hasValidator || staleWhileRevalidate > .zero || staleIfError > .zero else { return .skip }
        let freshUntil = now.addingTimeInterval(lifetime)
        let retention = max(staleWhileRevalidate, staleIfError, hasValidator ? staleRetention : .zero)
        return .store(Lifetime(
            expiry: .date(freshUntil.addingTimeInterval(retention.timeInterval)), freshUntil: freshUntil,
            freshLifetime: .seconds(lifetime), staleWhileRevalidate: staleWhileRevalidate, staleIfError: staleIfError))
    }

    /// `Cache-Control` directives by lower-cased name, with their argument when they have one.
    static func directives(_ header: String?) -> [String: String?] {
        var result: [String: String?] = [:]
        for part in (header ?? "").split(separator: ",") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            guard let name = pieces.first?.trimmingCharacters(in: .whitespaces).lowercased(), !name.isEmpty else { continue }
            let value = pieces.count > 1
                ? pieces[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                : nil
            result[name] = value
        }
        return result
    }
}
