#if Memcached
import Larder

/// What a ``ConnectionPool`` reports to the configuration's ``Larder/OperationObserver``: each
/// command or batch sent to its server, named as the meta protocol names it (`mg`, `ms`, `md`;
/// `BATCH mg` for a batch, its closing `mn` not counted).
extension ConnectionPool {
    /// Sends `command` (see ``sendUnobserved(_:)``), watched by the observer when there is one.
    nonisolated(nonsending) func send(_ command: MetaCommand) async throws -> MetaResponse {
        guard let observer = settings.observer else { return try await sendUnobserved(command) }
        let operation = ObservedOperation(
            name: command.kind.name, system: "memcached", serverAddress: settings.host, serverPort: settings.port)
        return try await observer.observe(operation, outcome: { Self.outcome(of: [$0]) }) {
            try await self.sendUnobserved(command)
        }
    }

    /// Sends `commands` (see ``sendBatchUnobserved(_:)``), watched by the observer when there is one.
    nonisolated(nonsending) func sendBatch(_ commands: [MetaCommand]) async throws -> [MetaResponse] {
        guard let observer = settings.observer, !commands.isEmpty else { return try await sendBatchUnobserved(commands) }
        let names = Set(commands.lazy.filter { $0.kind != .noop }.map(\.kind.name))
        let counted = commands.count(where: { $0.kind != .noop })
        let operation = ObservedOperation(
            name: names.count == 1 ? "BATCH \(names.first!)" : "BATCH", system: "memcached",
            serverAddress: settings.host, serverPort: settings.port, batchSize: counted)
        return try await observer.observe(operation, outcome: { Self.outcome(of: $0) }) {
            try await self.sendBatchUnobserved(commands)
        }
    }

    /// A hit when a reply carries a value the caller did not just win a lease on, a miss when
    /// a read found nothing (or won the lease), else success.
    private static func outcome(of responses: [MetaResponse]) -> ObservedOperation.Outcome {
        var missed = false
        for response in responses where !response.status.isError {
            // `W`: the read found nothing and this caller won the lease to fill it.
            if response.hasFlag(UInt8(ascii: "W")) {
                missed = true
                continue
            }
            switch response.status {
            case .value: return .hit
            case .miss: missed = true
            default: break
            }
        }
        return missed ? .miss : .success
    }
}

extension MetaCommand.Kind {
    /// The command as the meta protocol spells it.
    var name: String {
        switch self {
        case .get: "mg"
        case .set: "ms"
        case .delete: "md"
        case .noop: "mn"
        }
    }
}
#endif
