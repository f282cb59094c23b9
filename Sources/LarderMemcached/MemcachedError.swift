#if Memcached
/// Every error of `LarderMemcached`'s own API (the codec, the connections).
///
/// ``MemcachedStore`` never lets one reach a ``Larder/Storage`` caller: as a tier, a remote
/// failure is a miss or a skipped write, counted in ``MemcachedStore/Statistics``.
public struct MemcachedError: Error, CustomStringConvertible, Hashable {
    /// What went wrong; an open set.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        /// The server's bytes break the protocol (the connection is closed).
        public static let protocolViolation = Code("protocolViolation")
        /// A key or flag cannot be sent.
        public static let invalidKey = Code("invalidKey")
        /// The operation's deadline passed (its connection is closed).
        public static let timeout = Code("timeout")
        /// The connection failed or closed.
        public static let connection = Code("connection")
        /// The circuit breaker is open: the server failed repeatedly, calls fail fast.
        public static let breakerOpen = Code("breakerOpen")
        /// The server answered with `ERROR`, `CLIENT_ERROR` or `SERVER_ERROR`.
        public static let server = Code("server")
        /// The store is closed.
        public static let closed = Code("closed")
        public var description: String { name }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "memcached \(code): \(message)" }
}
#endif
