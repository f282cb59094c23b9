#if Memcached
public import NIOCore


/// One reply of memcached's meta protocol.
public struct MetaResponse: Sendable, Hashable {
    /// The reply's status line code.
    public enum Status: Sendable, Hashable {
        /// `HD`: success, no value.
        case stored
        /// `VA`: success with a value.
        case value
        /// `EN`: miss (`mg`).
        case miss
        /// `NF`: not found (`md`, `ms` with a CAS on a missing item).
        case notFound
        /// `NS`: not stored (`ms`).
        case notStored
        /// `EX`: exists, the CAS did not match.
        case exists
        /// `MN`: the answer to `mn`.
        case noop
        /// `ERROR`: the server did not know the command.
        case error
        /// `CLIENT_ERROR <message>`: the server refused the request.
        case clientError(String)
        /// `SERVER_ERROR <message>`: the server failed (out of memory, item too large).
        case serverError(String)

        /// Whether this is one of the three error replies (which carry no flags or opaque).
        public var isError: Bool {
            switch self {
            case .error, .clientError, .serverError: return true
            default: return false
            }
        }
    }

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
        flags.first("O").flatMap { $0.integerToken }.flatMap { UInt32(exactly: $0) }
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
        let view = buffer.readableBytesView
        guard let newline = view.firstIndex(of: UInt8(ascii: "\n")) else {
            if view.count > maxLineLength + 1 {
                throw MemcachedError(.protocolViolation, "a reply line is longer than \(maxLineLength) bytes")
            }
            return nil
        }
        let lineLength = newline - view.startIndex
        guard lineLength > 0, view[newline - 1] == UInt8(ascii: "\r") else {
            throw MemcachedError(.protocolViolation, "a reply line does not end with \\r\\n")
        }
        guard lineLength - 1 <= maxLineLength else {
            throw MemcachedError(.protocolViolation, "a reply line is longer than \(maxLineLength) bytes")
        }
        let line = Array(view[view.startIndex..<(newline - 1)])
        var words = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
        guard !words.isEmpty else { throw MemcachedError(.protocolViolation, "an empty reply line") }
        let head = String(decoding: words.removeFirst(), as: UTF8.self)
        let rest = { String(decoding: line.dropFirst(head.utf8.count + 1), as: UTF8.self) }
        let status: MetaResponse.Status
        switch head {
        case "HD": status = .stored
        case "VA": status = .value
        case "EN": status = .miss
        case "NF": status = .notFound
        case "NS": status = .notStored
        case "EX": status = .exists
        case "MN": status = .noop
        case "ERROR": status = .error
        case "CLIENT_ERROR": status = .clientError(rest())
        case "SERVER_ERROR": status = .serverError(rest())
        default:
            throw MemcachedError(.protocolViolation, "an unknown reply \"\(head.prefix(32))\"")
        }
        if status.isError {
            buffer.moveReaderIndex(forwardBy: lineLength + 1)
            return MetaResponse(status: status)
        }
        var valueLength: Int?
        if status == .value {
            guard !words.isEmpty, let size = parseDecimal(words.removeFirst()), size <= UInt64(maxValueLength) else {
                throw MemcachedError(.protocolViolation, "a VA reply without a valid size (at most \(maxValueLength))")
            }
            valueLength = Int(size)
        }
        var flags: [MetaFlag] = []
        flags.reserveCapacity(words.count)
        for word in words {
            guard let code = word.first, (code >= 0x41 && code <= 0x5A) || (code >= 0x61 && code <= 0x7A) else {
                throw MemcachedError(.protocolViolation, "a reply flag does not start with a letter")
            }
            guard word.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw MemcachedError(.protocolViolation, "a reply flag holds control bytes")
            }
            flags.append(MetaFlag(code: code, token: Array(word.dropFirst())))
        }
        guard let valueLength else {
            buffer.moveReaderIndex(forwardBy: lineLength + 1)
            return MetaResponse(status: status, flags: flags)
        }
        let total = lineLength + 1 + valueLength + 2
        guard buffer.readableBytes >= total else { return nil }
        let valueStart = buffer.readerIndex + lineLength + 1
        guard buffer.getInteger(at: valueStart + valueLength, as: UInt16.self) == 0x0D0A else {
            throw MemcachedError(.protocolViolation, "a value is not followed by \\r\\n")
        }
        let value = buffer.getSlice(at: valueStart, length: valueLength)
        buffer.moveReaderIndex(forwardBy: total)
        return MetaResponse(status: status, flags: flags, value: value)
    }
}
#endif
