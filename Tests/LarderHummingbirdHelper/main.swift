// The child process of the cross-process Hummingbird tests. Two modes:
//
//   LarderHummingbirdHelper <directory> <start-file> <count> <id>
//       The `create` race: opens a LarderPersistDriver on a shared directory, says "ready",
//       waits for the parent's start file, then creates `count` keys and prints "won <i>" for
//       each key it created first.
//
//   LarderHummingbirdHelper serve <directory>
//       A Hummingbird application on 127.0.0.1 (a free port, printed as "port <n>") whose
//       sessions live in a LarderPersistDriver on `directory`: `PUT /session/<key>` stores the
//       body, `POST /session/<key>` creates it (409 when a live value exists), `GET` returns it
//       (404 when there is none), `DELETE` removes it. Runs until its parent exits.
#if Hummingbird
import Foundation
import Hummingbird
import LarderHummingbird

let arguments = CommandLine.arguments

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The test process that started this helper (ChildProcess sets LARDER_PARENT_PID); a parent
/// that died before this line ran is noticed too, since the helper then has another parent.
let expectedParent = ProcessInfo.processInfo.environment["LARDER_PARENT_PID"].flatMap(Int32.init) ?? getppid()

if arguments.count == 3, arguments[1] == "serve" {
    // An orphan must not serve on: exit as soon as the test runner is gone.
    Thread.detachNewThread {
        while getppid() == expectedParent { usleep(100_000) }
        exit(3)
    }
    do {
        let persist = try LarderPersistDriver(directory: URL(fileURLWithPath: arguments[2]))
        let router = Router()
        router.get("session/:key") { _, context -> Response in
            let key = try context.parameters.require("key")
            guard let value = try await persist.get(key: key, as: String.self) else { return Response(status: .notFound) }
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: value)))
        }
        router.put("session/:key") { request, context -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 1 << 20)
            try await persist.set(key: try context.parameters.require("key"), value: String(buffer: body), expires: nil)
            return .ok
        }
        router.post("session/:key") { request, context -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 1 << 20)
            do {
                try await persist.create(key: try context.parameters.require("key"), value: String(buffer: body), expires: nil)
                return .created
            } catch let error as PersistError where error == .duplicate {
                return .conflict
            }
        }
        router.delete("session/:key") { _, context -> HTTPResponse.Status in
            try await persist.remove(key: try context.parameters.require("key"))
            return .noContent
        }
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), services: [persist],
            onServerRunning: { channel in say("port \(channel.localAddress?.port ?? 0)") })
        try await app.runService()
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}

guard arguments.count == 5, let count = Int(arguments[3]) else {
    FileHandle.standardError.write(Data(
        "usage: LarderHummingbirdHelper <directory> <start-file> <count> <id> | serve <directory>\n".utf8))
    exit(2)
}
let startFile = arguments[2]
let id = arguments[4]

do {
    let driver = try LarderPersistDriver(directory: URL(fileURLWithPath: arguments[1]))
    say("ready")
    // Waits for the start file, and gives up if the test runner is gone (killed, or crashed):
    // an orphan must not poll for a file that will never come.
    while !FileManager.default.fileExists(atPath: startFile) {
        guard getppid() == expectedParent else {
            FileHandle.standardError.write(Data("error: the parent process exited before the start file appeared\n".utf8))
            exit(3)
        }
        usleep(1_000)
    }
    for index in 0..<count {
        do {
            try await driver.create(key: "race-\(index)", value: id, expires: nil)
            say("won \(index)")
        } catch let error as PersistError where error == .duplicate {
            continue
        }
    }
    try await driver.shutdown()
    say("done")
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
#endif
