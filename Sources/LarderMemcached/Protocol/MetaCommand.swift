#if Memcached
public import NIOCore

/// A meta command: `mg`, `ms`, `md` or `mn`.
///
/// The key must already be a valid memcached key (1…250 bytes, no whitespace or control
/// bytes); ``MemcachedStore`` only ever sends keys it made itself (namespace + digest).
public struct MetaCommand: Sendable, Hashable {
    /// The command's kind.
    public enum Kind: Sendable, Hashable {
        /// `mg <key> <flags>`: get.
        case get
        /// `ms <key> <datalen> <flags>` + data: set.
        case set(ByteBuffer)
        /// `md <key> <flags>`: delete.
        case delete
        /// `mn`: no-op, answered `MN` in order (ends a quiet batch).
        case noop
    }

    public var kind: Kind
    public var key: [UInt8]
    public var flags: [MetaFlag]

    public init(_ kind: Kind, key: [UInt8] = [], flags: [MetaFlag] = []) {
        self.kind = kind
        self.key = key
        self.flags = flags
    }

    /// The command's opaque token, if it carries one.
    var opaque: UInt32? {
        for flag in flags where flag.code == UInt8(ascii: "O") {
            return flag.integerToken.flatMap { UInt32(exactly: $0) }
        }
        return nil
    }

    /// Whether the command is quiet (`q`): its success (or, for `mg`, its miss) is not answered.
    var isQuiet: Bool { flags.contains { $0.code == UInt8(ascii: "q") } }

    /// Whether `key` can be sent as is.
    static func isValidKey(_ key: [UInt8]) -> Bool {
        !key.isEmpty && key.count <= 250 && key.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}

/// Writes ``MetaCommand``s in memcached's meta text protocol.
public struct MetaCommandEncoder: MessageToByteEncoder, Sendable {
    public typealias OutboundIn = MetaCommand

    public init() {}

    public func encode(data command: MetaCommand, out: inout ByteBuffer) throws {
        try Self.encode(command, appendingOpaque: 0, into: &out)
    }

    /// Appends `command` to `out`, plus ` O<opaque>` when `opaque` is not 0, with no
    /// intermediate strings or arrays. On a thrown error `out` is left as it was.
    ///
    /// - Throws: ``MemcachedError`` with code `.invalidKey` for a key or flag memcached cannot take.
    static func encode(_ command: MetaCommand, appendingOpaque opaque: UInt32, into out: inout ByteBuffer) throws {
        let verb: (UInt8, UInt8)
        var value: ByteBuffer?
        switch command.kind {
        case .noop:
            out.writeStaticString("mn\r\n")
            return
        case .get: verb = (UInt8(ascii: "m"), UInt8(ascii: "g"))
        case .delete: verb = (UInt8(ascii: "m"), UInt8(ascii: "d"))
        case .set(let data):
            verb = (UInt8(ascii: "m"), UInt8(ascii: "s"))
            value = data
        }
        guard MetaCommand.isValidKey(command.key) else {
            throw MemcachedError(.invalidKey, "a memcached key is 1 to 250 printable bytes without spaces")
        }
        // The status line in one pass over one reserved run of bytes: "mX key [size] flags [O…]\r\n".
        var lineLength = 3 + command.key.count + 2 + (value == nil ? 0 : 21) + (opaque == 0 ? 0 : 12)
        for flag in command.flags {
            guard flag.token.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw MemcachedError(.invalidKey, "flag token \(flag) holds whitespace or control bytes")
            }
            lineLength += 2 + flag.token.count
        }
        out.reserveCapacity(minimumWritableBytes: lineLength + (value.map { $0.readableBytes + 2 } ?? 0))
        out.writeWithUnsafeMutableBytes(minimumWritableBytes: lineLength) { raw in
            var index = 0
            func put(_ byte: UInt8) {
                raw[index] = byte
                index += 1
            }
            func putDecimal(_ number: UInt64) {
                var digits = 1
                var rest = number / 10
                while rest > 0 { digits += 1; rest /= 10 }
                var remaining = number
                for position in stride(from: index + digits - 1, through: index, by: -1) {
                    raw[position] = UInt8(ascii: "0") + UInt8(remaining % 10)
                    remaining /= 10
                }
                index += digits
            }
            put(verb.0)
            put(verb.1)
            put(UInt8(ascii: " "))
            // The key in one copy (checked above to fit the reserved line).
            UnsafeMutableRawBufferPointer(rebasing: raw[index..<(index + command.key.count)]).copyBytes(from: command.key)
            index += command.key.count
            if let value {
                put(UInt8(ascii: " "))
                putDecimal(UInt64(value.readableBytes))
            }
            for flag in command.flags {
                put(UInt8(ascii: " "))
                put(flag.code)
                for byte in flag.token { put(byte) }
            }
            if opaque != 0 {
                put(UInt8(ascii: " "))
                put(UInt8(ascii: "O"))
                putDecimal(UInt64(opaque))
            }
            put(UInt8(ascii: "\r"))
            put(UInt8(ascii: "\n"))
            return index
        }
        if var value {
            out.writeBuffer(&value)
            out.writeStaticString("\r\n")
        }
    }
}

#endif
