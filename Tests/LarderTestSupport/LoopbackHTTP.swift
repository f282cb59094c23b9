public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal HTTP/1.1 client for apps a test runs as child processes on 127.0.0.1: one request
/// per connection (`Connection: close`), the response read to the end. No URLSession, so the
/// request is exactly what the test says and nothing is cached or retried.
public enum LoopbackHTTP {
    /// A response: its status code and body.
    public struct Response: Sendable, Equatable {
        public var status: Int
        public var body: String
    }

    /// Sends `method path` with `body` to 127.0.0.1:`port` and returns the response; throws
    /// a `POSIXError` when the connection fails, or when the reply is not HTTP.
    public static func request(_ method: String, _ path: String, body: String = "", port: Int) throws -> Response {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EIO) }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let payload = Array(body.utf8)
        let head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
            + "Content-Type: text/plain\r\nContent-Length: \(payload.count)\r\n\r\n"
        let request = Array(head.utf8) + payload
        var sent = 0
        while sent < request.count {
            let written = request[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            sent += written
        }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            reply += buffer[..<count]
        }
        let text = String(decoding: reply, as: UTF8.self)
        guard let headEnd = text.range(of: "\r\n\r\n"), text.hasPrefix("HTTP/1.1 "),
              let status = Int(text.dropFirst(9).prefix(3))
        else { throw POSIXError(.EBADMSG) }
        var responseBody = String(text[headEnd.upperBound...])
        // A chunked body: join the chunks.
        if text[..<headEnd.lowerBound].lowercased().contains("transfer-encoding: chunked") {
            var joined = ""
            var rest = Substring(responseBody)
            while let line = rest.range(of: "\r\n"), let size = Int(rest[..<line.lowerBound], radix: 16), size > 0 {
                let start = line.upperBound
                let end = rest.utf8.index(start, offsetBy: size)
                joined += rest[start..<end]
                rest = rest[end...].dropFirst(2)
            }
            responseBody = joined
        }
        return Response(status: status, body: responseBody)
    }
}
