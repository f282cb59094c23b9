#if Redis
import Foundation
import Larder
@testable import LarderRedis
import NIOCore
import Testing

/// The RESP3 reader and writer, and the TTL mapping, without a server.
@Suite(.timeLimit(.minutes(10)))
struct RESPCodecTests {
    let parser = RESPParser(maxBulkLength: 1 << 20)

    private func parse(_ text: String) throws -> RESPValue? {
        var buffer = ByteBuffer(string: text)
        return try parser.parse(&buffer)
    }

    // MARK: - Reading

    @Test(arguments: [
        ("+OK\r\n", RESPValue.simpleString("OK")),
        ("-WRONGPASS invalid\r\n", .error("WRONGPASS invalid")),
        (":-42\r\n", .integer(-42)),
        ("$3\r\nabc\r\n", .bulkString(ByteBuffer(string: "abc"))),
        ("$0\r\n\r\n", .bulkString(ByteBuffer())),
        ("$-1\r\n", .null),
        ("*-1\r\n", .null),
        ("_\r\n", .null),
        ("#t\r\n", .boolean(true)),
        (",1.5\r\n", .double(1.5)),
        ("(12345678901234567890\r\n", .bigNumber("12345678901234567890")),
        ("=7\r\ntxt:abc\r\n", .bulkString(ByteBuffer(string: "abc"))),
        ("!5\r\nERR x\r\n", .error("ERR x")),
        ("*2\r\n:1\r\n$1\r\nv\r\n", .array([.integer(1), .bulkString(ByteBuffer(string: "v"))])),
        ("~1\r\n+a\r\n", .array([.simpleString("a")])),
        ("%1\r\n+k\r\n:1\r\n", .map([.simpleString("k"), .integer(1)])),
        (">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", .push([.bulkString(ByteBuffer(string: "invalidate")), .array([.bulkString(ByteBuffer(string: "k"))])])),
        ("|1\r\n+ttl\r\n:3\r\n:7\r\n", .integer(7)),
    ])
    func readsEachRESP3Type(text: String, expected: RESPValue) throws {
        #expect(try parse(text) == expected)
    }

    @Test func anIncompleteValueConsumesNothingAndCompletesLater() throws {
        let whole = "*2\r\n$5\r\nhello\r\n:9\r\n"
        for cut in 1..<whole.utf8.count {
            var buffer = ByteBuffer(bytes: Array(whole.utf8.prefix(cut)))
            #expect(try parser.parse(&buffer) == nil, "cut at \(cut)")
            #expect(buffer.readableBytes == cut, "cut at \(cut) consumed bytes")
        }
        var buffer = ByteBuffer(string: whole + "+NEXT\r\n")
        #expect(try parser.parse(&buffer) == .array([.bulkString(ByteBuffer(string: "hello")), .integer(9)]))
        #expect(try parser.parse(&buffer) == .simpleString("NEXT"))
        #expect(buffer.readableBytes == 0)
    }

    @Test(arguments: [
        "?what\r\n",                 // unknown type byte
        ":12x\r\n",                  // not an integer
        ":99999999999999999999999\r\n", // overflows Int64
        "$-2\r\n",                   // negative length
        "$99999999\r\n",             // longer than the limit
        "$3\r\nabcXY",               // bulk not ended by CRLF
        "*-5\r\n",                   // negative count
        "*99999999\r\n",             // more elements than the limit
        "+OK\rX",                    // CR without LF
        "#x\r\n",                    // not a boolean
        "_x\r\n",                    // null with a payload
        "=2\r\nab\r\n",              // verbatim without format
    ])
    func malformedBytesAreAProtocolViolationNeverATrap(text: String) {
        #expect {
            _ = try parse(text)
        } throws: { error in
            (error as? RedisError)?.code == .protocolViolation
        }
    }

    @Test func nestingDeeperThanTheLimitIsRefused() {
        let text = String(repeating: "*1\r\n", count: 100) + ":1\r\n"
        #expect(throws: RedisError.self) { _ = try parse(text) }
    }

    @Test func randomBytesNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let length = Int.random(in: 0..<40, using: &generator)
            let alphabet = Array("*$:+-_#,%~>|=!(0123456789\r\n-abc".utf8)
            let bytes = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
            var buffer = ByteBuffer(bytes: bytes)
            _ = try? parser.parse(&buffer)
        }
    }

    // MARK: - Writing

    @Test func encodesACommandAsAnArrayOfBulkStrings() throws {
        var buffer = ByteBuffer()
        RESPEncoder.encode([.string("SET"), .bytes([0x00, 0x0D, 0x0A]), .integer(-7)], into: &buffer)
        #expect(buffer == ByteBuffer(bytes: Array("*3\r\n$3\r\nSET\r\n$3\r\n".utf8) + [0x00, 0x0D, 0x0A] + Array("\r\n$2\r\n-7\r\n".utf8)))
        var parsed = buffer
        #expect(try parser.parse(&parsed) == .array([
            .bulkString(ByteBuffer(string: "SET")), .bulkString(ByteBuffer(bytes: [0x00, 0x0D, 0x0A])), .bulkString(ByteBuffer(string: "-7")),
        ]))
    }

    // MARK: - TTL

    @Test func aLifetimeBecomesPXAndADateBecomesPXAT() {
        let now = Date(timeIntervalSince1970: 1_000)
        #expect(RedisTTL.make(expiry: .seconds(1.0001), expirationDate: now.addingTimeInterval(1.0001), now: now) == .px(1_001))
        #expect(RedisTTL.make(expiry: .sliding(60), expirationDate: now.addingTimeInterval(60), now: now) == .px(60_000))
        let date = Date(timeIntervalSince1970: 5_000.25)
        #expect(RedisTTL.make(expiry: .date(date), expirationDate: date, now: now) == .pxat(5_000_250))
        #expect(RedisTTL.make(expiry: .never, expirationDate: nil, now: now) == RedisTTL.none)
        #expect(RedisTTL.make(expiry: .seconds(-1), expirationDate: now.addingTimeInterval(-1), now: now) == .expired)
        // Never 0 ms for a live value (PX 0 is an error).
        #expect(RedisTTL.make(expiry: .seconds(0.0000001), expirationDate: now.addingTimeInterval(0.0000001), now: now) == .px(1))
    }

    // MARK: - Handshake

    @Test func aRefusedPasswordIsAnAuthenticationError() {
        #expect { try Handshake.check(.error("WRONGPASS invalid username-password pair or user is disabled.")) } throws: {
            ($0 as? RedisError)?.code == .authentication
        }
        #expect { try Handshake.check(.error("NOAUTH HELLO must be called with the client already authenticated")) } throws: {
            ($0 as? RedisError)?.code == .authentication
        }
        #expect { try Handshake.check(.error("ERR unknown command 'HELLO'")) } throws: {
            ($0 as? RedisError)?.code == .unsupportedServer
        }
        #expect(throws: Never.self) { try Handshake.check(.map([])) }
    }

    @Test func aBadLimitOrAddressIsRefusedWithItsReason() {
        let bad: [RedisStore.Configuration] = [
            .init(deadline: .zero, isTrackingEnabled: false),
            .init(deadline: .seconds(86_401), isTrackingEnabled: false),
            .init(connectionCount: 0, isTrackingEnabled: false),
            .init(maxItemSize: 10, isTrackingEnabled: false),
            .init(trackedKeyLimit: 0),
            .init(host: "bad host", isTrackingEnabled: false),
            .init(port: 70_000, isTrackingEnabled: false),
        ]
        for configuration in bad {
            #expect {
                _ = try RedisStore(configuration: configuration)
            } throws: { error in
                (error as? StorageError)?.code == .invalidConfiguration
            }
        }
    }

    @Test func aBadNamespaceIsRefusedWithItsReason() {
        for namespace in ["has space", "br{ace", "star*", String(repeating: "n", count: 151)] {
            #expect {
                _ = try RedisStore(configuration: .init(namespace: namespace, isTrackingEnabled: false))
            } throws: { error in
                (error as? StorageError)?.code == .invalidConfiguration && "\(error)".contains("namespace")
            }
        }
    }
}
#endif
