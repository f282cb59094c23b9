#if Redis
import NIOCore

/// Reads RESP3 values from the bytes received so far: a whole value, `nil` when more bytes are
/// needed (nothing consumed), or ``RedisError/Code/protocolViolation`` for bytes that are not
/// RESP. Never traps on input: lengths, counts, depth and line lengths are bounded, and every
/// integer is parsed with overflow checks.
struct RESPParser: Sendable {
    /// The longest bulk string accepted.
    var maxBulkLength: Int
    /// The most elements an aggregate may declare.
    var maxElements = 1 << 20
    /// The deepest nesting accepted.
    var maxDepth = 32
    /// The longest line (simple string, error, number) accepted.
    var maxLineLength = 1 << 20

    /// One value from the front of `buffer`, consuming it; `nil` (with `buffer` untouched) when
    /// the value is not complete yet.
    func parse(_ buffer: inout ByteBuffer) throws -> RESPValue? {
        var copy = buffer
        guard let value = try parseValue(&copy, depth: 0) else { return nil }
        buffer = copy
        return value
    }

    private func parseValue(_ buffer: inout ByteBuffer, depth: Int) throws -> RESPValue? {
        guard depth <= maxDepth else { throw violation("nesting deeper than \(maxDepth)") }
        guard let marker = buffer.readInteger(as: UInt8.self) else { return nil }
        switch marker {
        case UInt8(ascii: "+"):
            return try readLine(&buffer).map { .simpleString($0) }
        case UInt8(ascii: "-"):
            return try readLine(&buffer).map { .error($0) }
        case UInt8(ascii: ":"):
            guard let line = try readLine(&buffer) else { return nil }
            return .integer(try integer(line))
        case UInt8(ascii: "_"):
            guard let line = try readLine(&buffer) else { return nil }
            guard line.isEmpty else { throw violation("null with a payload") }
            return .null
        case UInt8(ascii: "#"):
            guard let line = try readLine(&buffer) else { return nil }
            switch line {
            case "t": return .boolean(true)
            case "f": return .boolean(false)
            default: throw violation("boolean \(line.prefix(16))")
            }
        case UInt8(ascii: ","):
            guard let line = try readLine(&buffer) else { return nil }
            switch line {
            case "inf": return .double(.infinity)
            case "-inf": return .double(-.infinity)
            case "nan": return .double(.nan)
            default:
                guard let value = Double(line) else { throw violation("double \(line.prefix(32))") }
                return .double(value)
            }
        case UInt8(ascii: "("):
            guard let line = try readLine(&buffer) else { return nil }
            guard !line.isEmpty, line.utf8.enumerated().allSatisfy({ ($0.element >= 0x30 && $0.element <= 0x39) || ($0.offset == 0 && $0.element == 0x2D) }) else {
                throw violation("big number \(line.prefix(32))")
            }
            return .bigNumber(line)
        case UInt8(ascii: "$"), UInt8(ascii: "="), UInt8(ascii: "!"):
            guard let line = try readLine(&buffer) else { return nil }
            let length = try integer(line)
            if length == -1, marker == UInt8(ascii: "$") { return .null }
            guard length >= 0, length <= maxBulkLength else { throw violation("bulk length \(length)") }
            guard buffer.readableBytes >= Int(length) + 2 else { return nil }
            var bytes = buffer.readSlice(length: Int(length))!
            guard buffer.readInteger(as: UInt8.self) == 0x0D, buffer.readInteger(as: UInt8.self) == 0x0A else {
                throw violation("bulk string not ended by CRLF")
            }
            switch marker {
            case UInt8(ascii: "!"):
                return .error(String(buffer: bytes))
            case UInt8(ascii: "="):
                // `txt:` or `mkd:` then the text.
                guard bytes.readableBytes >= 4, bytes.getInteger(at: bytes.readerIndex + 3, as: UInt8.self) == UInt8(ascii: ":") else {
                    throw violation("verbatim string without a format")
                }
                bytes.moveReaderIndex(forwardBy: 4)
                return .bulkString(bytes)
            default:
                return .bulkString(bytes)
            }
        case UInt8(ascii: "*"), UInt8(ascii: "~"), UInt8(ascii: ">"), UInt8(ascii: "%"), UInt8(ascii: "|"):
            guard let line = try readLine(&buffer) else { return nil }
            let declared = try integer(line)
            if declared == -1, marker == UInt8(ascii: "*") { return .null }
            let isPaired = marker == UInt8(ascii: "%") || marker == UInt8(ascii: "|")
            guard declared >= 0, declared <= maxElements else { throw violation("aggregate of \(declared) elements") }
            let count = Int(declared) * (isPaired ? 2 : 1)
            // Every element takes at least 3 bytes: no space is reserved beyond what arrived.
            var elements: [RESPValue] = []
            elements.reserveCapacity(min(count, buffer.readableBytes / 3 + 1))
            for _ in 0..<count {
                guard let element = try parseValue(&buffer, depth: depth + 1) else { return nil }
                elements.append(element)
            }
            switch marker {
            case UInt8(ascii: ">"): return .push(elements)
            case UInt8(ascii: "%"): return .map(elements)
            case UInt8(ascii: "|"):
                // Attributes describe the value that follows: skipped, the value returned.
                return try parseValue(&buffer, depth: depth + 1)
            default: return .array(elements)
            }
        default:
            throw violation("unknown type byte 0x\(String(marker, radix: 16))")
        }
    }

    /// The text up to the next CRLF (consumed), or `nil` when no CRLF arrived yet.
    private func readLine(_ buffer: inout ByteBuffer) throws -> String? {
        let view = buffer.readableBytesView
        guard let cr = view.firstIndex(of: 0x0D) else {
            guard view.count <= maxLineLength else { throw violation("line longer than \(maxLineLength) bytes") }
            return nil
        }
        let length = cr - view.startIndex
        guard length <= maxLineLength else { throw violation("line longer than \(maxLineLength) bytes") }
        guard buffer.readableBytes >= length + 2 else { return nil }
        guard buffer.getInteger(at: buffer.readerIndex + length + 1, as: UInt8.self) == 0x0A else {
            throw violation("CR not followed by LF")
        }
        let text = buffer.readString(length: length)!
        buffer.moveReaderIndex(forwardBy: 2)
        return text
    }

    private func integer(_ line: String) throws -> Int64 {
        guard line.utf8.count <= 20, let value = Int64(line) else { throw violation("integer \(line.prefix(24))") }
        return value
    }

    private func violation(_ what: String) -> RedisError {
        RedisError(.protocolViolation, "the server sent \(what)")
    }
}

/// Hands each whole value the server sent to the next handler.
struct RESPDecoder: ByteToMessageDecoder {
    typealias InboundOut = RESPValue
    let parser: RESPParser

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let value = try parser.parse(&buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(value))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }
}
#endif
