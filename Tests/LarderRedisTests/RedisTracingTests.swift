#if Redis && Tracing
import Foundation
import InMemoryTracing
import Larder
import LarderRedis
import LarderTestSupport
import LarderTracing
import Testing
import Tracing

/// Spans of the Redis tier's round trips (OpenTelemetry's database attributes) against a real
/// redis-server.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisTracingTests {
    typealias Name = OperationTracer.AttributeName

    static func store(port: Int, tracer: InMemoryTracer) throws -> RedisStore {
        var configuration = RedisStore.Configuration(port: port, namespace: "trace:", deadline: .seconds(300), isTrackingEnabled: false)
        configuration.observer = OperationTracer(tracer: tracer)
        return try RedisStore(configuration: configuration)
    }

    @Test func readsAndWritesAreClientSpansWithTheirOutcome() async throws {
        try await withChildProcesses { scope in
            // Given a traced Redis tier
            let server = try await RedisServer.start(in: scope)
            let tracer = InMemoryTracer()
            let remote = try Self.store(port: server.port, tracer: tracer)

            // When a key is written, read, and a missing key is read
            try await remote.setValue(Data("v".utf8), forKey: "k", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try await remote.entry(forKey: "k")?.data == Data("v".utf8))
            #expect(try await remote.entry(forKey: "missing") == nil)

            // Then each round trip is one client span: the write's pipeline, a hit, a miss
            let spans = tracer.finishedSpans
            #expect(spans.map(\.operationName) == ["BATCH", "GET", "GET"])
            for span in spans {
                #expect(span.kind == .client)
                #expect(span.attributes.get(Name.system) == .string("redis"))
                #expect(span.attributes.get(Name.serverAddress) == .string("127.0.0.1"))
                #expect(span.attributes.get(Name.serverPort) == .int64(Int64(server.port)))
            }
            try #require(spans.count == 3)
            // (the write's pipeline: the DELs of its lock and stale copy, then the SET)
            guard case .int64(let batchSize) = spans[0].attributes.get(Name.batchSize) else {
                Issue.record("the write's span has no batch size: \(spans[0].attributes)")
                return
            }
            #expect(batchSize >= 2)
            #expect(spans[0].attributes.get(Name.outcome) == .string("success"))
            #expect(spans[1].attributes.get(Name.operation) == .string("GET"))
            #expect(spans[1].attributes.get(Name.outcome) == .string("hit"))
            #expect(spans[2].attributes.get(Name.outcome) == .string("miss"))
            await remote.close()
        }
    }

    @Test func aGetOrLoadTracesItsLeaseAndItsLoadUnderTheRequest() async throws {
        try await withChildProcesses { scope in
            // Given a traced storage over a traced Redis tier
            let server = try await RedisServer.start(in: scope)
            let tracer = InMemoryTracer()
            let remote = try Self.store(port: server.port, tracer: tracer)
            var configuration = Storage<String, Data>.Configuration()
            configuration.observer = OperationTracer(tracer: tracer)
            let storage = try Storage(configuration: configuration, additionalTiers: [remote], transformer: .data)

            // When a request loads a missing key
            _ = try await tracer.withSpan("request") { _ in
                try await storage.value(forKey: "feed") { _ in Data("loaded".utf8) }
            }

            // Then the lease read, the load and the fill are spans of the request's trace
            let spans = tracer.finishedSpans
            let request = try #require(spans.first { $0.operationName == "request" })
            let load = try #require(spans.first { $0.operationName == "load" })
            #expect(load.parentSpanID == request.spanID)
            let commands = spans.filter { $0.attributes.get(Name.system) == .string("redis") }
            #expect(commands.count >= 2)
            #expect(commands.allSatisfy { $0.traceID == request.traceID && $0.operationName == "EVAL" })
            await remote.close()
        }
    }

    @Test func aServerThatCannotBeReachedIsAnErrorSpan() async throws {
        // Given a traced tier whose server refuses connections (nothing listens on port 1)
        let tracer = InMemoryTracer()
        let remote = try Self.store(port: 1, tracer: tracer)

        // When a read fails
        await #expect(throws: StorageError.self) { try await remote.entry(forKey: "k") }

        // Then its span ends in error, with the error recorded
        let span = try #require(tracer.finishedSpans.first)
        #expect(span.operationName == "GET")
        #expect(span.attributes.get(Name.outcome) == .string("error"))
        #expect(span.status?.code == .error)
        #expect(span.errors.count == 1)
        await remote.close()
    }
}
#endif
