#if Memcached
import Foundation
import Larder

/// Where a key lives in a pool of memcached servers: the continuum that libmemcached 1.x builds
/// with `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED` (the one pylibmc and PHP's memcached use), so a
/// Larder fleet and libmemcached-based clients agree on every key's server.
///
/// Each server gets `floor(weight share × 40 × server count) × 4` points: for each index `i`, MD5
/// of `"host:port-i"` (`"host-i"` on port 11211) gives four little-endian 32-bit points. A key's
/// server owns the first point at or after the key's hash (the first four MD5 bytes of the key
/// as sent on the wire, little-endian), wrapping to the first point.
///
/// Invariant: `points` is sorted by value, and every point names a server index in
/// `0..<serverCount`.
struct KetamaRing: Sendable {
    struct Point: Sendable {
        var value: UInt32
        var server: Int
    }

    let points: [Point]
    let serverCount: Int

    /// libmemcached's `MEMCACHED_POINTS_PER_SERVER_KETAMA`.
    static let pointsPerServer: Float = 160
    /// libmemcached's `MEMCACHED_DEFAULT_PORT`: the port left out of a server's point names.
    static let defaultPort = 11211

    /// The ring of `servers`, given as (host, port, weight) in the pool's order. A weight of 0
    /// counts as 1, as in libmemcached.
    init(servers: [(host: String, port: Int, weight: Int)]) {
        serverCount = servers.count
        let weights = servers.map { max(1, $0.weight) }
        let totalWeight = Float(weights.reduce(0, +))
        var points: [Point] = []
        for (index, server) in servers.enumerated() {
            // The same float steps as libmemcached, so that rounding picks the same count.
            let share = Float(weights[index]) / totalWeight
            let scaled = share * Self.pointsPerServer / 4 * Float(servers.count)
            let hashes = Int((Double(scaled) + 0.0000000001).rounded(.down))
            points.reserveCapacity(points.count + hashes * 4)
            for pointIndex in 0..<hashes {
                let name = server.port == Self.defaultPort
                    ? "\(server.host)-\(pointIndex)" : "\(server.host):\(server.port)-\(pointIndex)"
                let digest = KeyHashing.md5.digest(Data(name.utf8))
                for alignment in 0..<4 {
                    points.append(Point(value: Self.littleEndianWord(digest, at: alignment * 4), server: index))
                }
            }
        }
        // libmemcached sorts with qsort by value; equal values (a 32-bit collision between two
        // servers) would be ordered arbitrarily there, so ties keep the server order here.
        points.sort { $0.value != $1.value ? $0.value < $1.value : $0.server < $1.server }
        self.points = points
    }

    /// The key's hash on the ring: the first four bytes of MD5 over the wire key, little-endian.
    static func hash(_ wireKey: [UInt8]) -> UInt32 {
        wireKey.withUnsafeBytes { bytes in
            KeyHashing.md5.withDigest(of: bytes) { digest in
                UInt32(digest[0]) | UInt32(digest[1]) << 8 | UInt32(digest[2]) << 16 | UInt32(digest[3]) << 24
            }
        }
    }

    /// The index of the server that owns `wireKey`.
    func server(for wireKey: [UInt8]) -> Int {
        guard serverCount > 1 else { return 0 }
        return points[pointIndex(atOrAfter: Self.hash(wireKey))].server
    }

    /// Up to `count` distinct servers for `wireKey`, its own first, then the next ones met going
    /// round the ring (where its replicas live).
    func servers(for wireKey: [UInt8], count: Int) -> [Int] {
        let wanted = min(count, serverCount)
        guard serverCount > 1 else { return [0] }
        var found: [Int] = []
        found.reserveCapacity(wanted)
        var index = pointIndex(atOrAfter: Self.hash(wireKey))
        for _ in 0..<points.count where found.count < wanted {
            let server = points[index].server
            if !found.contains(server) { found.append(server) }
            index = index + 1 == points.count ? 0 : index + 1
        }
        return found
    }

    /// The first point whose value is at least `hash`, wrapping to the first point.
    private func pointIndex(atOrAfter hash: UInt32) -> Int {
        var low = 0
        var high = points.count
        while low < high {
            let middle = low + (high - low) / 2
            if points[middle].value < hash { low = middle + 1 } else { high = middle }
        }
        return low == points.count ? 0 : low
    }

    private static func littleEndianWord(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }
}
#endif
