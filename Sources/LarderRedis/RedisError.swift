#if Redis
/// Every error of `LarderRedis`'s own API (the codec, the connections, the handshake).
///
/// ``RedisStore`` never lets one reach a ``Larder/Storage`` caller: as a tier, a remote failure
/// is a miss or a skipped write, counted in ``RedisStore/Statistics``. Used directly, the store
/// throws a ``Larder/StorageError`` (code `.io`) whose `cause` is a `RedisError`.
public struct RedisError: Error, CustomStringConvertible, Hashable {
    /// What went wrong; an open set.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        /// The server's bytes break RESP3 (the connection is closed).
        public static let protocolViolation = Code("protocolViolation")
        /// The operation's deadline passed (its connection is closed).
        public static let timeout = Code("timeout")
        /// The connection failed or closed.
        public static let connection = Code("connection")
        /// The circuit breaker is open: the server failed repeatedly, calls fail fast.
        public static let breakerOpen = Code("breakerOpen")
        /// The server refused the username or password (`WRONGPASS`, `NOAUTH`, `NOPERM`).
        public static let authentication = Code("authentication")
        /// The TLS handshake or a TLS record failed: the server's certificate does not chain to
        /// ``RedisTLS/trustRoots`` or does not name the server, or the server refused the
        /// client's certificate. (A server without TLS on the port never answers the handshake:
        /// that is a ``timeout``.)
        public static let tls = Code("tls")
        /// The server does not speak RESP3 (`HELLO 3` refused: Redis before 6).
        public static let unsupportedServer = Code("unsupportedServer")
        /// The server answered a command with an error reply.
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

    public var description: String { "redis \(code): \(message)" }
}
#endif
