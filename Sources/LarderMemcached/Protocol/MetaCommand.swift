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
        flags.first("O").flatMap { $0.integerToken }.flatMap { UInt32(exactly: $0) }
    }

    /// Whether the command is quiet (`q`): its success (or, for `mg`, its miss) is not answered.
    var isQuiet: Bool { flags.contains("q") }

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
        switch command.kind {
        case .noop:
            out.writeStaticString("mn\r\n")
            return
        case .get: out.writeStaticString("mg ")
        case .set: out.writeStaticString("ms ")
        case .delete: out.writeStaticString("md ")
        }
        guard MetaCommand.isValidKey(command.key) else {
            throw MemcachedError(.invalidKey, "a memcached key is 1 to 250 printable bytes without spaces")
        }
        out.writeBytes(command.key)
        if case .set(let value) = command.kind {
            out.writeStaticString(" ")
            out.writeString(String(value.readableBytes))
        }
        for flag in command.flags {
            guard flag.token.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw MemcachedError(.invalidKey, "flag token \(flag) holds whitespace or control bytes")
            }
            out.writeStaticString(" ")
            out.writeInteger(flag.code)
            out.writeBytes(flag.token)
        }
        out.writeStaticString("\r\n")
        if case .set(let value) = command.kind {
            var value = value
            out.writeBuffer(&value)
            out.writeStaticString("\r\n")
        }
    }
}
#endif
