// The child process of LarderMemcached's multi-process tests (not a product).
//
//   LarderMemcachedHelper stampede PORTS KEYS COUNT_FILE TASKS START_UNIX_MS
//
// PORTS and KEYS are comma-separated: the store's pool (servers on 127.0.0.1) and the keys.
// Waits until START_UNIX_MS so every helper asks at once, then runs TASKS concurrent
// get-or-load calls for each key through a Storage with a MemcachedStore tier; the loader
// appends the key as a line to COUNT_FILE (O_APPEND: one write per call, whole lines) and takes
// 200 ms. Prints "values <n> <distinct values>" and exits 0.
#if Memcached
import Foundation
import Larder
import LarderMemcached
#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
let ports = arguments.count == 7 ? arguments[2].split(separator: ",").compactMap { Int($0) } : []
guard arguments.count == 7, arguments[1] == "stampede", !ports.isEmpty, let tasks = Int(arguments[5]),
      let startMillis = Double(arguments[6]) else {
    FileHandle.standardError.write(Data("usage: LarderMemcachedHelper stampede PORTS KEYS COUNT_FILE TASKS START_UNIX_MS\n".utf8))
    exit(2)
}
let keys = arguments[3].split(separator: ",").map(String.init)
let countFile = arguments[4]
let store = try MemcachedStore(configuration: .init(
    servers: ports.map { .init(host: "127.0.0.1", port: $0) }, namespace: "mp:", deadline: .seconds(300)))
let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
// Connect before the start line so connection set-up does not stagger the helpers.
_ = try? await store.entry(forKey: "warm-up")
let wait = startMillis / 1000 - Date().timeIntervalSince1970
if wait > 0 { try await Task.sleep(for: .seconds(wait)) }

let values = try await withThrowingTaskGroup(of: String.self) { group in
    for key in keys {
        for _ in 0..<tasks {
        group.addTask {
            try await storage.value(forKey: key, expiry: .seconds(60)) { _ in
                let fd = open(countFile, O_WRONLY | O_APPEND | O_CREAT, 0o644)
                precondition(fd >= 0, "cannot open \(countFile)")
                let line = "\(key)\n"
                _ = line.withCString { write(fd, $0, strlen($0)) }
                close(fd)
                try await Task.sleep(for: .milliseconds(200))
                return "computed"
            }
        }
        }
    }
    var values: [String] = []
    for try await value in group { values.append(value) }
    return values
}
print("values \(values.count) \(Set(values).sorted().joined(separator: ","))")
await store.close()
#else
print("LarderMemcachedHelper needs the Memcached trait")
#endif
