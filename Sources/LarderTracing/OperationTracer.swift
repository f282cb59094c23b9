#if Tracing
public import Larder
public import Tracing

/// Records a span, through apple/swift-distributed-tracing, for each operation a storage or a
/// remote tier reports to its ``Larder/OperationObserver``: every get-or-load loader run and
/// every command sent to memcached or Redis.
///
/// Give one tracer to the storage and to its remote tiers; a remote command run by a loader
/// (or by a read inside a traced request) becomes a child of the span that was current.
///
/// ```swift
/// InstrumentationSystem.bootstrap(OTelTracer(…))
/// let tracer = OperationTracer()                  // InstrumentationSystem.tracer
/// var remote = RedisStore.Configuration(host: "10.0.0.5")
/// remote.observer = tracer
/// var configuration = Storage<String, Data>.Configuration()
/// configuration.observer = tracer
/// let storage = try Storage(
///     configuration: configuration, additionalTiers: [try RedisStore(configuration: remote)], transformer: .data)
/// ```
///
/// Spans and their attributes (OpenTelemetry's database conventions, and Larder's outcome):
///
/// | span | kind | attributes |
/// |---|---|---|
/// | `load` | internal | `larder.outcome` (`success`, `error`) |
/// | the command (`GET`, `mg`, `BATCH mg`) | client | `db.system.name` (`memcached`, `redis`), `db.operation.name`, `server.address`, `server.port`, `db.operation.batch.size` for a batch, `larder.outcome` (`hit`, `miss`, `success`, `error`) |
///
/// A span whose operation threw also records the error, `error.type`, and the status `error`.
public struct OperationTracer: OperationObserver {
    /// The tracer spans are recorded with.
    public let tracer: any Tracer

    /// A tracer of Larder's operations.
    ///
    /// - Parameter tracer: Where spans go. Defaults to the tracer bootstrapped in
    ///   `InstrumentationSystem` (read once, now), as AsyncHTTPClient's default is.
    public init(tracer: any Tracer = InstrumentationSystem.tracer) {
        self.tracer = tracer
    }

    nonisolated(nonsending) public func observe<Result: Sendable>(
        _ operation: ObservedOperation, outcome: @Sendable (Result) -> ObservedOperation.Outcome,
        _ body: nonisolated(nonsending) @Sendable () async throws -> Result
    ) async throws -> Result {
        try await Self.record(operation, with: tracer, outcome: outcome, body)
    }

    /// The span of `operation` on `tracer` (generic, so the tracer's own span type is used).
    nonisolated(nonsending) private static func record<T: Tracer, Result: Sendable>(
        _ operation: ObservedOperation, with tracer: T, outcome: @Sendable (Result) -> ObservedOperation.Outcome,
        _ body: nonisolated(nonsending) @Sendable () async throws -> Result
    ) async throws -> Result {
        let span = tracer.startSpan(operation.name, context: .current ?? .topLevel, ofKind: operation.system == nil ? .internal : .client)
        defer { span.end() }
        span.updateAttributes { attributes in
            if let system = operation.system {
                attributes[AttributeName.system] = system
                attributes[AttributeName.operation] = operation.name
            }
            if let address = operation.serverAddress { attributes[AttributeName.serverAddress] = address }
            if let port = operation.serverPort { attributes[AttributeName.serverPort] = port }
            if let batchSize = operation.batchSize { attributes[AttributeName.batchSize] = batchSize }
        }
        do {
            let result = try await InstrumentationContext.$current.withValue(span.context) { try await body() }
            span.attributes[AttributeName.outcome] = outcome(result).name
            return result
        } catch {
            span.attributes[AttributeName.outcome] = ObservedOperation.Outcome.error.name
            span.attributes[AttributeName.errorType] = String(reflecting: type(of: error))
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }
}

extension OperationTracer {
    /// The names of the span attributes this module sets.
    public enum AttributeName {
        /// `db.system.name`: `memcached` or `redis`.
        public static let system = "db.system.name"
        /// `db.operation.name`: the command (`GET`, `mg`, `BATCH mg`).
        public static let operation = "db.operation.name"
        /// `server.address`: the server's host name or address.
        public static let serverAddress = "server.address"
        /// `server.port`: the server's port.
        public static let serverPort = "server.port"
        /// `db.operation.batch.size`: the commands of a batch.
        public static let batchSize = "db.operation.batch.size"
        /// `larder.outcome`: `hit`, `miss`, `success` or `error`.
        public static let outcome = "larder.outcome"
        /// `error.type`: the type of the error an operation threw.
        public static let errorType = "error.type"
    }
}
#endif
