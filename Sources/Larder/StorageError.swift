/// Every error Larder throws.
///
/// A cache miss is never an error: reads return `nil`. Errors report an environment problem
/// (I/O, SQLite), a bad configuration or an input the store refuses, and always name what failed.
///
/// ```swift
/// do {
///     _ = try DiskStore(directory: url)
/// } catch let error as StorageError {
///     print(error) // "I/O error creating directory at /readonly/cache: Permission denied"
/// }
/// ```
public enum StorageError: Error, CustomStringConvertible {
    /// A configuration field holds a value the store cannot work with.
    case invalidConfiguration(field: String, value: String, reason: String)
    /// SQLite returned `code` (its primary or extended result code) for `sql`.
    case sqlite(code: Int32, message: String, sql: String?)
    /// A file-system operation on `path` failed.
    case io(operation: String, path: String, underlying: String)
    /// zlib returned `code` while compressing or decompressing.
    case compression(code: Int32, message: String)
    /// A value could not be encoded to bytes by its transformer.
    case encoding(underlying: String)
    /// Stored bytes could not be decoded by the transformer.
    case decoding(underlying: String)
    /// A key or value the store refuses, with the reason.
    case invalidInput(String)
    /// The store was closed and cannot be used any more.
    case closed

    public var description: String {
        switch self {
        case let .invalidConfiguration(field, value, reason):
            return "Invalid configuration: \(field) = \(value): \(reason)"
        case let .sqlite(code, message, sql):
            if let sql { return "SQLite error \(code): \(message) (in \"\(sql)\")" }
            return "SQLite error \(code): \(message)"
        case let .io(operation, path, underlying):
            return "I/O error \(operation) at \(path): \(underlying)"
        case let .compression(code, message):
            return "Compression error \(code): \(message)"
        case let .encoding(underlying):
            return "Encoding failed: \(underlying)"
        case let .decoding(underlying):
            return "Decoding failed: \(underlying)"
        case let .invalidInput(reason):
            return "Invalid input: \(reason)"
        case .closed:
            return "The store is closed"
        }
    }
}
