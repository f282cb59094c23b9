// The child process of the cross-process Vapor test:
//
//   LarderVaporHelper <directory>
//       A Vapor application on 127.0.0.1 (a free port, printed as "port <n>") whose cache is a
//       LarderCache on `directory`: `PUT /session/<key>` stores the body through `req.cache`,
//       `GET` returns it (404 when there is none), `DELETE` removes it. Runs until its parent
//       exits.
#if Vapor
import Foundation
import Larder
import LarderVapor
import Vapor

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: LarderVaporHelper <directory>\n".utf8))
    exit(2)
}

/// The test process that started this helper (ChildProcess sets LARDER_PARENT_PID): an orphan
/// must not serve on, so the helper exits as soon as that process is gone.
let expectedParent = ProcessInfo.processInfo.environment["LARDER_PARENT_PID"].flatMap(Int32.init) ?? getppid()
Thread.detachNewThread {
    while getppid() == expectedParent { usleep(100_000) }
    exit(3)
}

do {
    // Vapor's own command-line arguments are not the helper's.
    let app = try await Application.make(Environment(name: "testing", arguments: ["vapor"]))
    app.logger.logLevel = .error
    app.caches.use(try .larder(directory: URL(fileURLWithPath: arguments[1])))
    app.http.server.configuration.hostname = "127.0.0.1"
    app.http.server.configuration.port = 0
    app.get("session", ":key") { req async throws -> Response in
        let key = try req.parameters.require("key")
        guard let value = try await req.cache.get(key, as: String.self) else { return Response(status: .notFound) }
        return Response(status: .ok, body: .init(string: value))
    }
    app.put("session", ":key") { req async throws -> HTTPStatus in
        try await req.cache.set(try req.parameters.require("key"), to: req.body.string ?? "")
        return .ok
    }
    app.delete("session", ":key") { req async throws -> HTTPStatus in
        try await req.cache.delete(try req.parameters.require("key"))
        return .noContent
    }
    try await app.startup()
    let port = app.http.server.shared.localAddress?.port ?? 0
    FileHandle.standardOutput.write(Data("port \(port)\n".utf8))
    while true { try await Task.sleep(for: .seconds(3_600)) }
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
#endif
