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
        // Words are read in place (no array of words, no string for the status).
        let lineEnd = newline - 1
        var cursor = 0
        func nextWord() -> Range<Int>? {
            while cursor < lineEnd, bytes[cursor] == UInt8(ascii: " ") { cursor += 1 }
            guard cursor < lineEnd else { return nil }
            let start = cursor
            while cursor < lineEnd, bytes[cursor] != UInt8(ascii: " ") { cursor += 1 }
            return start..<cursor
        }
        guard let head = nextWord() else { throw MemcachedError(.protocolViolation, "an empty reply line") }
        let message = {
            String(decoding: UnsafeRawBufferPointer(rebasing: bytes[min(head.upperBound + 1, lineEnd)..<lineEnd]), as: UTF8.self)
        }
        let status: MetaReplyStatus
        if head.count == 2 {
            switch (bytes[head.lowerBound], bytes[head.lowerBound + 1]) {
            case (UInt8(ascii: "H"), UInt8(ascii: "D")): status = .stored
            case (UInt8(ascii: "V"), UInt8(ascii: "A")): status = .value
            case (UInt8(ascii: "E"), UInt8(ascii: "N")): status = .miss
            case (UInt8(ascii: "N"), UInt8(ascii: "F")): status = .notFound
            case (UInt8(ascii: "N"), UInt8(ascii: "S")): status = .notStored
            case (UInt8(ascii: "E"), UInt8(ascii: "X")): status = .exists
            case (UInt8(ascii: "M"), UInt8(ascii: "N")): status = .noop
            default: throw unknownReply(bytes, head)
            }
        } else if bytes[head].elementsEqual("ERROR".utf8) {
            status = .error
        } else if bytes[head].elementsEqual("CLIENT_ERROR".utf8) {
            status = .clientError(message())
        } else if bytes[head].elementsEqual("SERVER_ERROR".utf8) {
            status = .serverError(message())
        } else {
            throw unknownReply(bytes, head)
        }
        if status.isError {
            return Parsed(status: status, flags: [], valueRange: nil, consumed: newline + 1)
        }
        var valueLength: Int?
        if status == .value {
            guard let sizeWord = nextWord(), let size = parseDecimal(bytes[sizeWord]), size <= UInt64(maxValueLength) else {
                throw MemcachedError(.protocolViolation, "a VA reply without a valid size (at most \(maxValueLength))")
            }
            valueLength = Int(size)
        }
        var flags: [MetaFlag] = []
        // One allocation for the usual reply (Larder asks for at most 4 flags back).
        if cursor < lineEnd { flags.reserveCapacity(4) }
        while let word = nextWord() {
            let code = bytes[word.lowerBound]
            guard (code >= 0x41 && code <= 0x5A) || (code >= 0x61 && code <= 0x7A) else {
                throw MemcachedError(.protocolViolation, "a reply flag does not start with a letter")
            }
            guard bytes[word].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw MemcachedError(.protocolViolation, "a reply flag holds control bytes")
            }
            flags.append(MetaFlag(code: code, token: word.count > 1 ? Array(bytes[(word.lowerBound + 1)..<word.upperBound]) : []))
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

    private static func unknownReply(_ bytes: UnsafeRawBufferPointer, _ head: Range<Int>) -> MemcachedError {
        let shown = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[head.prefix(32)]), as: UTF8.self)
        return MemcachedError(.protocolViolation, "an unknown reply \"\(shown)\"")
    }
}
#endif
