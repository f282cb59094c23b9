#if Redis
/// The **slot map** of a Redis Cluster: which primary serves each of the 16384 hash slots, and
/// every node (primaries and replicas) a later refresh may ask, as `CLUSTER SLOTS` reported it,
/// with the `MOVED` answers received since applied.
///
/// Related documentation: <https://redis.io/docs/latest/commands/cluster-slots/>
struct ClusterTopology: Sendable, Equatable {
    /// The primaries that serve at least one slot, in the order the reply named them.
    private(set) var primaries: [RedisStore.Node] = []
    /// Every node the reply named, primaries first.
    private(set) var nodes: [RedisStore.Node] = []
    /// Per slot, an index into `primaries`; -1 when no node serves the slot.
    private var owners = [Int16](repeating: -1, count: HashSlot.count)

    /// The primary that serves `slot`, if any.
    func primary(forSlot slot: Int) -> RedisStore.Node? {
        let owner = owners[slot]
        return owner < 0 ? nil : primaries[Int(owner)]
    }

    /// Whether some node serves every slot.
    var coversEverySlot: Bool { !owners.contains(-1) }

    /// Records that `node` serves `slot` now (a `MOVED` answer).
    mutating func assign(slot: Int, to node: RedisStore.Node) {
        owners[slot] = Int16(index(ofPrimary: node))
    }

    private mutating func index(ofPrimary node: RedisStore.Node) -> Int {
        if let index = primaries.firstIndex(of: node) { return index }
        primaries.append(node)
        if !nodes.contains(node) { nodes.append(node) }
        return primaries.count - 1
    }

    /// The map in a `CLUSTER SLOTS` reply: an array of `[start, end, primary, replicas…]`, each
    /// node as `[host, port, id, …]`. A node named without a host (empty or `?`) is on the host
    /// that was asked.
    ///
    /// - Throws: ``RedisError`` with code `.protocolViolation` for a reply of another shape.
    static func parse(slotsReply reply: RESPValue, askedHost: String) throws -> ClusterTopology {
        guard case .array(let ranges) = reply else {
            throw RedisError(.protocolViolation, "CLUSTER SLOTS answered \(String(describing: reply).prefix(200))")
        }
        var topology = ClusterTopology()
        var replicas: [RedisStore.Node] = []
        for range in ranges {
            guard case .array(let parts) = range, parts.count >= 3, case .integer(let start) = parts[0],
                  case .integer(let end) = parts[1], 0 <= start, start <= end, end < HashSlot.count,
                  let primary = node(parts[2], askedHost: askedHost) else {
                throw RedisError(.protocolViolation, "CLUSTER SLOTS named a range as \(String(describing: range).prefix(200))")
            }
            let owner = Int16(topology.index(ofPrimary: primary))
            for slot in Int(start)...Int(end) { topology.owners[slot] = owner }
            replicas += parts.dropFirst(3).compactMap { node($0, askedHost: askedHost) }
        }
        for replica in replicas where !topology.nodes.contains(replica) { topology.nodes.append(replica) }
        return topology
    }

    private static func node(_ value: RESPValue, askedHost: String) -> RedisStore.Node? {
        guard case .array(let fields) = value, fields.count >= 2, let host = fields[0].string,
              case .integer(let port) = fields[1], (1...65_535).contains(port) else { return nil }
        return RedisStore.Node(host: host.isEmpty || host == "?" ? askedHost : host, port: Int(port))
    }
}

/// What an error reply of a cluster node asks the client to do.
///
/// Related documentation: <https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#redirection-and-resharding>
enum ClusterRedirect: Equatable {
    /// `MOVED <slot> <host>:<port>`: the slot is served by another node from now on.
    case moved(slot: Int, to: RedisStore.Node)
    /// `ASK <slot> <host>:<port>`: the slot is migrating; this one command goes to that node,
    /// after `ASKING`.
    case ask(slot: Int, to: RedisStore.Node)
    /// `TRYAGAIN`: a multi-key command during a migration; the same node, a moment later.
    case tryAgain

    /// The redirect an error reply asks for, or `nil` for every other reply. An address without
    /// a host (`:6380`) is on `askedHost`.
    init?(_ reply: RESPValue, askedHost: String) {
        guard case .error(let message) = reply else { return nil }
        if message.hasPrefix("TRYAGAIN") {
            self = .tryAgain
            return
        }
        let words = message.split(separator: " ")
        guard words.count == 3, words[0] == "MOVED" || words[0] == "ASK", let slot = Int(words[1]),
              (0..<HashSlot.count).contains(slot), let colon = words[2].lastIndex(of: ":"),
              let port = Int(words[2][words[2].index(after: colon)...]), (1...65_535).contains(port) else { return nil }
        let host = String(words[2][..<colon])
        let node = RedisStore.Node(host: host.isEmpty ? askedHost : host, port: port)
        self = words[0] == "MOVED" ? .moved(slot: slot, to: node) : .ask(slot: slot, to: node)
    }
}
#endif
