#if Memcached
import Foundation
@testable import LarderMemcached
import NIOCore
import NIOEmbedded
import Testing

@Suite(.timeLimit(.minutes(10)))
struct MetaCodecTests {
    // MARK: - Decoder: every reply kind

    static let replies: [(String, MetaResponse)] = [
        ("HD O7 c42\r\n", MetaResponse(status: .stored, flags: [MetaFlag("O", "7"), MetaFlag("c", "42")])),
        ("EN\r\n", MetaResponse(status: .miss)),
        ("NF O3\r\n", MetaResponse(status: .notFound, flags: [MetaFlag("O", "3")])),
        ("NS\r\n", MetaResponse(status: .notStored)),
        ("EX O9\r\n", MetaResponse(status: .exists, flags: [MetaFlag("O", "9")])),
        ("MN\r\n", MetaResponse(status: .noop)),
        ("ERROR\r\n", MetaResponse(status: .error)),
        ("CLIENT_ERROR bad data chunk\r\n", MetaResponse(status: .clientError("bad data chunk"))),
        ("SERVER_ERROR object too large for cache\r\n", MetaResponse(status: .serverError("object too large for cache"))),
        ("VA 5 t-1 W Z X O1\r\nhello\r\n", MetaResponse(
            status: .value, flags: [MetaFlag("t", "-1"), MetaFlag("W"), MetaFlag("Z"), MetaFlag("X"), MetaFlag("O", "1")],
            value: ByteBuffer(string: "hello"))),
        ("VA 0 W c5\r\n\r\n", MetaResponse(status: .value, flags: [MetaFlag("W"), MetaFlag("c", "5")], value: ByteBuffer())),
    ]

    @Test(arguments: 0..<replies.count)
    func decodesEveryReplyKind(index: Int) throws {
        let (text, expected) = Self.replies[index]
        var buffer = ByteBuffer(string: text)
        let decoded = try MetaResponseDecoder.parse(&buffer)
        #expect(decoded == expected)
        #expect(buffer.readableBytes == 0)
    }

    @Test func decodesAReplySplitAtEveryByteBoundary() throws {
        // Given every reply kind back to back, with a value that holds \r\n itself
        let stream = Self.replies.map(\.0).joined() + "VA 8 O2\r\nab\r\ncd\r\n\r\n"
        let expected = Self.replies.map(\.1) + [MetaResponse(status: .value, flags: [MetaFlag("O", "2")], value: ByteBuffer(string: "ab\r\ncd\r\n"))]
        let bytes = Array(stream.utf8)
        for split in 0...bytes.count {
            // When the stream arrives in two reads split at `split`
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(MetaResponseDecoder()))
            try channel.writeInbound(ByteBuffer(bytes: bytes[..<split]))
            try channel.writeInbound(ByteBuffer(bytes: bytes[split...]))
            // Then every reply comes out whole and in order
            var decoded: [MetaResponse] = []
            while let response = try channel.readInbound(as: MetaResponse.self) { decoded.append(response) }
            #expect(decoded == expected, "split at \(split)")
            _ = try channel.finish()
        }
    }

    @Test func decodesAByteAtATime() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(MetaResponseDecoder()))
        for byte in "VA 4 O1\r\n\r\n\r\n\r\nHD O2\r\n".utf8 {
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
        }
        #expect(try channel.readInbound(as: MetaResponse.self)?.value == ByteBuffer(string: "\r\n\r\n"))
        #expect(try channel.readInbound(as: MetaResponse.self)?.status == .stored)
        _ = try channel.finish()
    }

    @Test func readsFlagsOfAReceivedReplyWithoutListingThem() throws {
        // Given a reply as it comes off the wire
        var buffer = ByteBuffer(string: "VA 2 t-1 c42 W O9 t7\r\nhi\r\n")
        let response = try #require(try MetaResponseDecoder.parse(&buffer))
        // Then its flags read in place as they would from the listed flags
        #expect(response.opaque == 9)
        #expect(response.hasFlag(UInt8(ascii: "W")))
        #expect(!response.hasFlag(UInt8(ascii: "Z")))
        #expect(response.integerFlag(UInt8(ascii: "c")) == 42)
        #expect(response.integerFlag(UInt8(ascii: "t")) == nil, "the first t is -1: no number")
        #expect(response.integerFlag(UInt8(ascii: "k")) == nil)
        #expect(response.flags == [MetaFlag("t", "-1"), MetaFlag("c", "42"), MetaFlag("W"), MetaFlag("O", "9"), MetaFlag("t", "7")])
        // And a reply built from a list answers the same questions
        let listed = MetaResponse(status: .value, flags: response.flags, value: ByteBuffer(string: "hi"))
        #expect(listed == response)
        #expect(listed.opaque == 9 && listed.integerFlag(UInt8(ascii: "c")) == 42 && listed.hasFlag(UInt8(ascii: "W")))
        // And setting flags replaces the opaque with the new list's
        var changed = response
        changed.flags = [MetaFlag("O", "5")]
        #expect(changed.opaque == 5 && !changed.hasFlag(UInt8(ascii: "W")))
    }

    @Test(arguments: [
        "XX\r\n", "VA\r\n", "VA -1\r\n", "VA 99999999999999999999999\r\n", "VA 3\r\nabcXY", "HD 1bad\r\n", "HD\n",
        "HD O\u{01}\r\n",
    ])
    func refusesMalformedReplies(text: String) {
        var buffer = ByteBuffer(string: text)
        #expect(throws: MemcachedError.self) { try MetaResponseDecoder.parse(&buffer) }
    }

    @Test func refusesTooLongLinesAndValues() {
        var line = ByteBuffer(string: "HD " + String(repeating: "k", count: 9_000))
        #expect(throws: MemcachedError.self) { try MetaResponseDecoder.parse(&line, maxLineLength: 8_192) }
        var value = ByteBuffer(string: "VA 2000\r\n")
        #expect(throws: MemcachedError.self) { try MetaResponseDecoder.parse(&value, maxValueLength: 1_000) }
    }

    // MARK: - Encoder

    @Test func encodesEachCommand() throws {
        let channel = EmbeddedChannel(handler: MessageToByteHandler(MetaCommandEncoder()))
        try channel.writeOutbound(MetaCommand(.get, key: Array("k1".utf8), flags: [.value, .ttl(30), .opaque(4)]))
        try channel.writeOutbound(MetaCommand(.set(ByteBuffer(string: "a\r\nb")), key: Array("k2".utf8), flags: [.ttl(0), .compareCAS(9)]))
        try channel.writeOutbound(MetaCommand(.delete, key: Array("k3".utf8), flags: [.invalidate, .quiet]))
        try channel.writeOutbound(MetaCommand(.noop))
        var written = ""
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) { written += buffer.readString(length: buffer.readableBytes)! }
        #expect(written == "mg k1 v T30 O4\r\nms k2 4 T0 C9\r\na\r\nb\r\nmd k3 I q\r\nmn\r\n")
    }

    @Test(arguments: ["", "a b", "new\nline", String(repeating: "x", count: 251), "nul\u{0}"])
    func refusesKeysMemcachedCannotTake(key: String) {
        let channel = EmbeddedChannel(handler: MessageToByteHandler(MetaCommandEncoder()))
        #expect(throws: (any Error).self) { try channel.writeOutbound(MetaCommand(.get, key: Array(key.utf8))) }
    }

    // MARK: - Matching replies to pipelined commands

    private func pipeline() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        // The request handler encodes commands and parses replies itself: one buffer per flush,
        // replies read straight from each inbound buffer.
        try channel.pipeline.syncOperations.addHandler(MetaRequestHandler())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 11211)).wait()
        #expect(channel.isActive)
        return channel
    }

    private func send(_ channel: EmbeddedChannel, _ command: MetaCommand) -> EventLoopFuture<MetaResponse> {
        let promise = channel.eventLoop.makePromise(of: MetaResponse.self)
        channel.writeAndFlush(PendingCommand(command: command, promise: ReplySink(promise)), promise: nil)
        return promise.futureResult
    }

    private func result(_ future: EventLoopFuture<MetaResponse>) -> Result<MetaResponse, any Error>? {
        // An embedded loop runs the callback at once, on this thread.
        final class Outcome: @unchecked Sendable { var value: Result<MetaResponse, any Error>? }
        let outcome = Outcome()
        future.whenComplete { outcome.value = $0 }
        return outcome.value
    }

    @Test func theHandlerMatchesRepliesSplitAtEveryByteBoundary() throws {
        // Given three pipelined gets whose replies (one value holding \r\n) arrive in two reads
        let stream = Array("VA 4 t-1 O1\r\na\r\nb\r\nEN O2\r\nVA 1 c3 O3\r\nC\r\n".utf8)
        for split in 0...stream.count {
            let channel = try pipeline()
            let replies = ["a", "b", "c"].map { send(channel, MetaCommand(.get, key: Array($0.utf8), flags: [.value])) }
            // When the bytes are cut at `split`
            try channel.writeInbound(ByteBuffer(bytes: stream[..<split]))
            try channel.writeInbound(ByteBuffer(bytes: stream[split...]))
            // Then every command gets its own reply, whole, and the connection stays open
            #expect(try result(replies[0])?.get().value == ByteBuffer(string: "a\r\nb"), "split at \(split)")
            #expect(try result(replies[1])?.get().status == .miss, "split at \(split)")
            #expect(try result(replies[2])?.get().integerFlag(UInt8(ascii: "c")) == 3, "split at \(split)")
            #expect(channel.isActive)
        }
    }

    @Test func theHandlerRefusesALineLongerThanItsLimit() throws {
        // Given a handler that takes lines of at most 16 bytes
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(MetaRequestHandler(maxLineLength: 16))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 11211)).wait()
        let reply = send(channel, MetaCommand(.get, key: Array("a".utf8), flags: [.value]))
        // When a reply line runs past it without ending
        try channel.writeInbound(ByteBuffer(string: "VA 1 O1 " + String(repeating: "k", count: 32)))
        // Then the command fails and the connection closes
        #expect(throws: MemcachedError.self) { try result(reply)?.get() }
        #expect(!channel.isActive)
    }

    @Test func commandsQueuedInOneTurnLeaveInOneWriteAndABadKeyFailsOnlyItsOwn() throws {
        // Given a connection with three commands submitted together, one with a key memcached
        // cannot take
        let channel = try pipeline()
        let handler = try channel.pipeline.syncOperations.handler(type: MetaRequestHandler.self)
        let promises = (0..<3).map { _ in channel.eventLoop.makePromise(of: MetaResponse.self) }
        handler.submit([
            PendingCommand(command: MetaCommand(.get, key: Array("a".utf8), flags: [.value]), promise: ReplySink(promises[0])),
            PendingCommand(command: MetaCommand(.get, key: Array("bad key".utf8), flags: [.value]), promise: ReplySink(promises[1])),
            PendingCommand(command: MetaCommand(.delete, key: Array("c".utf8)), promise: ReplySink(promises[2])),
        ])
        // Then one buffer leaves, holding both good commands numbered in order
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: written) == "mg a v O1\r\nmd c O2\r\n")
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        // And the bad key fails its own command at once, while the others get their replies
        #expect(throws: MemcachedError.self) { try result(promises[1].futureResult)?.get() }
        try channel.writeInbound(ByteBuffer(string: "EN O1\r\nHD O2\r\n"))
        #expect(try result(promises[0].futureResult)?.get().status == .miss)
        #expect(try result(promises[2].futureResult)?.get().status == .stored)
        #expect(channel.isActive)
    }

    @Test func commandsQueuedWhileRepliesAreDueLeaveWithTheNextReadAndFailWithTheConnection() throws {
        // Given a connection whose callers hand it commands through its queue
        let channel = try pipeline()
        let handler = try channel.pipeline.syncOperations.handler(type: MetaRequestHandler.self)
        let connection = MetaConnection(channel: channel, handler: handler)
        // (An embedded channel's caller is always on its loop: `onLoop` plays the other kind.)
        func submit(_ key: String, onLoop: Bool = false) -> EventLoopFuture<MetaResponse> {
            let promise = channel.eventLoop.makePromise(of: MetaResponse.self)
            let command = PendingCommand(command: MetaCommand(.get, key: Array(key.utf8), flags: [.value]), promise: ReplySink(promise))
            connection.submit(command, callerIsOnLoop: onLoop)
            return promise.futureResult
        }
        func written() throws -> String? { try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } }
        // When nothing is due, the first caller schedules the write on the event loop
        let a = submit("a")
        #expect(try written() == nil, "not before the loop runs the drain")
        channel.embeddedEventLoop.run()
        #expect(try written() == "mg a v O1\r\n")
        // While a's reply is due, later callers schedule nothing: their commands wait for the read
        let b = submit("b")
        let c = submit("c")
        channel.embeddedEventLoop.run()
        #expect(try written() == nil)
        // And leave together, in one write, as soon as the read is done
        try channel.writeInbound(ByteBuffer(string: "EN O1\r\n"))
        #expect(try result(a)?.get().status == .miss)
        #expect(try written() == "mg b v O2\r\nmg c v O3\r\n")
        try channel.writeInbound(ByteBuffer(string: "VA 1 O2\r\nB\r\nEN O3\r\n"))
        #expect(try result(b)?.get().value == ByteBuffer(string: "B"))
        #expect(try result(c)?.get().status == .miss)
        // With nothing due again, the next caller schedules its own write
        let d = submit("d")
        #expect(try written() == nil)
        channel.embeddedEventLoop.run()
        #expect(try written() == "mg d v O4\r\n")
        // A caller on the loop itself schedules its write even while d's reply is due (no
        // wake-up to save there), so it leaves once the loop runs, before the next read
        let e = submit("e", onLoop: true)
        channel.embeddedEventLoop.run()
        #expect(try written() == "mg e v O5\r\n")
        // And a command queued behind d and e fails with the connection, never left waiting
        let f = submit("f")
        channel.embeddedEventLoop.run()
        #expect(try written() == nil)
        try channel.close().wait()
        #expect(throws: MemcachedError.self) { try result(d)?.get() }
        #expect(throws: MemcachedError.self) { try result(e)?.get() }
        #expect(throws: MemcachedError.self) { try result(f)?.get() }
        #expect(try written() == nil, "nothing is written on a closed connection")
    }

    @Test func writesBeforeAFlushShareOneBuffer() throws {
        let channel = try pipeline()
        let first = channel.eventLoop.makePromise(of: MetaResponse.self)
        let second = channel.eventLoop.makePromise(of: MetaResponse.self)
        channel.write(PendingCommand(command: MetaCommand(.get, key: Array("x".utf8)), promise: ReplySink(first)), promise: nil)
        channel.write(PendingCommand(command: MetaCommand(.noop), promise: ReplySink(second)), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "nothing leaves before the flush")
        channel.flush()
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: written) == "mg x O1\r\nmn\r\n")
    }

    @Test func matchesPipelinedRepliesByOpaqueAndSettlesQuietOnes() throws {
        let channel = try pipeline()
        let get = send(channel, MetaCommand(.get, key: Array("a".utf8), flags: [.value]))
        let quietMiss = send(channel, MetaCommand(.get, key: Array("b".utf8), flags: [.value, .quiet]))
        let quietSet = send(channel, MetaCommand(.set(ByteBuffer(string: "x")), key: Array("c".utf8), flags: [.quiet]))
        let quietHit = send(channel, MetaCommand(.get, key: Array("d".utf8), flags: [.value, .quiet]))
        let noop = send(channel, MetaCommand(.noop))
        // The handler numbers opaques 1, 2, 3, 4 in order; the server suppresses 2's miss and 3's HD.
        try channel.writeInbound(ByteBuffer(string: "VA 1 O1\r\nA\r\nVA 1 O4\r\nD\r\nMN\r\n"))
        #expect(try result(get)?.get().value == ByteBuffer(string: "A"))
        #expect(try result(quietMiss)?.get().status == .miss)
        #expect(try result(quietSet)?.get().status == .stored)
        #expect(try result(quietHit)?.get().value == ByteBuffer(string: "D"))
        #expect(try result(noop)?.get().status == .noop)
        #expect(channel.isActive)
    }

    @Test func aServerErrorMidPipelineAnswersItsCommandAndTheRestGoOn() throws {
        let channel = try pipeline()
        let first = send(channel, MetaCommand(.get, key: Array("a".utf8), flags: [.value]))
        let second = send(channel, MetaCommand(.set(ByteBuffer(string: "big")), key: Array("b".utf8)))
        let third = send(channel, MetaCommand(.get, key: Array("c".utf8), flags: [.value]))
        try channel.writeInbound(ByteBuffer(string: "EN O1\r\nSERVER_ERROR object too large for cache\r\nVA 1 O3\r\nC\r\n"))
        #expect(try result(first)?.get().status == .miss)
        #expect(try result(second)?.get().status == .serverError("object too large for cache"))
        #expect(try result(third)?.get().value == ByteBuffer(string: "C"))
        #expect(channel.isActive)
    }

    @Test func aClientErrorMidPipelineFailsTheRestAndClosesTheConnection() throws {
        let channel = try pipeline()
        let first = send(channel, MetaCommand(.get, key: Array("a".utf8), flags: [.value]))
        let second = send(channel, MetaCommand(.get, key: Array("b".utf8), flags: [.value]))
        let third = send(channel, MetaCommand(.get, key: Array("c".utf8), flags: [.value]))
        try channel.writeInbound(ByteBuffer(string: "EN O1\r\nCLIENT_ERROR bad command line format\r\nVA 1 O3\r\nC\r\n"))
        #expect(try result(first)?.get().status == .miss)
        #expect(try result(second)?.get().status == .clientError("bad command line format"))
        #expect(throws: MemcachedError.self) { try result(third)?.get() }
        #expect(!channel.isActive)
    }

    @Test func aReplyForAnotherCommandFailsEverythingInsteadOfBeingTrusted() throws {
        let channel = try pipeline()
        let first = send(channel, MetaCommand(.get, key: Array("a".utf8), flags: [.value]))
        let second = send(channel, MetaCommand(.get, key: Array("b".utf8), flags: [.value]))
        // A reply with opaque 2 first: 1 is not quiet, so the stream is out of step.
        try channel.writeInbound(ByteBuffer(string: "VA 1 O2\r\nB\r\n"))
        #expect(throws: MemcachedError.self) { try result(first)?.get() }
        #expect(throws: MemcachedError.self) { try result(second)?.get() }
        #expect(!channel.isActive)
    }

    @Test func badBytesFailEveryPendingCommand() throws {
        let channel = try pipeline()
        let first = send(channel, MetaCommand(.get, key: Array("a".utf8), flags: [.value]))
        _ = try? channel.writeInbound(ByteBuffer(string: "VA 1 O1\r\nAXX"))
        #expect(throws: MemcachedError.self) { try result(first)?.get() }
        #expect(!channel.isActive)
    }
}
#endif
