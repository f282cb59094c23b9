#if Memcached && Tracing
import Foundation
import InMemoryTracing
import Larder
import LarderMemcached
import LarderTestSupport
import LarderTracing
import Testing
import Tracing

/// Spans of the memcached tier's commands (OpenTelemetry's database attributes) against a real
/// memcached, and a get-or-load's load span around them.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct MemcachedTracingTests {
    typealias Name = OperationTracer.AttributeName

    static func store(port: Int, tracer: InMemoryTracer) throws -> MemcachedStore {
        var configuration = MemcachedStore.Configuration(port: port, namespace: "trace:", deadline: .seconds(300))
        configuration.observer = OperationTracer(tracer: tracer)
        return try MemcachedStore(configuration: configuration)
    }

    @Test func aGetOrLoadTracesItsCommandsAndItsLoadUnderTheRequest() async throws {
        try await withChildProcesses { scope in
            // Given a traced storage over a traced memcached tier
            let server = try await MemcachedServer.start(in: scope)
            let tracer = InMemoryTracer()
            let remote = try Self.store(port: server.port, tracer: tracer)
            var configuration = Storage<String, Data>.Configuration()
            configuration.observer = OperationTracer(tracer: tracer)
            let storage = try Storage(configuration: configuration, additionalTiers: [remote], transformer: .data)

            // When a request loads a missing key
            _ = try await tracer.withSpan("request") { _ in
                try await storage.value(forKey: "feed") { _ in Data("loaded".utf8) }
            }

            // Then the read that missed, the load and the write are spans of the request's trace
            let spans = tracer.popFinishedSpans()
            let request = try #require(spans.first { $0.operationName == "request" })
            let reads = spans.filter { $0.operationName == "mg" }
            let read = try #require(reads.first)
            #expect(read.kind == .client)
            #expect(read.traceID == request.traceID)
            #expect(read.attributes.get(Name.system) == .string("memcached"))
            #expect(read.attributes.get(Name.operation) == .string("mg"))
            #expect(read.attributes.get(Name.serverAddress) == .string("127.0.0.1"))
            #expect(read.attributes.get(Name.serverPort) == .int64(Int64(server.port)))
            #expect(read.attributes.get(Name.outcome) == .string("miss"))
            let load = try #require(spans.first { $0.operationName == "load" })
            #expect(load.parentSpanID == request.spanID)
            #expect(load.attributes.get(Name.outcome) == .string("success"))
            let write = try #require(spans.first { $0.operationName == "ms" })
            #expect(write.traceID == request.traceID)
            #expect(write.attributes.get(Name.outcome) == .string("success"))

            // When another storage (empty memory) reads the key through the same tier
            let other = try Storage<String, Data>(additionalTiers: [remote], transformer: .data)
            #expect(try await other.value(forKey: "feed") == Data("loaded".utf8))

            // Then its commands are reads: the value, a hit, and the fleet's clear time (a storage
            // reads it before trusting a shared value: see SharedInvalidations), a miss
            let later = tracer.popFinishedSpans()
            #expect(later.map(\.operationName) == ["mg", "mg"])
            #expect(later.filter { $0.attributes.get(Name.outcome) == .string("hit") }.count == 1)
            #expect(later.filter { $0.attributes.get(Name.outcome) == .string("miss") }.count == 1)
            await remote.close()
        }
    }

    @Test func aBatchReadIsOneSpanWithItsSize() async throws {
        try await withChildProcesses { scope in
            // Given a traced tier holding one of three keys
            let server = try await MemcachedServer.start(in: scope)
            let tracer = InMemoryTracer()
            let remote = try Self.store(port: server.port, tracer: tracer)
            try await remote.setValue(Data("a".utf8), forKey: "a", expiry: nil, metadata: nil, isCompressible: false)
            tracer.clearFinishedSpans()

            // When the three are read in one batch
            let found = try await remote.entries(forKeys: ["a", "b", "c"])

            // Then one span covers the batch, sized by its reads, and it found a value
            #expect(found.keys.sorted() == ["a"])
            let spans = tracer.finishedSpans
            try #require(spans.count == 1)
            #expect(spans[0].operationName == "BATCH mg")
            #expect(spans[0].attributes.get(Name.batchSize) == .int64(3))
            #expect(spans[0].attributes.get(Name.outcome) == .string("hit"))
            await remote.close()
        }
    }

    @Test func aServerThatCannotBeReachedIsAnErrorSpan() async throws {
        // Given a traced tier whose only server refuses connections (nothing listens on port 1)
        let tracer = InMemoryTracer()
        let remote = try Self.store(port: 1, tracer: tracer)

        // When a read fails
        await #expect(throws: StorageError.self) { try await remote.entry(forKey: "k") }

        // Then its span ends in error, with the error recorded
        let span = try #require(tracer.finishedSpans.first { $0.operationName == "mg" })
        #expect(span.attributes.get(Name.outcome) == .string("error"))
        #expect(span.attributes.get(Name.serverPort) == .int64(1))
        #expect(span.status?.code == .error)
        #expect(span.errors.count == 1)
        await remote.close()
    }
}
#endif
