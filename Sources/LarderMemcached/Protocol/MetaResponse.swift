#if Memcached
public import NIOCore

/// One reply of memcached's meta protocol.
public struct MetaResponse: Sendable, Hashable {
    /// The reply's status line code.
    public typealias Status = MetaReplyStatus

    /// Flags as given to `init`, or as received: the checked flag words of the status line,
    /// read only when asked (a reply read from the wire keeps a view of them, not an array).
    private enum Flags: Sendable {
        case list([MetaFlag])
        case received(ByteBuffer)
    }

    public var status: Status
    private var storedFlags: Flags
    /// The value of a `VA` reply.
    public var value: ByteBuffer?
    /// The first `O` flag's token, read once.
    private(set) var opaqueToken: UInt32?

    public init(status: Status, flags: [MetaFlag] = [], value: ByteBuffer? = nil) {
        self.status = status
        storedFlags = .list(flags)
        self.value = value
        opaqueToken = Self.firstOpaque(in: flags)
    }

    /// A reply read from the wire: `flagWords` are the status line's checked flag words.
    init(status: Status, flagWords: ByteBuffer, opaque: UInt32?, value: ByteBuffer?) {
        self.status = status
        storedFlags = .received(flagWords)
        self.value = value
        opaqueToken = opaque
    }

    /// The reply's flags, in order.
    public var flags: [MetaFlag] {
        get {
            switch storedFlags {
            case .list(let flags): return flags
            case .received(let words): return words.withUnsafeReadableBytes { MetaReplyParser.flags(in: $0) }
            }
        }
        set {
            storedFlags = .list(newValue)
            opaqueToken = Self.firstOpaque(in: newValue)
        }
    }

    /// The opaque token echoed from the request, if any.
    public var opaque: UInt32? { opaqueToken }

    /// Whether the reply carries a flag with letter `code` (`W`, `Z`, `X`, …), without building ``flags``.
    func hasFlag(_ code: UInt8) -> Bool {
        var found = false
        forEachFlag { flagCode, _ in
            found = flagCode == code
            return !found
        }
        return found
    }

    /// The token of the first flag with letter `code` as a non-negative integer (`nil` when the
    /// flag is absent or its token is not one, as `t-1`), without building ``flags``.
    func integerFlag(_ code: UInt8) -> UInt64? {
        var value: UInt64?
        var found = false
        forEachFlag { flagCode, token in
            guard flagCode == code else { return true }
            found = true
            value = parseDecimal(token)
            return false
        }
        return found ? value : nil
    }

    private func forEachFlag(_ body: (UInt8, UnsafeRawBufferPointer) -> Bool) {
        switch storedFlags {
        case .list(let flags):
            for flag in flags {
                let goOn = flag.token.withUnsafeBytes { body(flag.code, $0) }
                if !goOn { return }
            }
        case .received(let words):
            words.withUnsafeReadableBytes { MetaReplyParser.forEachFlag(in: $0, body) }
        }
    }

    private static func firstOpaque(in flags: [MetaFlag]) -> UInt32? {
        for flag in flags where flag.code == UInt8(ascii: "O") {
            return flag.integerToken.flatMap { UInt32(exactly: $0) }
        }
        return nil
    }

    public static func == (lhs: MetaResponse, rhs: MetaResponse) -> Bool {
        lhs.status == rhs.status && lhs.value == rhs.value && lhs.flags == rhs.flags
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(flags)
        hasher.combine(value)
    }
}

/// Reads memcached meta replies from a byte stream, however the bytes are split.
///
/// Bad input (an unknown status, a malformed size, a line or value past the limits, a value
/// not followed by `\r\n`) throws a ``MemcachedError`` with code `.protocolViolation`; the
/// connection that produced it is then closed, never reused. (``MemcachedStore``'s connections
/// parse in their request handler with ``parse(_:maxLineLength:maxValueLength:)``; this
/// decoder serves a pipeline of one's own.)
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
    /// when the reply is not complete yet. The reply's value and flags are views of `buffer`'s
    /// storage, not copies.
    public static func parse(_ buffer: inout ByteBuffer, maxLineLength: Int = 8_192, maxValueLength: Int = 64 << 20) throws -> MetaResponse? {
        let parsed = try buffer.withUnsafeReadableBytes {
            try MetaReplyParser.parse($0, maxLineLength: maxLineLength, maxValueLength: maxValueLength)
        }
        guard let parsed else { return nil }
        let start = buffer.readerIndex
        let value = parsed.valueRange.map { buffer.getSlice(at: start + $0.lowerBound, length: $0.count)! }
        let words = buffer.getSlice(at: start + parsed.flagsRange.lowerBound, length: parsed.flagsRange.count)!
        buffer.moveReaderIndex(forwardBy: parsed.consumed)
        return MetaResponse(status: parsed.status, flagWords: words, opaque: parsed.opaque, value: value)
    }
}
#endif
