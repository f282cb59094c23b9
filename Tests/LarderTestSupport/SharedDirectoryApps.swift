public import Foundation

/// The issue-49 scenario for two app processes serving sessions from one cache directory:
/// each step's request goes to one app and the next read to the other, with no wait between.
///
/// Both apps serve `PUT /session/<key>` (200), `GET` (200 with the body, or 404),
/// `DELETE` (204), and, `withCreate`, `POST` (201 created, or 409 when a live value exists).
public enum SharedDirectoryApps {
    /// Starts two app processes, `helper` with `arguments` each (each prints "port <n>" once
    /// it serves), runs the scenario against them and returns its mismatches; the apps are
    /// killed when it returns.
    public static func run(_ helper: URL, arguments: [String], withCreate: Bool) async throws -> [String] {
        try await withChildProcesses { scope in
            let apps = try (0..<2).map { _ in try scope.start(helper, arguments: arguments) }
            var ports: [Int] = []
            for app in apps {
                guard let port = await app.waitForOutputLine(prefix: "port ", timeout: .seconds(300)).flatMap({ Int($0) }) else {
                    throw AppDidNotStart(standardError: app.standardError)
                }
                ports.append(port)
            }
            return try mismatches(a: ports[0], b: ports[1], withCreate: withCreate)
        }
    }

    /// An app process printed no port within the wait.
    public struct AppDidNotStart: Error, CustomStringConvertible {
        public var standardError: String
        public var description: String { "the app printed no port; its standard error: \(standardError)" }
    }

    /// Runs the scenario against the apps on ports `a` and `b`; returns one line per response
    /// that was not the expected one (empty when both apps always showed the new state).
    public static func mismatches(a: Int, b: Int, withCreate: Bool) throws -> [String] {
        var mismatches: [String] = []
        func check(_ method: String, _ path: String, body: String = "", on port: Int, _ expected: LoopbackHTTP.Response) throws {
            let response = try LoopbackHTTP.request(method, path, body: body, port: port)
            // A 404 or 2xx without a body to compare: the status decides.
            let matches = expected.body.isEmpty ? response.status == expected.status : response == expected
            if !matches {
                let app = port == a ? "A" : "B"
                mismatches.append("\(method) \(path) on \(app): \(response.status) \"\(response.body)\", expected \(expected.status) \"\(expected.body)\"")
            }
        }
        let path = "/session/s1"
        // A stores a session and reads it; B reads it.
        if withCreate {
            try check("POST", path, body: "alice", on: a, .init(status: 201, body: ""))
        } else {
            try check("PUT", path, body: "alice", on: a, .init(status: 200, body: ""))
        }
        try check("GET", path, on: a, .init(status: 200, body: "alice"))
        try check("GET", path, on: b, .init(status: 200, body: "alice"))
        // B removes it (a logout): A no longer has it, at once.
        try check("DELETE", path, on: b, .init(status: 204, body: ""))
        try check("GET", path, on: a, .init(status: 404, body: ""))
        if withCreate {
            // A creates it again (no false duplicate from a stale copy); B's create conflicts.
            try check("POST", path, body: "alice-2", on: a, .init(status: 201, body: ""))
            try check("POST", path, body: "bob", on: b, .init(status: 409, body: ""))
            try check("GET", path, on: b, .init(status: 200, body: "alice-2"))
        } else {
            try check("PUT", path, body: "alice-2", on: a, .init(status: 200, body: ""))
            try check("GET", path, on: b, .init(status: 200, body: "alice-2"))
        }
        // Overwrites in turn: each app reads the other's last write at once.
        for round in 1...20 {
            let (writer, reader) = round % 2 == 0 ? (a, b) : (b, a)
            try check("PUT", path, body: "count-\(round)", on: writer, .init(status: 200, body: ""))
            try check("GET", path, on: reader, .init(status: 200, body: "count-\(round)"))
            try check("GET", path, on: writer, .init(status: 200, body: "count-\(round)"))
        }
        return mismatches
    }
}
