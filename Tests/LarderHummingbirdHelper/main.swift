// The child process of the cross-process `create` race: opens a LarderPersistDriver on a shared
// directory, says "ready", waits for the parent's start file, then creates `count` keys and
// prints "won <i>" for each key it created first.
//
// Usage: LarderHummingbirdHelper <directory> <start-file> <count> <id>
#if Hummingbird
import Foundation
import Hummingbird
import LarderHummingbird

let arguments = CommandLine.arguments
guard arguments.count == 5, let count = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: LarderHummingbirdHelper <directory> <start-file> <count> <id>\n".utf8))
    exit(2)
}
let startFile = arguments[2]
let id = arguments[4]

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The test process that started this helper (ChildProcess sets LARDER_PARENT_PID); a parent
/// that died before this line ran is noticed too, since the helper then has another parent.
let expectedParent = ProcessInfo.processInfo.environment["LARDER_PARENT_PID"].flatMap(Int32.init) ?? getppid()

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
