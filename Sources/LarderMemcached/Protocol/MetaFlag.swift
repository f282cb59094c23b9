#if Memcached
/// One flag of a meta command or reply: a letter and an optional token (`T30`, `O17`, `q`).
///
/// Related memcached documentation: `doc/protocol.txt`, "Meta Commands".
public struct MetaFlag: Sendable, Hashable, CustomStringConvertible {
    /// The flag's letter (`N`, `T`, `O`, `W`, …) as an ASCII byte.
    public var code: UInt8
    /// The flag's token (ASCII, no whitespace), or empty.
    public var token: [UInt8]

    /// A flag with `code` and an optional token.
    public init(_ code: Character, _ token: String = "") {
        precondition(code.isASCII && code.isLetter, "MetaFlag: a flag is one ASCII letter")
        self.code = code.asciiValue!
        self.token = Array(token.utf8)
    }

    init(code: UInt8, token: [UInt8]) {
        self.code = code
        self.token = token
    }

    /// A flag whose token is `number` in decimal; Larder's own flags are made this way, without
    /// the checks of the public initializer (they run on every command).
    init(code: UInt8, number: some BinaryInteger) {
        self.code = code
        self.token = Array(String(number).utf8)
    }

    /// The token as text.
    public var tokenString: String { String(decoding: token, as: UTF8.self) }

    /// The token as a non-negative integer, if it is one.
    public var integerToken: UInt64? { parseDecimal(token[...]) }

    public var description: String { String(UnicodeScalar(code)) + tokenString }

    // Flags Larder sends and reads (made from ASCII bytes: no `Character` checks per command).
    /// `v`: return the value.
    public static var value: MetaFlag { MetaFlag(code: UInt8(ascii: "v"), token: []) }
    /// `t`: return the remaining TTL in seconds (-1 = none).
    public static var remainingTTL: MetaFlag { MetaFlag(code: UInt8(ascii: "t"), token: []) }
    /// `c`: return the CAS value.
    public static var cas: MetaFlag { MetaFlag(code: UInt8(ascii: "c"), token: []) }
    /// `k`: return the key.
    public static var key: MetaFlag { MetaFlag(code: UInt8(ascii: "k"), token: []) }
    /// `q`: quiet mode (a miss of `mg`, the `HD` of `ms`/`md` are not sent).
    public static var quiet: MetaFlag { MetaFlag(code: UInt8(ascii: "q"), token: []) }
    /// `I`: invalidate (soft delete with `md`, or a set that is stale with `ms`).
    public static var invalidate: MetaFlag { MetaFlag(code: UInt8(ascii: "I"), token: []) }
    /// `O<token>`: opaque, echoed in the reply.
    public static func opaque(_ value: UInt32) -> MetaFlag { MetaFlag(code: UInt8(ascii: "O"), number: value) }
    /// `T<seconds>`: set the TTL.
    public static func ttl(_ seconds: Int64) -> MetaFlag { MetaFlag(code: UInt8(ascii: "T"), number: seconds) }
    /// `N<seconds>`: on a miss, create a placeholder with this TTL and win the lease (vivify).
    public static func vivify(_ seconds: Int64) -> MetaFlag { MetaFlag(code: UInt8(ascii: "N"), number: seconds) }
    /// `C<cas>`: compare and swap.
    public static func compareCAS(_ cas: UInt64) -> MetaFlag { MetaFlag(code: UInt8(ascii: "C"), number: cas) }
    /// `E<cas>`: use this CAS value for the new item.
    public static func explicitCAS(_ cas: UInt64) -> MetaFlag { MetaFlag(code: UInt8(ascii: "E"), number: cas) }
}

extension Array where Element == MetaFlag {
    /// The first flag with `code`, if any.
    public func first(_ code: Character) -> MetaFlag? {
        let byte = code.asciiValue!
        return first { $0.code == byte }
    }

    /// Whether a flag with `code` is present.
    public func contains(_ code: Character) -> Bool { first(code) != nil }
}

/// A decimal ASCII integer with no sign, or `nil` (empty, non-digits, overflow).
func parseDecimal<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> UInt64? {
    guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
    var value: UInt64 = 0
    for byte in bytes {
        guard byte >= 0x30, byte <= 0x39 else { return nil }
        let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
        let (sum, overflow2) = times.addingReportingOverflow(UInt64(byte - 0x30))
        guard !overflow1, !overflow2 else { return nil }
        value = sum
    }
    return value
}
#endif
