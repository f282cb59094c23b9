// libFuzzer entry point for the RESP3 reply parser in LarderRedis.
//
// Built by Fuzz/run-redis from the parser's own sources (RESPParser, RESPValue, RedisError) with
// `-D Redis`, against the swift-nio that `swift build` already compiled, so it exercises the
// shipping parser on real `ByteBuffer`s. Besides "no crash, no hang, no sanitizer report", it
// checks the contracts the decoder relies on: a value never consumes more bytes than it was
// given, and an incomplete one consumes none; every strict prefix of a complete value is "need
// more data" (never an error, never another value); a value parses the same alone and with
// bytes after it; and every bulk string's bytes are the ones on the wire.
import NIOCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRedisReplies(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = count > 0 && start != nil ? Array(UnsafeBufferPointer(start: start!, count: count)) : []
    // Small bounds, so that the fuzzer reaches them.
    let parser = RESPParser(maxBulkLength: 1_024, maxElements: 64, maxDepth: 8, maxLineLength: 256)
    /// The value at the front of `slice` and the bytes it took; `nil` for "need more data".
    func parse(_ slice: ArraySlice<UInt8>) -> Result<(value: RESPValue, consumed: Int)?, RedisError> {
        var buffer = ByteBuffer(bytes: slice)
        let before = buffer.readableBytes
        do {
            guard let value = try parser.parse(&buffer) else {
                guard buffer.readableBytes == before else { fatalError("'need more data' consumed bytes") }
                return .success(nil)
            }
            return .success((value, before - buffer.readableBytes))
        } catch let error as RedisError {
            guard error.code == .protocolViolation else { fatalError("error \(error) is not a protocol violation") }
            return .failure(error)
        } catch {
            fatalError("the parser threw \(error), not a RedisError")
        }
    }
    // Walk the input as a stream of values, as the decoder does.
    var offset = 0
    while offset < bytes.count {
        guard case .success(let parsed?) = parse(bytes[offset...]) else { break }
        let available = bytes.count - offset
        guard parsed.consumed > 0, parsed.consumed <= available else {
            fatalError("consumed \(parsed.consumed) of \(available) bytes")
        }
        let reply = bytes[offset..<(offset + parsed.consumed)]
        checkBulkStrings(parsed.value, within: reply)
        guard case .success(let again?) = parse(reply), again.consumed == parsed.consumed, same(again.value, parsed.value) else {
            fatalError("the value alone parses differently")
        }
        for cut in 0..<parsed.consumed {
            guard case .success(nil) = parse(reply.prefix(cut)) else {
                fatalError("a prefix of \(cut) bytes of a complete value was not 'need more data'")
            }
        }
        offset += parsed.consumed
    }
    return 0
}

/// Equality where NaN equals NaN (a `,nan` double parses to NaN every time).
private func same(_ a: RESPValue, _ b: RESPValue) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)):
        return x == y || (x.isNaN && y.isNaN)
    case (.array(let x), .array(let y)), (.map(let x), .map(let y)), (.push(let x), .push(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    default:
        return a == b
    }
}

/// Every bulk string is no longer than the reply and appears in it.
private func checkBulkStrings(_ value: RESPValue, within reply: ArraySlice<UInt8>) {
    switch value {
    case .bulkString(let buffer):
        let payload = Array(buffer.readableBytesView)
        guard payload.count <= reply.count, payload.isEmpty || reply.indices.contains(where: { reply[$0...].starts(with: payload) })
        else { fatalError("a bulk string of \(payload.count) bytes is not in the reply") }
    case .array(let items), .map(let items), .push(let items):
        for item in items { checkBulkStrings(item, within: reply) }
    default:
        return
    }
}
