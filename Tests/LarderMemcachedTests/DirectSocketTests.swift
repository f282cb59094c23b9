#if Memcached
import Foundation
import Larder
import LarderTestSupport
import NIOCore
import NIOPosix
import Testing
@testable import LarderMemcached

/// The socket on which a lone caller writes its own command and reads its own reply: real
/// memcached, a delaying proxy and a server that answers with wrong bytes.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct DirectSocketTests {
    static func socket(port: Int) -> DirectSocket {
        DirectSocket(host: "127.0.0.1", port: port, connectTimeout: .seconds(300), retryDelay: .milliseconds(1), maxValueLength: 1 << 20)
    }

    /// Sends `command` once the socket has connected (the first calls pass while it connects).
    static func send(_ command: MetaCommand, on socket: DirectSocket, deadline: TimeAmount = .seconds(60)) async throws -> MetaResponse {
        // Generous: connecting runs on a thread of its own, which a loaded machine may not run
        // for a long while.
        let giveUp = NIODeadline.now() + .seconds(300)
        while NIODeadline.now() < giveUp {
            if let response = try await socket.send(command, deadline: .now() + deadline) { return response }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw TestFailure("the direct socket never connected")
    }

    static func set(_ key: String, _ value: String) -> MetaCommand {
        MetaCommand(.set(ByteBuffer(string: value)), key: Array(key.utf8))
    }

    static func get(_ key: String) -> MetaCommand {
        MetaCommand(.get, key: Array(key.utf8), flags: [.value])
    }

    @Test func aLoneCallSetsAndGetsThroughTheSocketAndKeepsIt() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let socket = Self.socket(port: server.port)
            // Connecting happens off the caller's thread: the first call passes.
            #expect(try await socket.send(Self.get("k"), deadline: .now() + .seconds(60)) == nil)
            #expect(try await Self.send(Self.set("k", "one"), on: socket).status == .stored)
            for round in 0..<100 {
                let value = "value \(round)"
                // Connected: every call takes the socket, none passes.
                #expect(try await socket.send(Self.set("k", value), deadline: .now() + .seconds(60))?.status == .stored)
                let reply = try #require(try await socket.send(Self.get("k"), deadline: .now() + .seconds(60)))
                #expect(reply.status == .value)
                #expect(reply.value.map { String(buffer: $0) } == value)
            }
            #expect(try await socket.send(Self.get("absent"), deadline: .now() + .seconds(60))?.status == .miss)
            socket.close()
            #expect(try await socket.send(Self.get("k"), deadline: .now() + .seconds(60)) == nil)
        }
    }

    /// A quiet batch: each hit answered by its own token, each miss settled as a miss when a
    /// later reply passes it, the `mn` last.
    @Test func aQuietBatchGetsEveryHitAndMissInOrder() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let socket = Self.socket(port: server.port)
            for index in stride(from: 0, to: 40, by: 2) {
                #expect(try await Self.send(Self.set("key-\(index)", "value \(index)"), on: socket).status == .stored)
            }
            let keys = (0..<40).map { "key-\($0)" }
            let commands = keys.map { MetaCommand(.get, key: Array($0.utf8), flags: [.value, .quiet]) } + [MetaCommand(.noop)]
            for _ in 0..<3 {
                let replies = try #require(try await socket.sendBatch(commands, deadline: .now() + .seconds(60)))
                #expect(replies.count == 41)
                for index in 0..<40 {
                    if index.isMultiple(of: 2) {
                        #expect(replies[index].status == .value)
                        #expect(replies[index].value.map { String(buffer: $0) } == "value \(index)")
                    } else {
                        #expect(replies[index].status == .miss)
                    }
                }
                #expect(replies[40].status == .noop)
            }
            socket.close()
        }
    }

    @Test func aSlowReplyIsWaitedForOffTheCallersThread() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let socket = Self.socket(port: proxy.port)
            #expect(try await Self.send(Self.set("k", "slow"), on: socket).status == .stored)
            // Far beyond the caller's blocking budget, well within the deadline.
            proxy.set(.delay(.milliseconds(20)))
            let reply = try await Self.send(Self.get("k"), on: socket)
            #expect(reply.value.map { String(buffer: $0) } == "slow")
            proxy.set(.pass)
            #expect(try await socket.send(Self.get("k"), deadline: .now() + .seconds(60))?.status == .value)
            socket.close()
            await proxy.close()
        }
    }

    @Test func noReplyByTheDeadlineIsATimeoutAndTheSocketIsReplaced() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let socket = Self.socket(port: proxy.port)
            #expect(try await Self.send(Self.set("k", "v"), on: socket).status == .stored)
            proxy.set(.blackHole)
            await #expect(throws: MemcachedError.self) {
                _ = try await socket.send(Self.get("k"), deadline: .now() + .milliseconds(50))
            }
            // The timed-out socket was closed: the next call passes while a new one connects.
            proxy.set(.pass)
            #expect(try await socket.send(Self.get("k"), deadline: .now() + .seconds(60)) == nil)
            #expect(try await Self.send(Self.get("k"), on: socket).value.map { String(buffer: $0) } == "v")
            socket.close()
            await proxy.close()
        }
    }

    /// A reply with another command's token, or bytes beyond the one reply, is refused and the
    /// socket dropped: its stream can no longer be trusted.
    @Test(arguments: ["HD O999999\r\n", "HD\r\nHD\r\n", "VA 3 O1\r\nabc\r\nEN\r\n", "XX\r\n", "MN\r\n"])
    func bytesThatDoNotAnswerTheCommandAreRefused(reply: String) async throws {
        let server = try await FixedReplyServer(reply: reply)
        let socket = Self.socket(port: server.port)
        let error = await #expect(throws: MemcachedError.self) {
            _ = try await Self.send(Self.get("k"), on: socket)
        }
        #expect(error?.code == .protocolViolation)
        #expect(try await socket.send(Self.get("k"), deadline: .now() + .seconds(60)) == nil)
        socket.close()
        await server.close()
    }

    /// `CLIENT_ERROR` is handed to the caller, and the socket, whose stream the server may
    /// have skipped bytes of, is not used again.
    @Test func aClientErrorIsAnsweredAndTheSocketIsNotKept() async throws {
        let server = try await FixedReplyServer(reply: "CLIENT_ERROR bad command line format\r\n")
        let socket = Self.socket(port: server.port)
        let reply = try await Self.send(Self.get("k"), on: socket)
        #expect(reply.status == .clientError("bad command line format"))
        #expect(try await socket.send(Self.get("k"), deadline: .now() + .seconds(60)) == nil)
        #expect(server.connections.value >= 1)
        socket.close()
        await server.close()
    }
}

/// A TCP server on 127.0.0.1 that answers every read with the same bytes.
final class FixedReplyServer: Sendable {
    private final class Replier: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let reply: String
        init(reply: String) { self.reply = reply }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: reply)), promise: nil)
        }
    }

    private let channel: any Channel
    let port: Int
    let connections = Tally()

    init(reply: String) async throws {
        let connections = self.connections
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { child in
                connections.add()
                return child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(Replier(reply: reply))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress!.port!
    }

    func close() async {
        try? await channel.close()
    }
}
#endif
