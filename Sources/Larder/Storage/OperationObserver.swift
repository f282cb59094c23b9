/// Watches the operations a storage and its remote tiers perform that take time: each get-or-load
/// loader run, and each command a remote tier sends to its server.
///
/// Larder itself records nothing with it; a module such as `LarderTracing` implements it (a span
/// per operation) and you give it to ``Storage/Configuration/observer`` and to a remote tier's
/// configuration. Unset (the default), an operation costs one `nil` check.
///
/// ```swift
/// var configuration = Storage<String, Data>.Configuration()
/// configuration.observer = OperationTracer()          // LarderTracing, trait `Tracing`
/// var remote = MemcachedStore.Configuration(host: "cache-1")
/// remote.observer = configuration.observer
/// ```
///
/// An implementation must be thread-safe and must run `body` exactly once, returning what it
/// returns and throwing what it throws.
public protocol OperationObserver: Sendable {
    /// Runs `body`, the operation `operation` describes, and returns its result.
    ///
    /// - Parameters:
    ///   - operation: What runs: a load or a remote command, with its server.
    ///   - outcome: The outcome of a result `body` returned (hit, miss, success); a thrown
    ///     error is the outcome ``ObservedOperation/Outcome/error``.
    ///   - body: The operation itself.
    /// - Throws: What `body` throws, unchanged.
    nonisolated(nonsending) func observe<Result: Sendable>(
        _ operation: ObservedOperation, outcome: @Sendable (Result) -> ObservedOperation.Outcome,
        _ body: nonisolated(nonsending) @Sendable () async throws -> Result
    ) async throws -> Result
}

/// One operation an ``OperationObserver`` watches: a get-or-load loader run, or a command a
/// remote tier sends (with the names OpenTelemetry's database conventions use).
public struct ObservedOperation: Sendable, Hashable {
    /// A loader run of get-or-load (``Storage/value(forKey:tiers:expiry:failureExpiry:options:orLoad:)``).
    public static let load = ObservedOperation(name: "load")

    /// The operation's name: `"load"`, or the command as the server names it (`"GET"`, `"mg"`;
    /// `"BATCH mg"` for several of one kind sent at once). OpenTelemetry's `db.operation.name`.
    public var name: String
    /// The remote system (`"memcached"`, `"redis"`), or `nil` for a load. OpenTelemetry's
    /// `db.system.name`.
    public var system: String?
    /// The server's host name or address, or `nil` for a load. OpenTelemetry's `server.address`.
    public var serverAddress: String?
    /// The server's port, or `nil` for a load. OpenTelemetry's `server.port`.
    public var serverPort: Int?
    /// The number of commands sent at once, or `nil` for a single one. OpenTelemetry's
    /// `db.operation.batch.size`.
    public var batchSize: Int?

    /// An operation; a remote one names its system and server.
    public init(name: String, system: String? = nil, serverAddress: String? = nil, serverPort: Int? = nil, batchSize: Int? = nil) {
        self.name = name
        self.system = system
        self.serverAddress = serverAddress
        self.serverPort = serverPort
        self.batchSize = batchSize
    }

    /// How an operation ended: an open set of values.
    public struct Outcome: Sendable, Hashable, CustomStringConvertible {
        /// The outcome's name, as a span attribute or a metric dimension shows it.
        public let name: String

        /// An outcome named `name`.
        public init(_ name: String) { self.name = name }

        /// A read that found a value.
        public static let hit = Outcome("hit")
        /// A read that found nothing.
        public static let miss = Outcome("miss")
        /// An operation that is not a read (a write, a removal, a load) and did not fail.
        public static let success = Outcome("success")
        /// The operation threw.
        public static let error = Outcome("error")

        public var description: String { name }
    }
}

/// Several observers watching the same operations: the first one's watch encloses the second's,
/// and so on, around the operation, which still runs once.
///
/// ```swift
/// configuration.observer = OperationObservers([OperationMetrics(label: "feed"), OperationTracer()])
/// ```
public struct OperationObservers: OperationObserver {
    /// The observers, outermost first.
    public let observers: [any OperationObserver]

    /// A group of `observers`, outermost first.
    public init(_ observers: [any OperationObserver]) {
        self.observers = observers
    }

    nonisolated(nonsending) public func observe<Result: Sendable>(
        _ operation: ObservedOperation, outcome: @Sendable (Result) -> ObservedOperation.Outcome,
        _ body: nonisolated(nonsending) @Sendable () async throws -> Result
    ) async throws -> Result {
        try await observe(operation, from: observers[...], outcome: outcome, body)
    }

    nonisolated(nonsending) private func observe<Result: Sendable>(
        _ operation: ObservedOperation, from observers: ArraySlice<any OperationObserver>,
        outcome: @Sendable (Result) -> ObservedOperation.Outcome,
        _ body: nonisolated(nonsending) @Sendable () async throws -> Result
    ) async throws -> Result {
        guard let first = observers.first else { return try await body() }
        return try await first.observe(operation, outcome: outcome) {
            try await self.observe(operation, from: observers.dropFirst(), outcome: outcome, body)
        }
    }
}

extension Storage {
    /// Runs `loader` for `key`, watched by the configuration's observer when there is one.
    nonisolated(nonsending) func observedLoad(
        _ key: Key, _ loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Value where Value: Sendable {
        guard let observer = configuration.observer else { return try await loader(key) }
        return try await observer.observe(.load, outcome: { _ in .success }) { try await loader(key) }
    }
}
