// libFuzzer entry point for the memcached meta-reply parser in LarderMemcached.
//
// Built by Fuzz/run-memcached from the parser's swift-nio-free sources (MetaReplyParser,
// MetaFlag, MemcachedError) with `-D Memcached`, so it exercises the shipping parser itself.
// Besides "no crash, no hang, no sanitizer report", it checks the contracts the decoder relies
// on: a reply never claims more bytes than it was given and its value lies inside them; every
// strict prefix of a complete reply is "need more data" (never an error, never another reply);
// and bytes after a complete reply do not change it.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMemcachedReplies(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = count > 0 && start != nil ? Array(UnsafeBufferPointer(start: start!, count: count)) : []
    func parse(_ slice: ArraySlice<UInt8>) -> Result<MetaReplyParser.Parsed?, MemcachedError> {
        slice.withUnsafeBytes { raw in
            Result { try MetaReplyParser.parse(raw, maxLineLength: 256, maxValueLength: 4_096) }
                .mapError { $0 as! MemcachedError }
        }
    }
    // Walk the input as a stream of replies, as the decoder does.
    var offset = 0
    while offset < bytes.count {
        guard case .success(let parsed?) = parse(bytes[offset...]) else { break }
        let available = bytes.count - offset
        guard parsed.consumed > 0, parsed.consumed <= available else {
            fatalError("consumed \(parsed.consumed) of \(available) bytes")
        }
        if let range = parsed.valueRange, range.lowerBound < 0 || range.upperBound > parsed.consumed {
            fatalError("value range \(range) outside the reply's \(parsed.consumed) bytes")
        }
        // The flag words lie inside the status line and read back as letters with their
        // tokens, the first O flag's number being the opaque.
        if parsed.flagsRange.lowerBound < 0 || parsed.flagsRange.upperBound > parsed.consumed {
            fatalError("flag range \(parsed.flagsRange) outside the reply's \(parsed.consumed) bytes")
        }
        let flags = bytes[(offset + parsed.flagsRange.lowerBound)..<(offset + parsed.flagsRange.upperBound)].withUnsafeBytes {
            MetaReplyParser.flags(in: $0)
        }
        let firstOpaque = flags.first { $0.code == UInt8(ascii: "O") }.flatMap { $0.integerToken }.flatMap { UInt32(exactly: $0) }
        guard flags.allSatisfy({ ($0.code | 0x20) >= 0x61 && ($0.code | 0x20) <= 0x7A }), firstOpaque == parsed.opaque else {
            fatalError("flags \(flags) do not match the parse (opaque \(String(describing: parsed.opaque)))")
        }
        let reply = bytes[offset..<(offset + parsed.consumed)]
        guard case .success(let again?) = parse(reply), again == parsed else {
            fatalError("the reply alone parses differently")
        }
        for cut in 0..<parsed.consumed {
            guard case .success(nil) = parse(reply.prefix(cut)) else {
                fatalError("a prefix of \(cut) bytes of a complete reply was not 'need more data'")
            }
        }
        offset += parsed.consumed
    }
    return 0
}
