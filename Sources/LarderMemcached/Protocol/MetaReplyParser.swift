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
    ///
    /// The flags are not copied out: `flagsRange` marks their words (checked: each a letter
    /// and printable bytes) and ``flags(in:)`` reads them when asked, so a usual reply costs no
    /// allocation. The opaque token, which every reply is matched by, is read in place.
    struct Parsed: Equatable {
        var status: MetaReplyStatus
        /// Where the flag words lie in the bytes parsed (empty when there are none).
        var flagsRange: Range<Int>
        /// The first `O` flag's token, when it is a number that fits 32 bits.
        var opaque: UInt32?
        /// Where the value lies in the bytes parsed (`VA` only).
        var valueRange: Range<Int>?
        /// How many bytes the reply takes.
        var consumed: Int
    }

    /// The flags of checked flag words (a ``Parsed/flagsRange``), in order.
    static func flags(in words: UnsafeRawBufferPointer) -> [MetaFlag] {
        var flags: [MetaFlag] = []
        forEachFlag(in: words) { code, token in
            flags.append(MetaFlag(code: code, token: Array(token)))
            return true
        }
        return flags
    }

    /// Calls `body` with each flag's letter and token in checked flag words, until it returns false.
    static func forEachFlag(in words: UnsafeRawBufferPointer, _ body: (UInt8, UnsafeRawBufferPointer) -> Bool) {
        var cursor = 0
        while cursor < words.count {
            if words[cursor] == UInt8(ascii: " ") {
                cursor += 1
                continue
            }
            let start = cursor
            while cursor < words.count, words[cursor] != UInt8(ascii: " ") { cursor += 1 }
            guard body(words[start], UnsafeRawBufferPointer(rebasing: words[(start + 1)..<cursor])) else { return }
        }
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
            return Parsed(status: status, flagsRange: 0..<0, opaque: nil, valueRange: nil, consumed: newline + 1)
        }
        var valueLength: Int?
        if status == .value {
            guard let sizeWord = nextWord(), let size = parseDecimal(bytes[sizeWord]), size <= UInt64(maxValueLength) else {
                throw MemcachedError(.protocolViolation, "a VA reply without a valid size (at most \(maxValueLength))")
            }
            valueLength = Int(size)
        }
        var flagsRange = lineEnd..<lineEnd
        var opaque: UInt32?
        var sawOpaque = false
        while let word = nextWord() {
            if flagsRange.isEmpty { flagsRange = word.lowerBound..<lineEnd }
            let code = bytes[word.lowerBound]
            guard (code >= 0x41 && code <= 0x5A) || (code >= 0x61 && code <= 0x7A) else {
                throw MemcachedError(.protocolViolation, "a reply flag does not start with a letter")
            }
            guard bytes[word].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw MemcachedError(.protocolViolation, "a reply flag holds control bytes")
            }
            if code == UInt8(ascii: "O"), !sawOpaque {
                sawOpaque = true
                opaque = parseDecimal(bytes[(word.lowerBound + 1)..<word.upperBound]).flatMap { UInt32(exactly: $0) }
            }
        }
        if flagsRange.isEmpty { flagsRange = 0..<0 }
        guard let valueLength else {
            return Parsed(status: status, flagsRange: flagsRange, opaque: opaque, valueRange: nil, consumed: newline + 1)
        }
        let valueStart = newline + 1
        guard bytes.count >= valueStart + valueLength + 2 else { return nil }
        guard bytes[valueStart + valueLength] == 0x0D, bytes[valueStart + valueLength + 1] == 0x0A else {
            throw MemcachedError(.protocolViolation, "a value is not followed by \\r\\n")
        }
        return Parsed(status: status, flagsRange: flagsRange, opaque: opaque, valueRange: valueStart..<(valueStart + valueLength),
                      consumed: valueStart + valueLength + 2)
    }

    private static func unknownReply(_ bytes: UnsafeRawBufferPointer, _ head: Range<Int>) -> MemcachedError {
        let shown = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[head.prefix(32)]), as: UTF8.self)
        return MemcachedError(.protocolViolation, "an unknown reply \"\(shown)\"")
    }
}
#endif
