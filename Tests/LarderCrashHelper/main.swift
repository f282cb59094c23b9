// A child process for the fault tests: writes to a DiskStore in a loop until it is killed.
//
// Usage: LarderCrashHelper <directory> <log> <seed> <fast|durable> <keyPrefix> <keyCount> [iterations]
//
// Before each write it appends "begin <key> <generation>" to the log and after it
// "done <key> <generation>", each line flushed with fsync, so the parent knows which writes
// completed and which one may have been in flight when it sent SIGKILL.
import Foundation
import Larder
import LarderTestSupport

let arguments = CommandLine.arguments
guard arguments.count >= 7,
      let seed = UInt64(arguments[3]),
      let keyCount = Int(arguments[6]) else {
    FileHandle.standardError.write(Data("usage: LarderCrashHelper dir log seed fast|durable prefix count [iterations]\n".utf8))
    exit(64)
}
let directory = URL(fileURLWithPath: arguments[1])
let iterations = arguments.count > 7 ? Int(arguments[7]) ?? .max : .max
let prefix = arguments[5]

var configuration = DiskStore.Configuration()
configuration.durability = arguments[4] == "durable" ? .durable : .fast
configuration.inlineThreshold = 2_048
configuration.compression = .gzip(level: 1)
configuration.logHandler = nil

let store: DiskStore
do {
    store = try DiskStore(directory: directory, configuration: configuration)
} catch {
    FileHandle.standardError.write(Data("cannot open store: \(error)\n".utf8))
    exit(70)
}

let log = open(arguments[2], O_WRONLY | O_APPEND | O_CREAT, 0o600)
guard log >= 0 else { exit(71) }
func record(_ line: String) {
    var line = line + "\n"
    line.withUTF8 { _ = write(log, $0.baseAddress, $0.count) }
    fsync(log)
}

var random = CrashPayload.Generator(seed: seed)
var generation = [Int](repeating: 0, count: keyCount)
var done = 0
while done < iterations {
    let index = Int(random.next() % UInt64(keyCount))
    generation[index] += 1
    let key = "\(prefix)\(index)"
    let gen = Int(seed % 100_000) * 1_000_000 + generation[index]
    let payload = CrashPayload.make(key: key, generation: gen, size: Int(random.next() % 12_000))
    record("begin \(key) \(gen)")
    do {
        try store.setData(payload, forKey: key)
    } catch {
        FileHandle.standardError.write(Data("write failed: \(error)\n".utf8))
        exit(72)
    }
    record("done \(key) \(gen)")
    done += 1
}
store.close()
