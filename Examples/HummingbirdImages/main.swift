// A Hummingbird app serving resized images from Larder's ImageCache, with image facts kept in
// Larder's PersistDriver.
//
//   swift run --traits Hummingbird LarderHummingbirdExample
//   curl -o thumb.bmp 'localhost:8080/images/photo.bmp?width=64&height=64'
//   curl localhost:8080/images/photo.bmp/info
//
// ORIGIN_URL is where originals are downloaded from (ORIGIN_URL/<name>); CACHE_DIRECTORY the
// cache folder; PORT the port; PERSIST=memory switches to Hummingbird's MemoryPersistDriver.
// SHARED_CACHE shares the image facts between instances through a server: redis://HOST:PORT
// (trait Redis too) or memcached://HOST:PORT (trait Memcached too); unset, none.
// With the trait Metrics too (`--traits Hummingbird,Metrics`), `curl localhost:8080/metrics`
// shows the image cache's Prometheus metrics.
#if Hummingbird
import Foundation
import Hummingbird
import Larder
import LarderHummingbird
import LarderImage
#if Redis
import LarderRedis
#endif
#if Memcached
import LarderMemcached
#endif

struct ImageInfo: ResponseEncodable, Decodable, Sendable {
    var format: String
    var width: Int?
    var height: Int?
    var bytes: Int
}

let environment = Environment()
let origin = environment.get("ORIGIN_URL") ?? "http://127.0.0.1:8000"
let directory = URL(fileURLWithPath: environment.get("CACHE_DIRECTORY") ?? "Caches/hummingbird-example")

let images = try ImageCache(fetcher: HTTPImageFetcher()) { configuration in
    configuration.directory = directory.appendingPathComponent("images")
    configuration.processors = [.resize { image, key in try BMP.resize(image.data, to: key.targetSize!) }]
}
/// The tier SHARED_CACHE names, through which instances share the image facts; `nil` when unset.
func persistSharedTier(_ address: String?) throws -> (any CacheTier)? {
    guard let address else { return nil }
    guard let url = URLComponents(string: address), let host = url.host else {
        throw StorageError.invalidConfiguration(field: "SHARED_CACHE", value: address, reason: "not scheme://host:port")
    }
    switch url.scheme {
    #if Redis
    case "redis":
        // With tracking, one instance's write drops the other instances' memory copies.
        return try RedisStore(configuration: .init(host: host, port: url.port ?? 6379, namespace: "hb-example:"))
    #endif
    #if Memcached
    case "memcached":
        return try MemcachedStore(configuration: .init(host: host, port: url.port ?? 11211, namespace: "hb-example:"))
    #endif
    default:
        throw StorageError.invalidConfiguration(field: "SHARED_CACHE", value: address, reason: "this build has no such tier (traits Redis, Memcached)")
    }
}
let persistDirectory = directory.appendingPathComponent("persist")
let shared: (any CacheTier)?
do {
    shared = try persistSharedTier(environment.get("SHARED_CACHE"))
} catch {
    print("\(error)")
    exit(2)
}
let persist: any PersistDriver
if environment.get("PERSIST") == "memory" {
    persist = MemoryPersistDriver()
} else if let shared {
    persist = try LarderPersistDriver(directory: persistDirectory, sharedTier: shared)  // the one line
} else {
    persist = try LarderPersistDriver(directory: persistDirectory)
}

func originalKey(_ context: some RequestContext) throws -> ImageKey {
    let name = try context.parameters.require("name")
    guard let url = URL(string: "\(origin)/\(name)") else { throw HTTPError(.badRequest) }
    return ImageKey(url)
}

let router = Router()
#if Metrics
exportMetrics(of: images, on: router)
#endif
// The original, or a variant with ?width=&height= made once by the resize processor.
router.get("images/:name") { request, context -> Response in
    var key = try originalKey(context)
    if let width = request.uri.queryParameters.get("width", as: Int.self),
       let height = request.uri.queryParameters.get("height", as: Int.self) {
        guard (1...4096).contains(width), (1...4096).contains(height) else { throw HTTPError(.badRequest) }
        key = ImageKey(key.source, targetSize: .init(width: width, height: height))
    }
    let result = try await images.image(for: key)
    return Response(
        status: .ok, headers: [.contentType: result.metadata.format.mimeType],
        body: .init(byteBuffer: ByteBuffer(bytes: result.data)))
}
// The original's format and size, remembered for 10 minutes in the persist driver.
router.get("images/:name/info") { _, context -> ImageInfo in
    let key = try originalKey(context)
    if let info = try await persist.get(key: key.canonicalString, as: ImageInfo.self) { return info }
    let metadata = try await images.image(for: key).metadata
    let info = ImageInfo(
        format: metadata.format.identifier, width: metadata.pixelWidth, height: metadata.pixelHeight,
        bytes: metadata.byteCount)
    try await persist.set(key: key.canonicalString, value: info, expires: .seconds(600))
    return info
}

let port = environment.get("PORT", as: Int.self) ?? 8080
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), services: [persist])
try await app.runService()  // SIGINT/SIGTERM: graceful shutdown closes the persist driver
#endif
