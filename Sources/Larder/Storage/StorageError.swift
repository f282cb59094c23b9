import Foundation

/// Every error Larder's public API throws.
///
/// A cache miss is never an error: reads return `nil`. Errors report an environment problem
/// (I/O, SQLite), a bad configuration or an input the store refuses, and always name what
/// failed. The kind of failure is ``code``, an open set: new kinds (the remote tier's network
/// failures, for example) are added as new static codes, so a `switch` over codes needs a
/// `default` and no caller's code breaks when one is added. The error that caused this one, if
/// any (a Foundation, POSIX or transformer error), is kept as a value in ``cause``.
///
/// ```swift
/// do {
///     _ = try DiskStore(directory: url)
/// } catch let error as StorageError where error.code == .io {
///     print(error)              // "I/O error creating directory at /readonly/cache: Permission denied"
///     print(error.cause as Any) // the POSIXError behind it
/// }
/// ```
public struct StorageError: Error, CustomStringConvertible {
    /// The kind of failure: an open set of values, compared with `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The name of the code, for example `"io"`.
        public let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// A configuration field holds a value the store cannot work with (see ``StorageError/field``).
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// SQLite failed (see ``StorageError/sqliteResultCode``).
        public static let sqlite = Code("sqlite")
        /// A file-system operation failed (see ``StorageError/path``).
        public static let io = Code("io")
        /// zlib failed while compressing or decompressing.
        public static let compression = Code("compression")
        /// A value could not be encoded to bytes by its transformer.
        public static let encoding = Code("encoding")
        /// Stored bytes could not be decoded by the transformer.
        public static let decoding = Code("decoding")
        /// A key, value, expiry or tier selection the store refuses.
        public static let invalidInput = Code("invalidInput")
        /// The store was closed and cannot be used any more.
        public static let closed = Code("closed")
        /// An operation gave up after its time limit (get-or-load's ``LoadOptions/hardTimeout``).
        public static let timeout = Code("timeout")

        public var description: String { name }
    }

    /// The kind of failure.
    public let code: Code
    /// What failed, in words: the operation, the path, the field, the reason.
    public let message: String
    /// The error that caused this one, kept as a value so it can be matched.
    public let cause: (any Error)?
    /// The file or directory involved, for ``Code/io`` errors.
    public let path: String?
    /// The configuration field, for ``Code/invalidConfiguration`` errors.
    public let field: String?
    /// SQLite's extended result code, for ``Code/sqlite`` errors.
    public let sqliteResultCode: Int32?

    /// Creates an error; Larder's own code uses the factories below.
    public init(
        code: Code, message: String, cause: (any Error)? = nil, path: String? = nil, field: String? = nil,
        sqliteResultCode: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.cause = cause
        self.path = path
        self.field = field
        self.sqliteResultCode = sqliteResultCode
    }

    public var description: String {
        switch code {
        case .invalidConfiguration: return "Invalid configuration: \(message)"
        case .sqlite: return "SQLite error \(sqliteResultCode ?? 0): \(message)"
        case .io: return "I/O error \(message)"
        case .compression: return "Compression error: \(message)"
        case .encoding: return "Encoding failed: \(message)"
        case .decoding: return "Decoding failed: \(message)"
        case .invalidInput: return "Invalid input: \(message)"
        case .closed: return "The store is closed"
        case .timeout: return "Timed out: \(message)"
        default: return "\(code.name): \(message)"
        }
    }
}

extension StorageError {
    /// `field` holds `value`, which the store cannot work with, for `reason`.
    public static func invalidConfiguration(field: String, value: String, reason: String) -> StorageError {
        StorageError(code: .invalidConfiguration, message: "\(field) = \(value): \(reason)", field: field)
    }

    /// SQLite returned `code` (its primary or extended result code) for `sql`.
    static func sqlite(code: Int32, message: String, sql: String?) -> StorageError {
        let text = sql.map { "\(message) (in \"\($0)\")" } ?? message
        return StorageError(code: .sqlite, message: text, sqliteResultCode: code)
    }

    /// A file-system operation on `path` failed with `errno`.
    static func io(operation: String, path: String, errno code: Int32) -> StorageError {
        let reason = String(cString: strerror(code))
        let cause = POSIXErrorCode(rawValue: code).map { POSIXError($0) }
        return StorageError(code: .io, message: "\(operation) at \(path): \(reason)", cause: cause, path: path)
    }

    /// A file-system operation on `path` failed for `reason`, optionally because of `cause`.
    static func io(operation: String, path: String, reason: String, cause: (any Error)? = nil) -> StorageError {
        StorageError(code: .io, message: "\(operation) at \(path): \(reason)", cause: cause, path: path)
    }

    /// zlib returned `code` while compressing or decompressing.
    static func compression(code: Int32, message: String) -> StorageError {
        StorageError(code: .compression, message: "zlib \(code): \(message)")
    }

    /// A transformer refused to encode a value because of `cause`.
    public static func encoding(_ message: String, cause: (any Error)? = nil) -> StorageError {
        StorageError(code: .encoding, message: message, cause: cause)
    }

    /// Stored bytes are not a valid value for the transformer, because of `cause`.
    public static func decoding(_ message: String, cause: (any Error)? = nil) -> StorageError {
        StorageError(code: .decoding, message: message, cause: cause)
    }

    /// An input the store refuses, with the reason.
    static func invalidInput(_ reason: String) -> StorageError {
        StorageError(code: .invalidInput, message: reason)
    }

    /// The store was closed.
    static var closed: StorageError {
        StorageError(code: .closed, message: "the store is closed")
    }

    /// Wraps `error` as an encoding failure, unless it is already a ``StorageError``.
    static func wrappingEncoding(_ error: any Error) -> StorageError {
        error as? StorageError ?? .encoding("\(error)", cause: error)
    }

    /// Wraps `error` as a decoding failure, unless it is already a ``StorageError``.
    static func wrappingDecoding(_ error: any Error) -> StorageError {
        error as? StorageError ?? .decoding("\(error)", cause: error)
    }
}
