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
        switch command.kind {
        case .noop:
            out.writeStaticString("mn\r\n")
            return
        case .get, .set, .delete:
            break
        }
        guard MetaCommand.isValidKey(command.key) else {
            throw MemcachedError(.invalidKey, "a memcached key is 1 to 250 printable bytes without spaces")
        }
        for flag in command.flags where !flag.token.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            throw MemcachedError(.invalidKey, "flag token \(flag) holds whitespace or control bytes")
        }
        switch command.kind {
        case .get: out.writeStaticString("mg ")
        case .set: out.writeStaticString("ms ")
        case .delete: out.writeStaticString("md ")
        case .noop: break
        }
        out.writeBytes(command.key)
        if case .set(let value) = command.kind {
            out.writeInteger(UInt8(ascii: " "))
            out.writeDecimal(UInt64(value.readableBytes))
        }
        for flag in command.flags {
            out.writeInteger(UInt8(ascii: " "))
            out.writeInteger(flag.code)
            out.writeBytes(flag.token)
        }
        if opaque != 0 {
            out.writeStaticString(" O")
            out.writeDecimal(UInt64(opaque))
        }
        out.writeStaticString("\r\n")
        if case .set(var value) = command.kind {
            out.writeBuffer(&value)
            out.writeStaticString("\r\n")
        }
    }
}

extension ByteBuffer {
    /// Writes `value` in decimal ASCII without building a `String`.
    mutating func writeDecimal(_ value: UInt64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // 24 bytes: room for UInt64.max's 20 digits
        withUnsafeMutableBytes(of: &digits) { raw in
            var index = raw.count
            var rest = value
            repeat {
                index -= 1
                raw[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            writeBytes(UnsafeRawBufferPointer(rebasing: raw[index...]))
        }
    }
}
#endif
