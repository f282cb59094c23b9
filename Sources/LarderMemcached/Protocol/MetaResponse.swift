#if Memcached
public import NIOCore

/// One reply of memcached's meta protocol.
public struct MetaResponse: Sendable, Hashable {
    /// The reply's status line code.
    public typealias Status = MetaReplyStatus

    public var status: Status
    public var flags: [MetaFlag]
    /// The value of a `VA` reply.
    public var value: ByteBuffer?

    public init(status: Status, flags: [MetaFlag] = [], value: ByteBuffer? = nil) {
        self.status = status
        self.flags = flags
        self.value = value
    }

    /// The opaque token echoed from the request, if any.
    public var opaque: UInt32? {
        for flag in flags where flag.code == UInt8(ascii: "O") {
            return flag.integerToken.flatMap { UInt32(exactly: $0) }
        }
        return nil
    }
}

/// Reads memcached meta replies from a byte stream, however the bytes are split.
///
/// Bad input (an unknown status, a malformed size, a line or value past the limits, a value
/// not followed by `\r\n`) throws a ``MemcachedError`` with code `.protocolViolation`; the
/// connection that produced it is then closed, never reused.
public struct MetaResponseDecoder: ByteToMessageDecoder, Sendable {
    public typealias InboundOut = MetaResponse

    /// The longest status line accepted (flags included).
    public let maxLineLength: Int
    /// The largest value accepted.
    public let maxValueLength: Int

    public init(maxLineLength: Int = 8_192, maxValueLength: Int = 64 << 20) {
        self.maxLineLength = maxLineLength
        self.maxValueLength = maxValueLength
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let response = try Self.parse(&buffer, maxLineLength: maxLineLength, maxValueLength: maxValueLength) else {
            return .needMoreData
        }
        context.fireChannelRead(wrapInboundOut(response))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }

    /// Parses one reply from the front of `buffer`, consuming it; `nil` (nothing consumed)
    /// when the reply is not complete yet.
    public static func parse(_ buffer: inout ByteBuffer, maxLineLength: Int = 8_192, maxValueLength: Int = 64 << 20) throws -> MetaResponse? {
        let parsed = try buffer.withUnsafeReadableBytes {
            try MetaReplyParser.parse($0, maxLineLength: maxLineLength, maxValueLength: maxValueLength)
        }
        guard let parsed else { return nil }
        let value = parsed.valueRange.map { buffer.getSlice(at: buffer.readerIndex + $0.lowerBound, length: $0.count)! }
        buffer.moveReaderIndex(forwardBy: parsed.consumed)
        return MetaResponse(status: parsed.status, flags: parsed.flags, value: value)
    }
}
#endif
