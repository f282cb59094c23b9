#if Vapor
public import Foundation
public import Larder
public import NIOCore
public import Vapor

/// Larder's ``Storage`` as Vapor's `Cache`: bounded memory over a crash-safe disk tier.
///
/// Values are encoded as JSON (as Vapor's own Redis cache does) into a
/// `Larder.Storage<String, JSONValue>`, whose memory tier also keeps the object itself, so a
/// memory hit decodes nothing (as Vapor's `MemoryCache`). `set(_:to:expiresIn:)` honours the
/// expiration to the second, `set(_:to: nil)` removes the key, and reading a key as a type its
/// JSON does not decode to throws a `StorageError` with code `decoding` rather than answering a
/// wrong value.
///
/// ```swift
/// let app = try await Application.make(.detect())
/// try app.caches.use(.larder(directory: URL(fileURLWithPath: "Caches/app")))
/// app.get("answer") { req async throws -> Int in
///     if let cached = try await req.cache.get("answer", as: Int.self) { return cached }
///     try await req.cache.set("answer", to: 42, expiresIn: .minutes(5))
///     return 42
/// }
/// ```
///
/// A memory hit is answered on the calling event loop without a task hop; a disk read or any
/// write runs on Larder's I/O queue, never on the event loop.
///
/// - Important: The storage is closed when the application shuts down (the provider registers
///   a lifecycle handler); values on disk are there again when an application reopens the
///   directory.
public struct LarderCache: Cache, Sendable {
    /// The storage behind the cache.
    public let storage: Larder.Storage<String, JSONValue>
    /// The event loop the futures complete on.
    public let eventLoop: any EventLoop

    /// Creates a cache over `storage` whose futures complete on `eventLoop`.
    public init(storage: Larder.Storage<String, JSONValue>, on eventLoop: any EventLoop) {
        self.storage = storage
        self.eventLoop = eventLoop
    }

    // MARK: - Cache

    /// The value for `key` decoded as `type`, or `nil` on a miss or after its expiry.
    ///
    /// - Throws: ``StorageError`` with code `decoding` when the stored JSON is not a `type`.
    public func get<T>(_ key: String, as type: T.Type) -> EventLoopFuture<T?> where T: Decodable & Sendable {
        do {
            if let value = try storage.value(forKey: key, tiers: .memory) {
                return eventLoop.makeSucceededFuture(try Self.decode(type, from: value, key: key))
            }
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        let storage = self.storage
        return eventLoop.makeFutureWithTask { try await storage.value(forKey: key) }
            .flatMapThrowing { value in try value.map { try Self.decode(type, from: $0, key: key) } }
    }

    /// Stores `value` for `key` with the storage's default expiry; `nil` removes the key.
    public func set<T>(_ key: String, to value: T?) -> EventLoopFuture<Void> where T: Encodable & Sendable {
        set(key, to: value, expiresIn: nil)
    }

    /// Stores `value` for `key` to expire `expirationTime` from now (to the second); `nil`
    /// removes the key, and a `nil` expiration time keeps the storage's default expiry.
    public func set<T>(
        _ key: String, to value: T?, expiresIn expirationTime: CacheExpirationTime?
    ) -> EventLoopFuture<Void> where T: Encodable & Sendable {
        let storage = self.storage
        guard let value else {
            return eventLoop.makeFutureWithTask { _ = try await storage.removeValue(forKey: key) }
        }
        let encoded: JSONValue
        do {
            encoded = try Self.encode(value, key: key)
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        let expiry = expirationTime.map { Expiry.seconds(TimeInterval($0.seconds)) }
        return eventLoop.makeFutureWithTask { try await storage.setValue(encoded, forKey: key, expiry: expiry) }
    }

    /// The same storage with futures on the request's event loop.
    public func `for`(_ request: Request) -> LarderCache {
        LarderCache(storage: storage, on: request.eventLoop)
    }

    // MARK: - Async forms without futures

    /// The value for `key` decoded as `type`, or `nil`; see ``get(_:as:)-(_,_)``.
    public func get<T>(_ key: String, as type: T.Type) async throws -> T? where T: Decodable & Sendable {
        guard let value = try await storage.value(forKey: key) else { return nil }
        return try Self.decode(type, from: value, key: key)
    }

    /// Stores `value` for `key` with the storage's default expiry; `nil` removes the key.
    public func set<T>(_ key: String, to value: T?) async throws where T: Encodable & Sendable {
        try await set(key, to: value, expiresIn: nil)
    }

    /// Stores `value` for `key` to expire `expirationTime` from now; `nil` removes the key.
    public func set<T>(
        _ key: String, to value: T?, expiresIn expirationTime: CacheExpirationTime?
    ) async throws where T: Encodable & Sendable {
        guard let value else {
            _ = try await storage.removeValue(forKey: key)
            return
        }
        let expiry = expirationTime.map { Expiry.seconds(TimeInterval($0.seconds)) }
        try await storage.setValue(try Self.encode(value, key: key), forKey: key, expiry: expiry)
    }

    // MARK: - Codec

    static func encode<T: Encodable & Sendable>(_ value: T, key: String) throws -> JSONValue {
        do {
            return try JSONValue(encoding: value)
        } catch {
            throw StorageError.encoding(
                "cannot encode \(T.self) as JSON for key \(key)", cause: (error as? StorageError)?.cause ?? error)
        }
    }

    static func decode<T: Decodable & Sendable>(_ type: T.Type, from value: JSONValue, key: String) throws -> T {
        do {
            return try value.decoded(as: type)
        } catch {
            throw StorageError.decoding(
                "the value for key \(key) is not a JSON \(T.self)", cause: (error as? StorageError)?.cause ?? error)
        }
    }
}

extension Application.Caches.Provider {
    /// Larder's cache over `storage`, closed when the application shuts down.
    ///
    /// ```swift
    /// let storage = try Larder.Storage<String, JSONValue>(transformer: .jsonValue) { $0.directory = cacheURL }
    /// app.caches.use(.larder(storage))
    /// ```
    public static func larder(_ storage: Larder.Storage<String, JSONValue>) -> Self {
        .init { application in
            application.lifecycle.use(LarderCacheLifecycle(storage: storage))
            application.caches.use { application in
                LarderCache(storage: storage, on: application.eventLoopGroup.any())
            }
        }
    }

    /// Larder's cache over a storage opened now on `directory` (`nil`: memory only), with a
    /// configuration edited by `configure`; closed when the application shuts down.
    ///
    /// - Throws: The errors of ``Storage/init(configuration:additionalTiers:transformer:)``,
    ///   such as a directory that cannot be created.
    public static func larder(
        directory: URL?, _ configure: (inout Larder.Storage<String, JSONValue>.Configuration) -> Void = { _ in }
    ) throws -> Self {
        let storage = try Larder.Storage<String, JSONValue>(transformer: .jsonValue) { configuration in
            configuration.directory = directory
            configure(&configuration)
        }
        return .larder(storage)
    }

    /// Larder's cache over a storage opened now on `directory` (`nil`: memory only) whose
    /// shared tier, read after memory and disk, is `sharedTier`: a `RedisStore` or a
    /// `MemcachedStore` that every instance of the application reads and writes.
    ///
    /// ```swift
    /// try app.caches.use(.larder(directory: cacheURL, sharedTier: RedisStore(configuration: .init(host: "redis"))))
    /// ```
    ///
    /// A failure of the shared tier is a miss, never an error of the cache. The storage and the
    /// shared tier are closed when the application shuts down.
    ///
    /// - Throws: The errors of ``Storage/init(configuration:additionalTiers:transformer:)``.
    public static func larder(
        directory: URL?, sharedTier: any CacheTier,
        _ configure: (inout Larder.Storage<String, JSONValue>.Configuration) -> Void = { _ in }
    ) throws -> Self {
        var configuration = Larder.Storage<String, JSONValue>.Configuration()
        configuration.directory = directory
        configure(&configuration)
        return .larder(try Larder.Storage(configuration: configuration, additionalTiers: [sharedTier], transformer: .jsonValue))
    }
}

/// Closes a ``LarderCache``'s storage, shared tiers included, when the application shuts down.
struct LarderCacheLifecycle: LifecycleHandler {
    let storage: Larder.Storage<String, JSONValue>

    func shutdown(_ application: Application) {
        storage.close()
    }

    func shutdownAsync(_ application: Application) async {
        await storage.close()
    }
}
#endif
