public import Foundation
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
/// `no-store` keeps the image out of every tier (it is still returned); `no-cache` and
/// `max-age=0` give it no fresh lifetime, so it is downloaded again at the next request;
/// `immutable` gives it the maximum. A response that says nothing gets the default.
public struct ImageFreshness: Sendable, Hashable {
    enum Rule: Sendable, Hashable {
        case fromResponse(minimum: Duration, maximum: Duration, default: Duration)
        case fixed(Expiry?)
    }

    let rule: Rule

    /// Lifetimes from the response, clamped to `minimum...maximum`, `default` when the
    /// response says nothing. Defaults: 1 minute, 30 days, 1 day.
    public static func fromResponse(
        minimum: Duration = .seconds(60), maximum: Duration = .seconds(30 * 86_400), default: Duration = .seconds(86_400)
    ) -> ImageFreshness {
        ImageFreshness(rule: .fromResponse(minimum: minimum, maximum: max(minimum, maximum), default: `default`))
    }

    /// The same expiry for every image, whatever the server says; `nil` takes the tiers' own
    /// default expiry (what the cache did before it read HTTP headers).
    public static func fixed(_ expiry: Expiry?) -> ImageFreshness {
        ImageFreshness(rule: .fixed(expiry))
    }

    /// What a response's headers decide for the cache.
    enum Decision: Equatable {
        /// Store with this expiry (`nil`: the tiers' default).
        case store(Expiry?)
        /// Do not store (`no-store`, or no fresh lifetime at all).
        case skip
    }

    /// The decision for a response with these headers, received at `now`.
    func decision(cacheControl: String?, expires: String?, date: String?, age: String?, now: Date) -> Decision {
        guard case let .fromResponse(minimum, maximum, fallback) = rule else {
            if case let .fixed(expiry) = rule { return .store(expiry) }
            return .store(nil)
        }
        let directives = Self.directives(cacheControl)
        if directives["no-store"] != nil { return .skip }
        if directives["no-cache"] != nil { return .skip }
        let clamp = { (seconds: Double) -> Decision in
            guard seconds > 0 else { return .skip }
            let bounded = min(max(seconds, minimum.timeInterval), maximum.timeInterval)
            return .store(.seconds(bounded))
        }
        if directives["immutable"] != nil { return .store(.seconds(maximum.timeInterval)) }
        let ageSeconds = age.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }.map { max(0, $0) } ?? 0
        if let maxAge = directives["max-age"].flatMap({ $0 }).flatMap(Double.init) {
            return clamp(maxAge - ageSeconds)
        }
        if let expires {
            // An invalid Expires (such as "0") means already expired.
            guard let expiresDate = HTTPImageFetcher.httpDate(expires) else { return .skip }
            let origin = date.flatMap(HTTPImageFetcher.httpDate) ?? now
            return clamp(expiresDate.timeIntervalSince(origin) - ageSeconds)
        }
        return .store(.seconds(min(max(fallback.timeInterval, minimum.timeInterval), maximum.timeInterval)))
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
