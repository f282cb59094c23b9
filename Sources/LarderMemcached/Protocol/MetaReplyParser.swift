#if Memcached
/// The status of a meta reply.
public enum MetaReplyStatus: Sendable, Hashable {
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

/// The byte-level parser of meta replies, free of swift-nio so that the fuzzer builds it alone.
enum MetaReplyParser {
    /// One reply found at the front of a byte run.
    struct Parsed: Equatable {
        var status: MetaReplyStatus
        var flags: [MetaFlag]
        /// Where the value lies in the bytes parsed (`VA` only).
        var valueRange: Range<Int>?
        /// How many bytes the reply takes.
        var consumed: Int
    }

    /// Parses one reply from the front of `bytes`; `nil` when it is not complete yet.
    ///
    /// - Throws: ``MemcachedError`` with code `.protocolViolation` for bytes that can never
    ///   become a valid reply.
    static func parse(_ bytes: UnsafeRawBufferPointer, maxLineLength: Int, maxValueLength: Int) throws -> Parsed? {
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
            if bytes.count > maxLineLength + 1 {
                throw MemcachedError(.protocolViolation, "a reply line is longer than \(maxLineLength) bytes")
            }
            return nil
        }
        guard newline > 0, bytes[newline - 1] == UInt8(ascii: "\r") else {
            throw MemcachedError(.protocolViolation, "a reply line does not end with \\r\\n")
        }
        guard newline - 1 <= maxLineLength else {
            throw MemcachedError(.protocolViolation, "a reply line is longer than \(maxLineLength) bytes")
        }
        let line = bytes[0..<(newline - 1)]
        var words = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
        guard !words.isEmpty else { throw MemcachedError(.protocolViolation, "an empty reply line") }
        let headBytes = words.removeFirst()
        let head = String(decoding: headBytes, as: UTF8.self)
        let message = { String(decoding: line[min(headBytes.endIndex + 1, line.endIndex)...], as: UTF8.self) }
        let status: MetaReplyStatus
        switch head {
        case "HD": status = .stored
        case "VA": status = .value
        case "EN": status = .miss
        case "NF": status = .notFound
        case "NS": status = .notStored
        case "EX": status = .exists
        case "MN": status = .noop
        case "ERROR": status = .error
        case "CLIENT_ERROR": status = .clientError(message())
        case "SERVER_ERROR": status = .serverError(message())
        default:
            throw MemcachedError(.protocolViolation, "an unknown reply \"\(head.prefix(32))\"")
        }
        if status.isError {
            return Parsed(status: status, flags: [], valueRange: nil, consumed: newline + 1)
        }
        var valueLength: Int?
        if status == .value {
            guard !words.isEmpty, let size = parseDecimal(ArraySlice(words.removeFirst())), size <= UInt64(maxValueLength) else {
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
            return Parsed(status: status, flags: flags, valueRange: nil, consumed: newline + 1)
        }
        let valueStart = newline + 1
        guard bytes.count >= valueStart + valueLength + 2 else { return nil }
        guard bytes[valueStart + valueLength] == 0x0D, bytes[valueStart + valueLength + 1] == 0x0A else {
            throw MemcachedError(.protocolViolation, "a value is not followed by \\r\\n")
        }
        return Parsed(status: status, flags: flags, valueRange: valueStart..<(valueStart + valueLength),
                      consumed: valueStart + valueLength + 2)
    }
}
#endif
