#if Tracing
import Foundation
import InMemoryTracing
import Larder
import LarderTracing
import Synchronization
import Testing
import Tracing

/// Get-or-load's loader runs, traced through `OperationTracer` into swift-distributed-tracing's
/// in-memory tracer.
@Suite(.timeLimit(.minutes(10)))
struct LoadTracingTests {
    struct LoaderFailure: Error {}

    static func storage(tracer: InMemoryTracer) throws -> Storage<String, Data> {
        try Storage(transformer: .data) { $0.observer = OperationTracer(tracer: tracer) }
    }

    // MARK: - Load spans

    @Test func aLoadIsOneInternalSpanWithItsOutcomeUnderTheCallersSpan() async throws {
        // Given a traced storage and a request span
        let tracer = InMemoryTracer()
        let storage = try Self.storage(tracer: tracer)

        // When a missing key is loaded inside the request, and read again
        let value = try await tracer.withSpan("request") { _ in
            try await storage.value(forKey: "feed") { _ in Data("loaded".utf8) }
        }
        _ = try await storage.value(forKey: "feed") { _ in Data("again".utf8) }

        // Then one load span, a child of the request, says the load succeeded (the second call
        // was a memory hit and loaded nothing)
        #expect(value == Data("loaded".utf8))
        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "request" })
        let loads = spans.filter { $0.operationName == ObservedOperation.load.name }
        try #require(loads.count == 1)
        #expect(loads[0].kind == .internal)
        #expect(loads[0].parentSpanID == request.spanID)
        #expect(loads[0].traceID == request.traceID)
        #expect(loads[0].attributes.get(OperationTracer.AttributeName.outcome) == .string("success"))
        #expect(loads[0].attributes.get(OperationTracer.AttributeName.system) == nil)
        #expect(loads[0].errors.isEmpty)
    }

    @Test func aLoaderThatThrowsRecordsTheErrorOnItsSpan() async throws {
        // Given a traced storage
        let tracer = InMemoryTracer()
        let storage = try Self.storage(tracer: tracer)

        // When the loader throws
        await #expect(throws: LoaderFailure.self) {
            try await storage.value(forKey: "broken") { _ in throw LoaderFailure() }
        }

        // Then the load span ends in error, with the error recorded
        let load = try #require(tracer.finishedSpans.first { $0.operationName == ObservedOperation.load.name })
        #expect(load.attributes.get(OperationTracer.AttributeName.outcome) == .string("error"))
        #expect(load.status?.code == .error)
        #expect(load.errors.count == 1)
        #expect(load.errors.first?.error is LoaderFailure)
        #expect(load.attributes.get(OperationTracer.AttributeName.errorType) == .string(String(reflecting: LoaderFailure.self)))
    }

    @Test func concurrentCallersOfOneKeyMakeOneLoadSpan() async throws {
        // Given a traced storage and a loader held until every caller waits
        let tracer = InMemoryTracer()
        let storage = try Self.storage(tracer: tracer)
        let calls = Counter()

        // When 20 callers ask for the same missing key at once
        let values = try await withThrowingTaskGroup(of: Data.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    try await storage.value(forKey: "shared") { _ in
                        calls.increment()
                        return Data("one".utf8)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }

        // Then every caller has the value, and there are as many load spans as loader runs
        #expect(values.count == 20 && values.allSatisfy { $0 == Data("one".utf8) })
        let loads = tracer.finishedSpans.filter { $0.operationName == ObservedOperation.load.name }
        #expect(loads.count == calls.value)
        #expect(calls.value >= 1)
        #expect(storage.statistics.loads == calls.value)
    }
}

/// A thread-safe count of loader runs.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
#endif
