/// How get-or-load behaves when the source of values is slow or down: fail-safe stale values,
/// soft and hard timeouts, and refresh ahead of expiry.
///
/// Every option is off by default. Set them once as ``Storage/Configuration/loading`` or pass
/// them to one call of ``Storage/value(forKey:tiers:expiry:failureExpiry:options:orLoad:)``:
///
/// ```swift
/// let storage = try Storage<String, Data>(transformer: .data) {
///     $0.loading = LoadOptions(
///         maxStale: .seconds(3_600),    // keep values an hour past expiry, for a failing source
///         softTimeout: .milliseconds(100), // a stale value after 100 ms; the load goes on
///         hardTimeout: .seconds(2),     // give up after 2 s
///         refreshAfter: 0.8)            // a hit in the last fifth of its lifetime refreshes it
/// }
/// let page = try await storage.entry(forKey: "home", expiry: .seconds(60)) { _ in try await render() }
/// if page.isStale { response.headers["Warning"] = "110 - Response is Stale" }
/// ```
///
/// A read that does not run get-or-load with ``maxStale`` never gets a stale value: stale
/// copies live apart from the values every other read sees (see "Get-or-load for services" in
/// <doc:AtomicOperations>).
public struct LoadOptions: Sendable, Hashable {
    /// How long past its expiry a loaded value is kept (its *stale copy*) to be returned, marked
    /// stale, when the loader throws or times out. `nil` keeps none: fail-safe is off.
    /// Defaults to `nil`.
    ///
    /// A call may use fail-safe only on a storage whose ``Storage/Configuration/loading`` sets
    /// `maxStale`: that storage's writes and removals then drop the stale copies of the keys they
    /// change, so an overwritten or removed value never comes back as a stale one.
    public var maxStale: Duration?
    /// After the loader failed (or timed out) and a stale value was returned, how long the
    /// stale value keeps being returned without calling the loader again. Defaults to 30 s.
    public var failSafeThrottle: Duration
    /// With fail-safe (``maxStale``), how long to wait for the loader before returning the key's
    /// stale copy; the loader goes on in the background and stores its value. With no stale copy
    /// at hand the call waits on (up to ``hardTimeout``). `nil` waits for the loader. Defaults
    /// to `nil`.
    public var softTimeout: Duration?
    /// How long to wait for the loader at most: then the call returns the stale value (with
    /// fail-safe) or throws ``StorageError/Code/timeout``; the loader is cancelled unless a soft
    /// timeout or a refresh let it go on in the background. `nil` waits as long as it takes.
    /// Defaults to `nil`.
    public var hardTimeout: Duration?
    /// A fraction of a value's lifetime (for example `0.8`): a hit older than that is returned
    /// at once and one refresh of the key runs in the background (one per key in the process).
    /// `nil` never refreshes ahead. Defaults to `nil`.
    ///
    /// The lifetime is the call's expiry (a `.seconds` or `.sliding` expiry, or the memory
    /// tier's default one); a call whose lifetime is unknown (`.date`, `.never`) does not
    /// refresh ahead.
    public var refreshAfter: Double?
    /// The β of probabilistic early refresh (XFetch, Vattani et al., VLDB 2015): a hit refreshes
    /// its value in the background when `now − δ·β·ln(u) ≥ expiration`, with `u` uniform in
    /// (0, 1] and δ the key's last load duration, so hot keys refresh a little before expiry
    /// and never all at once. `1` is the paper's default; larger refreshes earlier. `nil` is off.
    /// Defaults to `nil`.
    public var earlyRefreshBeta: Double?

    /// Creates options; every parameter has the documented default.
    public init(
        maxStale: Duration? = nil,
        failSafeThrottle: Duration = .seconds(30),
        softTimeout: Duration? = nil,
        hardTimeout: Duration? = nil,
        refreshAfter: Double? = nil,
        earlyRefreshBeta: Double? = nil
    ) {
        self.maxStale = maxStale
        self.failSafeThrottle = failSafeThrottle
        self.softTimeout = softTimeout
        self.hardTimeout = hardTimeout
        self.refreshAfter = refreshAfter
        self.earlyRefreshBeta = earlyRefreshBeta
    }

    /// Throws ``StorageError/Code/invalidInput`` naming the first option out of range.
    func validate() throws {
        func refuse(_ name: String, _ value: Any, _ reason: String) -> StorageError {
            StorageError(code: .invalidInput, message: "LoadOptions.\(name) \(value) \(reason)")
        }
        for (name, duration) in [("maxStale", maxStale), ("softTimeout", softTimeout), ("hardTimeout", hardTimeout)] {
            if let duration, duration <= .zero { throw refuse(name, duration, "must be positive (nil turns it off)") }
        }
        if failSafeThrottle < .zero { throw refuse("failSafeThrottle", failSafeThrottle, "must not be negative") }
        if let refreshAfter, !(refreshAfter > 0 && refreshAfter < 1) {
            throw refuse("refreshAfter", refreshAfter, "must be a fraction of the lifetime between 0 and 1, exclusive")
        }
        if let earlyRefreshBeta, !(earlyRefreshBeta > 0 && earlyRefreshBeta.isFinite) {
            throw refuse("earlyRefreshBeta", earlyRefreshBeta, "must be positive and finite")
        }
        if let softTimeout, let hardTimeout, softTimeout > hardTimeout {
            throw refuse("softTimeout", softTimeout, "must not exceed hardTimeout \(hardTimeout)")
        }
    }
}
