// A Vapor app that caches an upstream JSON API response in Larder (memory + disk).
//
//   swift run --traits Vapor LarderVaporExample serve --port 8080
//   curl localhost:8080/forecast        # first call fetches upstream, later ones are cached 60 s
//
// UPSTREAM_URL sets the upstream; CACHE_DIRECTORY the cache folder; CACHE=memory switches to
// Vapor's own MemoryCache (for comparison). SHARED_CACHE adds a tier every instance shares:
// redis://HOST:PORT (trait Redis too) or memcached://HOST:PORT (trait Memcached too); unset, none.
// With the trait Metrics too
// (`--traits Vapor,Metrics`), `curl localhost:8080/metrics` shows the cache's Prometheus metrics.
#if Vapor
import Foundation
import Larder
import LarderVapor
import Vapor
#if Redis
import LarderRedis
#endif
#if Memcached
import LarderMemcached
#endif

let upstream = Environment.get("UPSTREAM_URL")
    ?? "https://api.open-meteo.com/v1/forecast?latitude=52.52&longitude=13.41&current=temperature_2m"
let directory = URL(fileURLWithPath: Environment.get("CACHE_DIRECTORY") ?? "Caches/vapor-example")

/// The tier SHARED_CACHE names, read after memory and disk; `nil` when it is unset.
func sharedTier(_ address: String?) throws -> (any CacheTier)? {
    guard let address else { return nil }
    guard let url = URLComponents(string: address), let host = url.host else {
        throw StorageError.invalidConfiguration(field: "SHARED_CACHE", value: address, reason: "not scheme://host:port")
    }
    switch url.scheme {
    #if Redis
    case "redis": return try RedisStore(configuration: .init(host: host, port: url.port ?? 6379, namespace: "vapor-example:"))
    #endif
    #if Memcached
    case "memcached": return try MemcachedStore(configuration: .init(host: host, port: url.port ?? 11211, namespace: "vapor-example:"))
    #endif
    default:
        throw StorageError.invalidConfiguration(field: "SHARED_CACHE", value: address, reason: "this build has no such tier (traits Redis, Memcached)")
    }
}

let app = try await Application.make(try Environment.detect())
if Environment.get("CACHE") == "memory" {
    app.caches.use(.memory)
} else {
    var configuration = Larder.Storage<String, JSONValue>.Configuration()
    configuration.directory = directory
    configuration.memory.costLimit = 64 << 20  // bytes of JSON kept decoded in memory
    configuration.disk.sizeLimit = 512 << 20   // bytes on disk; survives restarts
    let shared: (any CacheTier)?
    do {
        shared = try sharedTier(Environment.get("SHARED_CACHE"))
    } catch {
        app.logger.critical("\(error)")
        exit(2)
    }
    let storage = try Larder.Storage(configuration: configuration, additionalTiers: shared.map { [$0] } ?? [], transformer: .jsonValue)
    app.caches.use(.larder(storage))
    #if Metrics
    exportMetrics(of: storage, on: app)
    #endif
}

app.get("forecast") { req async throws -> Response in
    let json: String
    if let cached = try await req.cache.get("forecast", as: String.self) {
        json = cached
    } else {
        let response = try await req.client.get(URI(string: upstream))
        guard response.status == .ok, let body = response.body else { throw Abort(.badGateway) }
        json = String(buffer: body)
        try await req.cache.set("forecast", to: json, expiresIn: .seconds(60))
    }
    return Response(status: .ok, headers: ["Content-Type": "application/json"], body: .init(string: json))
}

do {
    try await app.execute()
} catch {
    app.logger.report(error: error)
}
try await app.asyncShutdown()
#endif
