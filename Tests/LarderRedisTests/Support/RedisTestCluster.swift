#if Redis
import Foundation
@testable import LarderRedis
import LarderTestSupport

/// A real Redis Cluster of three primaries and three replicas, started by a test on free
/// loopback ports (`redis-server --cluster-enabled yes` six times, then
/// `redis-cli --cluster create … --cluster-replicas 1`), each node stopped by its PID with the
/// scope. A replica takes over a failed primary after `cluster-node-timeout`.
struct RedisTestCluster: Sendable {
    /// Every node, in creation order (the first three start as primaries).
    let nodes: [RedisServer]
    /// The nodes' working directories (cluster state files).
    let directory: TemporaryDirectory

    /// Where a store reads the slot map from.
    var seeds: [RedisStore.Node] { nodes.prefix(3).map { RedisStore.Node(host: "127.0.0.1", port: $0.port) } }

    /// Starts the cluster; `nodeTimeout` is how long a node may not answer before a replica takes
    /// over (long by default, so that a stalled machine fails no node over by accident).
    static func start(in scope: ChildProcessScope, nodeTimeout: Duration = .seconds(30)) async throws -> RedisTestCluster {
        let milliseconds = nodeTimeout.components.seconds * 1000 + nodeTimeout.components.attoseconds / 1_000_000_000_000_000
        let directory = try TemporaryDirectory("larder-redis-cluster")
        var nodes: [RedisServer] = []
        for index in 0..<6 {
            let nodeDirectory = directory.url.appendingPathComponent("node-\(index)", isDirectory: true)
            try FileManager.default.createDirectory(at: nodeDirectory, withIntermediateDirectories: true)
            nodes.append(try await RedisServer.start(in: scope, arguments: [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--dir", nodeDirectory.path,
                "--cluster-node-timeout", "\(milliseconds)", "--cluster-replica-validity-factor", "0",
                "--repl-diskless-sync-delay", "0",
            ]))
        }
        let cluster = RedisTestCluster(nodes: nodes, directory: directory)
        let create = try scope.start(
            URL(fileURLWithPath: RedisServer.cliBinary ?? "/usr/bin/redis-cli"),
            arguments: ["--cluster", "create"] + nodes.map { "127.0.0.1:\($0.port)" } + ["--cluster-replicas", "1", "--cluster-yes"])
        // Generous: on a loaded machine this may take a while.
        guard await create.waitForExit(timeout: .seconds(300)), create.exitedCleanly else {
            await create.waitForOutput(timeout: .seconds(5))
            throw TestFailure("redis-cli --cluster create failed: \(create.standardOutput) \(create.standardError)")
        }
        try await cluster.waitUntilHealthy()
        return cluster
    }

    /// Waits until every live node says the cluster is ok and every replica's link to its
    /// primary is up with its copy in step.
    func waitUntilHealthy(excluding excluded: Set<Int> = []) async throws {
        let live = nodes.filter { !excluded.contains($0.port) }
        let healthy = await eventually {
            live.allSatisfy { node in
                guard let info = try? node.cli("CLUSTER", "INFO"), info.contains("cluster_state:ok"),
                      let replication = try? node.cli("INFO", "replication") else { return false }
                return !replication.contains("role:slave") || replication.contains("master_link_status:up")
            }
        }
        guard healthy else { throw TestFailure("the cluster did not become healthy within 300 s") }
    }

    /// The primaries now, by `CLUSTER NODES` as `node` sees it: each with its slot ranges and
    /// its replicas' ports.
    func primaries(askedAt node: RedisServer? = nil) throws -> [(port: Int, slots: [ClosedRange<Int>], replicas: [Int])] {
        let text = try (node ?? nodes[0]).cli("CLUSTER", "NODES")
        let lines = text.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        func port(_ address: String) -> Int? {
            Int(address.split(separator: "@")[0].split(separator: ":").last ?? "")
        }
        var result: [(port: Int, slots: [ClosedRange<Int>], replicas: [Int])] = []
        for fields in lines where fields.count >= 8 && fields[2].contains("master") && !fields[2].contains("fail") {
            guard let primaryPort = port(fields[1]) else { continue }
            let slots: [ClosedRange<Int>] = fields.dropFirst(8).compactMap { range in
                guard !range.hasPrefix("[") else { return nil }
                let bounds = range.split(separator: "-").compactMap { Int($0) }
                return bounds.count == 2 ? bounds[0]...bounds[1] : bounds.count == 1 ? bounds[0]...bounds[0] : nil
            }
            let replicas = lines.filter { $0.count >= 4 && $0[3] == fields[0] }.compactMap { port($0[1]) }
            guard !slots.isEmpty else { continue }
            result.append((primaryPort, slots, replicas))
        }
        return result
    }

    /// The node listening on `port`.
    func node(port: Int) -> RedisServer? { nodes.first { $0.port == port } }

    /// Waits until each replica of `primaryPort` has applied everything its primary wrote.
    func waitUntilReplicated(primaryPort: Int) async throws {
        guard let primary = node(port: primaryPort) else { throw TestFailure("no node on \(primaryPort)") }
        func offset(_ node: RedisServer, _ field: String) -> Int? {
            guard let text = try? node.cli("INFO", "replication") else { return nil }
            for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix(field + ":") {
                return Int(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces))
            }
            return nil
        }
        let replicas = try primaries().first { $0.port == primaryPort }?.replicas.compactMap(node(port:)) ?? []
        guard !replicas.isEmpty else { throw TestFailure("primary \(primaryPort) has no replica") }
        let caughtUp = await eventually {
            guard let written = offset(primary, "master_repl_offset") else { return false }
            return replicas.allSatisfy { (offset($0, "slave_repl_offset") ?? -1) >= written }
        }
        guard caughtUp else { throw TestFailure("the replicas of \(primaryPort) did not catch up within 300 s") }
    }
}
#endif
