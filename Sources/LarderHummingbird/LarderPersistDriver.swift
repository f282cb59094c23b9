#if Hummingbird
public import Foundation
public import Hummingbird
public import Larder
import ServiceLifecycle

/// Larder's ``Storage`` as Hummingbird's `PersistDriver`: sessions and other request-spanning
/// values in bounded memory over a crash-safe disk tier shared by every process on the
/// directory.
///
/// Values are stored as JSON in a `Storage<String, JSONValue>` (the memory tier also keeps
/// the object itself, so a memory hit decodes nothing), with Hummingbird's semantics:
/// `create` throws `PersistError.duplicate` when a live value exists for the key (atomically,
/// also across processes sharing the directory); `set` with a `nil` expiry keeps the key's
/// existing expiration; `get` as a type the stored JSON does not decode to throws
/// `PersistError.invalidConversion`; `remove` deletes the key. An expired value is never
/// returned and does not block `create`.
///
/// ```swift
/// let persist = try LarderPersistDriver(directory: URL(fileURLWithPath: "Sessions")) {
///     $0.disk.countLimit = 1_000_000      // room for every live session (see below)
/// }
/// router.add(middleware: SessionMiddleware(storage: persist))
/// let app = Application(router: router, services: [persist])
/// try await app.runService()               // graceful shutdown closes the store
/// ```
///
/// The driver is a `Service`: in a `ServiceGroup` it removes expired values every
/// ``Configuration/tidyInterval`` and closes the storage on graceful shutdown.
///
/// - Important: Larder is a cache: when a tier is over its limits it evicts the least recently
///   used values, and an evicted session is a logged-out user. Size the limits so that live
///   values never reach them: set the disk tier's `countLimit` above the number of sessions
///   alive at once (sessions per second × session lifetime) and its `sizeLimit` above that count
///   × the largest session's JSON size, and give every value an expiry so that expired ones,
///   which are removed first, make the room. The memory tier may be smaller: a value it evicts
///   is read again from disk.
public final class LarderPersistDriver: PersistDriver {
    /// The driver's settings.
    public struct Configuration: Sendable {
        /// How often the running service removes expired values; `nil` never sweeps (expired
        /// values are still never returned). Defaults to 10 minutes, as Hummingbird's memory
        /// driver.
        public var tidyInterval: Duration?

        /// Creates a configuration; every parameter has the documented default.
        public init(tidyInterval: Duration? = .seconds(600)) {
            self.tidyInterval = tidyInterval
        }
    }

    /// The storage behind the driver.
    public let storage: Storage<String, JSONValue>
    /// The driver's settings.
    public let configuration: Configuration
    /// The storage's clock.
    let now: @Sendable () -> Date

    /// Creates a driver over `storage`, which it closes on shutdown.
    public init(storage: Storage<String, JSONValue>, configuration: Configuration = .init()) {
        self.storage = storage
        self.configuration = configuration
        self.now = storage.configuration.now ?? { Date() }
    }

    /// Creates a driver over a storage opened now on `directory` (`nil`: memory only, like
    /// `MemoryPersistDriver` but bounded) with a configuration edited by `configure`.
    ///
    /// - Throws: The errors of ``Storage/init(configuration:additionalTiers:transformer:)``.
    public convenience init(
        directory: URL?, configuration: Configuration = .init(),
        _ configure: (inout Storage<String, JSONValue>.Configuration) -> Void = { _ in }
    ) throws {
        let storage = try Storage<String, JSONValue>(transformer: .jsonValue) { storageConfiguration in
            storageConfiguration.directory = directory
            configure(&storageConfiguration)
        }
        self.init(storage: storage, configuration: configuration)
    }

    /// Creates a driver over a storage opened now on `directory` (`nil`: memory only) whose
    /// shared tier, read after memory and disk, is `sharedTier`: a `RedisStore` or a
    /// `MemcachedStore` that every instance of the application reads and writes.
    ///
    /// ```swift
    /// let persist = try LarderPersistDriver(directory: nil, sharedTier: RedisStore(configuration: .init(host: "redis")))
    /// ```
    ///
    /// A failure of the shared tier is a miss, never an error of the driver. Shutdown closes
    /// the shared tier with the storage.
    ///
    /// - Throws: The errors of ``Storage/init(configuration:additionalTiers:transformer:)``.
    public convenience init(
        directory: URL?, sharedTier: any CacheTier, configuration: Configuration = .init(),
        _ configure: (inout Storage<String, JSONValue>.Configuration) -> Void = { _ in }
    ) throws {
        var storageConfiguration = Storage<String, JSONValue>.Configuration()
        storageConfiguration.directory = directory
        configure(&storageConfiguration)
        let storage = try Storage(configuration: storageConfiguration, additionalTiers: [sharedTier], transformer: .jsonValue)
        self.init(storage: storage, configuration: configuration)
    }

    // MARK: - PersistDriver

    /// Stores `value` for `key` unless a live value exists; a `nil` `expires` means the
    /// storage's default expiry (none unless configured).
    ///
    /// - Throws: `PersistError.duplicate` when `key` holds a live value, decided atomically
    ///   across tasks and across processes sharing the directory.
    public func create<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let persisted = try Self.encode(value, key: key)
        guard try await storage.insertValue(persisted, forKey: key, expiry: expires.map(Self.expiry)) else {
            throw PersistError.duplicate
        }
    }

    /// Stores `value` for `key`; a `nil` `expires` keeps the expiration of the value it
    /// replaces (for a new key: the storage's default expiry, which is none unless configured).
    ///
    /// - Important: The existing expiration is read, then the new value written: a `set` with
    ///   an expiry that lands between the two loses its expiration to this one.
    public func set<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let persisted = try Self.encode(value, key: key)
        let expiry: Expiry?
        if let expires {
            expiry = Self.expiry(expires)
        } else if let existing = try await storage.entry(forKey: key) {
            expiry = existing.expirationDate.map { .date($0) } ?? .never
        } else {
            expiry = nil  // a new key: the storage's default expiry (never, unless configured)
        }
        try await storage.setValue(persisted, forKey: key, expiry: expiry)
    }

    /// The value for `key` decoded as `Object`, or `nil` on a miss or after its expiry.
    ///
    /// - Throws: `PersistError.invalidConversion` when the stored JSON is not an `Object`.
    public func get<Object: Codable & Sendable>(key: String, as object: Object.Type) async throws -> Object? {
        guard let persisted = try await storage.value(forKey: key) else { return nil }
        return try Self.decode(object, from: persisted)
    }

    /// The value for `key` with its remaining lifetime (`nil`: it never expires).
    ///
    /// - Throws: `PersistError.invalidConversion` when the stored JSON is not an `Object`.
    public func getWithTTL<Object: Codable & Sendable>(
        key: String, as object: Object.Type
    ) async throws -> (object: Object, ttl: Duration?)? {
        guard let entry = try await storage.entry(forKey: key) else { return nil }
        let value = try Self.decode(object, from: entry.value)
        let ttl = entry.expirationDate.map { date -> Duration in
            let milliseconds = max(0, (date.timeIntervalSince(now()) * 1_000).rounded(.down))
            return .milliseconds(Int64(milliseconds))
        }
        return (value, ttl)
    }

    /// Removes the value for `key` from every tier.
    public func remove(key: String) async throws {
        _ = try await storage.removeValue(forKey: key)
    }

    /// Closes the storage; later calls throw ``StorageError`` with code `closed`.
    public func shutdown() async throws {
        await storage.close()
    }

    // MARK: - Service

    /// Removes expired values every ``Configuration/tidyInterval`` until graceful shutdown,
    /// then closes the storage.
    public func run() async throws {
        if let interval = configuration.tidyInterval {
            let storage = self.storage
            try? await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    try await Task.sleep(for: interval)
                    _ = try? await storage.removeExpired()
                }
            }
        } else {
            try? await gracefulShutdown()
        }
        try await shutdown()
    }

    // MARK: - Codec

    static func expiry(_ duration: Duration) -> Expiry {
        let (seconds, attoseconds) = duration.components
        return .seconds(TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18)
    }

    static func encode<Object: Encodable & Sendable>(_ value: Object, key: String) throws -> JSONValue {
        do {
            return try JSONValue(encoding: value)
        } catch {
            throw StorageError.encoding(
                "cannot encode \(Object.self) as JSON for key \(key)", cause: (error as? StorageError)?.cause ?? error)
        }
    }

    static func decode<Object: Decodable & Sendable>(_ type: Object.Type, from persisted: JSONValue) throws -> Object {
        do {
            return try persisted.decoded(as: type)
        } catch {
            throw PersistError.invalidConversion
        }
    }
}
#endif
