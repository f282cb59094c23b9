#if Redis
import NIOCore

/// One RESP3 value as the server sends it (RESP2's forms read as their RESP3 equivalents).
///
/// Related documentation: <https://github.com/redis/redis-specifications/blob/master/protocol/RESP3.md>
enum RESPValue: Sendable, Equatable {
    /// `+`: a short status line (`OK`).
    case simpleString(String)
    /// `-` or `!`: an error reply, with its code word first (`WRONGPASS …`).
    case error(String)
    /// `:`: a signed 64-bit integer.
    case integer(Int64)
    /// `$` or `=` (a verbatim string without its format prefix): bytes.
    case bulkString(ByteBuffer)
    /// `_`, or RESP2's `$-1` and `*-1`.
    case null
    /// `,`: a double.
    case double(Double)
    /// `#`.
    case boolean(Bool)
    /// `(`: a big number, as its decimal text.
    case bigNumber(String)
    /// `*` or `~` (a set): values in order.
    case array([RESPValue])
    /// `%`: keys and values alternating.
    case map([RESPValue])
    /// `>`: an out-of-band message (an invalidation), never a command's reply.
    case push([RESPValue])

    /// The bytes of a bulk or simple string as text.
    var string: String? {
        switch self {
        case .simpleString(let text): return text
        case .bulkString(let buffer): return String(buffer: buffer)
        default: return nil
        }
    }
}

/// One argument of a command: sent as a bulk string.
enum RESPArgument: Sendable {
    case string(String)
    case bytes([UInt8])
    case buffer(ByteBuffer)
    case integer(Int64)
}

/// Encodes commands as RESP arrays of bulk strings (what every Redis server reads).
enum RESPEncoder {
    static func encode(_ command: [RESPArgument], into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(ascii: "*"))
        writeDecimal(command.count, into: &buffer)
        for argument in command {
            switch argument {
            case .string(let text):
                buffer.writeInteger(UInt8(ascii: "$"))
                writeDecimal(text.utf8.count, into: &buffer)
                buffer.writeString(text)
            case .bytes(let bytes):
                buffer.writeInteger(UInt8(ascii: "$"))
                writeDecimal(bytes.count, into: &buffer)
                buffer.writeBytes(bytes)
            case .buffer(let bytes):
                buffer.writeInteger(UInt8(ascii: "$"))
                writeDecimal(bytes.readableBytes, into: &buffer)
                buffer.writeImmutableBuffer(bytes)
            case .integer(let value):
                let text = String(value)
                buffer.writeInteger(UInt8(ascii: "$"))
                writeDecimal(text.utf8.count, into: &buffer)
                buffer.writeString(text)
            }
            buffer.writeStaticString("\r\n")
        }
    }

    /// `count` in decimal, then CRLF.
    private static func writeDecimal(_ count: Int, into buffer: inout ByteBuffer) {
        buffer.writeString(String(count))
        buffer.writeStaticString("\r\n")
    }
}
#endif
