#if Redis
import Larder

/// What a ``RedisConnectionPool`` reports to the store configuration's
/// ``Larder/OperationObserver``: each round trip to its server (in a cluster, to that node),
/// named by its commands (`GET`; `BATCH MGET` for several of one kind; `BATCH` for a pipeline
/// of several kinds).
extension RedisConnectionPool {
    /// Sends `commands` (see ``sendUnobserved(_:)``), watched by the observer when there is one.
    func send(_ commands: [[RESPArgument]]) async throws -> [RESPValue] {
        guard let observer = settings.observer else { return try await sendUnobserved(commands) }
        return try await observer.observe(observedOperation(commands), outcome: { Self.outcome(of: commands, $0) }) {
            try await self.sendUnobserved(commands)
        }
    }

    /// The operation of a round trip that sends `commands`.
    private func observedOperation(_ commands: [[RESPArgument]]) -> ObservedOperation {
        let names = commands.map { command -> String in
            guard case .string(let name) = command.first else { return "" }
            return name
        }
        let name: String
        if names.count == 1 {
            name = names[0]
        } else {
            name = Set(names).count == 1 ? "BATCH \(names[0])" : "BATCH"
        }
        return ObservedOperation(
            name: name, system: "redis", serverAddress: settings.host, serverPort: settings.port,
            batchSize: commands.count > 1 ? commands.count : nil)
    }

    /// A hit when a read (`GET`, `MGET`) found a value, a miss when it found none, else success
    /// (a write, a removal, a script).
    private static func outcome(of commands: [[RESPArgument]], _ replies: [RESPValue]) -> ObservedOperation.Outcome {
        var isRead = false
        for (command, reply) in zip(commands, replies) {
            guard case .string(let name) = command.first, name == "GET" || name == "MGET" else { continue }
            isRead = true
            switch reply {
            case .bulkString: return .hit
            case .array(let values) where values.contains(where: { if case .bulkString = $0 { true } else { false } }): return .hit
            default: continue
            }
        }
        return isRead ? .miss : .success
    }
}
#endif
