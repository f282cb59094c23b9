#if ServiceLifecycle
public import Larder
public import ServiceLifecycle

/// A ``Larder/Storage`` as a swift-service-lifecycle `Service`: it runs until the service
/// group shuts down gracefully, then closes the storage.
///
/// Closing writes the disk tier's pending access order, checkpoints its write-ahead log and
/// closes every tier, remote ones included (``Larder/Storage/close()``). Every write that
/// returned before the close is in the directory when `run()` returns, so a process stopped
/// by SIGTERM loses no acknowledged write.
///
/// Put the storage's service **before** the services that use the storage: a `ServiceGroup`
/// shuts its services down in reverse order, so the users stop first and the storage closes
/// last.
///
/// ```swift
/// let storage = try Storage<String, Data>(transformer: .data) { $0.directory = cacheURL }
/// let group = ServiceGroup(
///     configuration: .init(
///         services: [.init(service: StorageService(storage: storage)), .init(service: app)],
///         gracefulShutdownSignals: [.sigterm, .sigint],
///         logger: logger))
/// try await group.run()
/// ```
public struct StorageService: Service, CustomStringConvertible {
    /// The name given at creation, for the service group's log lines.
    public let name: String
    private let close: @Sendable () async -> Void

    /// Creates a service that closes `storage` on graceful shutdown.
    ///
    /// - Parameters:
    ///   - storage: The storage to close.
    ///   - name: A name for log lines. Defaults to `"Larder.Storage"`.
    public init<Key, Value: Sendable>(storage: Storage<Key, Value>, name: String = "Larder.Storage") {
        self.name = name
        self.close = { await storage.close() }
    }

    /// Creates a service that closes one byte tier on graceful shutdown: a remote tier shared
    /// by several storages, or a tier used on its own.
    ///
    /// - Parameters:
    ///   - tier: The tier to close.
    ///   - name: A name for log lines. Defaults to the tier's identity.
    public init(tier: any CacheTier, name: String? = nil) {
        self.name = name ?? "Larder.\(tier.tierID.name)"
        self.close = { await tier.close() }
    }

    /// Waits for the service group's graceful shutdown (or for the task's cancellation), then
    /// closes the storage or tier and returns.
    ///
    /// - Throws: Nothing: a cancelled task closes just as a graceful shutdown does.
    public func run() async throws {
        // Throws `CancellationError` when the task is cancelled instead: close all the same.
        try? await gracefulShutdown()
        await close()
    }

    /// The service's name.
    public var description: String { name }
}
#endif
