// A child process for the fault tests. Its modes:
//
//   LarderCrashHelper write <directory> <log> [name=value…]
//       Writes (and sometimes removes) keys in a loop until it is killed or has done
//       `iterations` operations. Before each operation it appends "begin <key> <generation>" to
//       the log and after it "done <key> <generation>", each line flushed with fsync, so the
//       parent knows which operations completed and which one may have been in flight when it
//       sent SIGKILL. Generation 0 means "removed". Options (defaults in brackets):
//         seed [1]  durability=fast|durable [fast]  prefix [key]  keys [40]  iterations [∞]
//         countLimit [∞]  removeEvery (every n-th operation is a remove) [never]
//         maxSize (largest payload) [12000]  close=0|1 (close the store at the end) [1]
//         policy=lru|s3fifo (the eviction policy) [lru]
//
//   LarderCrashHelper full-disk <directory> <fileSizeLimit>
//       Sets RLIMIT_FSIZE (SIGXFSZ ignored, so write(2) fails with EFBIG, as on a full disk),
//       drives the store into failing writes of blobs and of index rows, checks after each
//       failure that the store stays consistent, raises the limit ("space freed") and writes
//       again. Prints "check <name> ok|FAIL <detail>" lines and "error <description>" lines
//       for the parent to assert on; exits 0 when it ran to the end.
//
//   LarderCrashHelper atomic <directory> <insert|take> <name> <keys>
//       Races other processes on one directory: waits until the file `go` appears in it, then
//       for each of `keys` keys ("k0", "k1", …) inserts its `name` if absent (printing
//       "won <key>" when it did) or takes the value (printing "took <key> <value>"), and prints
//       "done" at the end.
//
//   LarderCrashHelper coherence <directory> <board> <index> <processes> <operations> <keys>
//       One of `processes` processes on one directory, each with a `Storage<String, String>`
//       whose memory follows the directory. Process `index` owns `keys` keys
//       ("p<index>-<k>") and alone writes and removes them; every process reads every key.
//       After the file `go` appears in `directory`, it runs `operations` mixed operations: the
//       n-th operation on an owned key stores "n", or removes it when n is a multiple of 5, and
//       then publishes n in the key's 8-byte slot of the `board` file. A read first reads the
//       slot (p) and must then see the key's state after operation p: a version at least p,
//       or nothing when a removal lies between p and the slot read after it (+1, one in
//       flight). Prints "stale <key> read=<value> published=<p>" for the first few stale
//       reads and "done operations=<n> reads=<n> memory=<n> stale=<n> wrong=<n>" at the end.
//
//   LarderCrashHelper coherence-create <directory> <name> <keys>
//       Reads keys "c0"… into memory through a `Storage<String, String>` that follows the
//       directory, prints "primed", waits for the file `go` (the parent removes the keys
//       before creating it), then inserts `name` for each key if absent, printing "won <key>"
//       for each it inserted, and "done" at the end.
//
//   LarderCrashHelper batch <directory> <keys>
//       Writes generation 1, 2, 3… of `keys` keys ("k0", "k1", …) until it is killed, each
//       generation in one `setValues` batch, and prints "done <generation>" after each. A value
//       starts with "<generation> <key> " (every fourth one is large enough for a blob file), so
//       the parent can check that the directory holds one whole generation.
//
//   LarderCrashHelper spawn <mode> <arguments…>
//       An intermediate parent for the orphan tests: starts the helper again with the given
//       mode and arguments, prints "child <pid>", and waits until it is killed.
//
// In every mode a watchdog thread exits the helper (status 75) as soon as its parent dies —
// the process named by LARDER_PARENT_PID, or the parent it started with — so a test runner
// that is killed, or a test that could not clean up, never leaves a writer behind.
import Foundation
import Larder
import LarderTestSupport
#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("LarderCrashHelper: \(message)\n".utf8))
    exit(code)
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    fail("usage: LarderCrashHelper write <dir> <log> [name=value…] | full-disk <dir> <bytes>", code: 64)
}

watchParent()

switch arguments[1] {
case "write": runWriter()
case "full-disk": runFullDisk()
case "spawn": runSpawn()
case "atomic": runAtomic()
case "coherence": runCoherence()
case "coherence-create": runCoherenceCreate()
case "batch": runBatch()
default: fail("unknown mode \(arguments[1])", code: 64)
}

// MARK: - parent watchdog

/// Exits as soon as the parent is gone: polls `getppid()` every 100 ms on a thread of its own.
/// The expected parent comes from LARDER_PARENT_PID, so a parent that died before this line ran
/// is noticed too.
func watchParent() {
    let expected = ProcessInfo.processInfo.environment["LARDER_PARENT_PID"].flatMap(Int32.init) ?? getppid()
    let orphaned: @Sendable () -> Bool = { getppid() != expected }
    if orphaned() { _exit(75) }
    Thread.detachNewThread {
        while true {
            usleep(100_000)
            if orphaned() { _exit(75) }
        }
    }
}

// MARK: - batch

func runBatch() {
    guard arguments.count >= 4, let keyCount = Int(arguments[3]) else { fail("batch needs <directory> <keys>", code: 64) }
    let store: DiskStore
    do {
        store = try DiskStore(directory: URL(fileURLWithPath: arguments[2]))
    } catch {
        fail("cannot open store: \(error)", code: 70)
    }
    var generation = 0
    while true {
        generation += 1
        let writes = (0..<keyCount).map { index in
            let key = "k\(index)"
            let padding = Data(repeating: UInt8(truncatingIfNeeded: generation &* 31 &+ index), count: index % 4 == 0 ? 20_000 : 100)
            return TierWrite(key: key, data: Data("\(generation) \(key) ".utf8) + padding, isCompressible: false)
        }
        do {
            try store.setValues(writes)
        } catch {
            fail("batch \(generation) failed: \(error)", code: 70)
        }
        FileHandle.standardOutput.write(Data("done \(generation)\n".utf8))
    }
}

// MARK: - atomic

func runAtomic() {
    guard arguments.count >= 6, let keyCount = Int(arguments[5]) else {
        fail("atomic needs <directory> <insert|take> <name> <keys>", code: 64)
    }
    let directory = URL(fileURLWithPath: arguments[2])
    let operation = arguments[3]
    let name = arguments[4]
    let store: DiskStore
    do {
        store = try DiskStore(directory: directory)
    } catch {
        fail("cannot open store: \(error)", code: 70)
    }
    let go = directory.appendingPathComponent("go").path
    while !FileManager.default.fileExists(atPath: go) { usleep(1_000) }
    var lines: [String] = []
    do {
        for index in 0..<keyCount {
            let key = "k\(index)"
            switch operation {
            case "insert":
                if try store.insertValue(Data(name.utf8), forKey: key) { lines.append("won \(key)") }
            case "take":
                if let data = try store.takeValue(forKey: key) {
                    lines.append("took \(key) \(String(decoding: data, as: UTF8.self))")
                }
            default:
                fail("unknown atomic operation \(operation)", code: 64)
            }
        }
    } catch {
        fail("atomic \(operation) failed: \(error)", code: 70)
    }
    store.close()
    FileHandle.standardOutput.write(Data((lines + ["done"]).map { $0 + "\n" }.joined().utf8))
}

// MARK: - coherence

/// Writes `line` to standard output at once (unbuffered).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Waits for the file `go` in `directory`.
func waitForGo(in directory: URL) {
    let go = directory.appendingPathComponent("go").path
    while !FileManager.default.fileExists(atPath: go) { usleep(1_000) }
}

func runCoherence() {
    guard arguments.count >= 8, let index = Int(arguments[4]), let processes = Int(arguments[5]),
          let operations = Int(arguments[6]), let keyCount = Int(arguments[7]), processes > 0, keyCount > 0
    else {
        fail("coherence needs <directory> <board> <index> <processes> <operations> <keys>", code: 64)
    }
    let directory = URL(fileURLWithPath: arguments[2])
    let board = open(arguments[3], O_RDWR | O_CLOEXEC)
    guard board >= 0 else { fail("cannot open the board \(arguments[3])", code: 70) }
    let storage: Storage<String, String>
    do {
        storage = try Storage(configuration: .init(directory: directory), transformer: .string)
    } catch {
        fail("cannot open storage: \(error)", code: 70)
    }
    // Slot of key k of process i: i * keyCount + k.
    func slot(_ process: Int, _ key: Int) -> off_t { off_t((process * keyCount + key) * 8) }
    func published(_ offset: off_t) -> Int {
        var value: UInt64 = 0
        guard pread(board, &value, 8, offset) == 8 else { fail("cannot read the board", code: 70) }
        return Int(value)
    }
    func publish(_ version: Int, at offset: off_t) {
        var value = UInt64(version)
        guard pwrite(board, &value, 8, offset) == 8 else { fail("cannot write the board", code: 70) }
    }
    say("ready")
    waitForGo(in: directory)
    var random = SplitMix64(seed: UInt64(index + 1) &* 0x9E37_79B9)
    var versions = [Int](repeating: 0, count: keyCount)
    var reads = 0, memoryHits = 0, stale = 0, wrong = 0
    do {
        for _ in 0..<operations {
            let roll = Int(random.next() % 100)
            if roll < 35 {
                // A write or removal of an owned key, then its publication.
                let key = Int(random.next() % UInt64(keyCount))
                versions[key] += 1
                let version = versions[key]
                if version % 5 == 0 {
                    try storage.removeValue(forKey: "p\(index)-\(key)")
                } else {
                    try storage.setValue(String(version), forKey: "p\(index)-\(key)")
                }
                publish(version, at: slot(index, key))
            } else {
                // A read of any process's key (mostly other processes' when there are several).
                let owner = Int(random.next() % UInt64(processes))
                let key = Int(random.next() % UInt64(keyCount))
                let name = "p\(owner)-\(key)"
                let floor = published(slot(owner, key))
                let entry = try storage.entry(forKey: name)
                let ceiling = published(slot(owner, key)) + 1
                reads += 1
                if entry?.tier == .memory { memoryHits += 1 }
                let isStale: Bool
                if let value = entry?.value {
                    guard let version = Int(value), version % 5 != 0, version <= ceiling else {
                        wrong += 1
                        say("wrong \(name) read=\(value) published=\(floor)")
                        continue
                    }
                    isStale = version < floor
                } else {
                    isStale = floor > 0 && !(floor...ceiling).contains { $0 % 5 == 0 }
                }
                if isStale {
                    stale += 1
                    if stale <= 10 { say("stale \(name) read=\(entry?.value ?? "nil") published=\(floor) tier=\(entry?.tier.name ?? "-")") }
                }
            }
        }
    } catch {
        fail("coherence run failed: \(error)", code: 70)
    }
    storage.close()
    say("done operations=\(operations) reads=\(reads) memory=\(memoryHits) stale=\(stale) wrong=\(wrong)")
}

func runCoherenceCreate() {
    guard arguments.count >= 5, let keyCount = Int(arguments[4]) else {
        fail("coherence-create needs <directory> <name> <keys>", code: 64)
    }
    let directory = URL(fileURLWithPath: arguments[2])
    let name = arguments[3]
    var lines: [String] = []
    do {
        let storage = try Storage<String, String>(configuration: .init(directory: directory), transformer: .string)
        for index in 0..<keyCount where try storage.value(forKey: "c\(index)") == nil {
            fail("c\(index) was not stored before the run", code: 70)
        }
        say("primed")
        waitForGo(in: directory)
        for index in 0..<keyCount where try storage.insertValue(name, forKey: "c\(index)") {
            lines.append("won c\(index)")
        }
        storage.close()
    } catch {
        fail("coherence-create failed: \(error)", code: 70)
    }
    FileHandle.standardOutput.write(Data((lines + ["done"]).map { $0 + "\n" }.joined().utf8))
}

// MARK: - spawn

func runSpawn() {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? arguments[0])
    child.arguments = Array(arguments.dropFirst(2))
    var environment = ProcessInfo.processInfo.environment
    environment["LARDER_PARENT_PID"] = "\(getpid())"
    child.environment = environment
    child.standardInput = FileHandle.nullDevice
    child.standardOutput = FileHandle.nullDevice
    child.standardError = FileHandle.nullDevice
    do {
        try child.run()
    } catch {
        fail("cannot start the child: \(error)", code: 70)
    }
    FileHandle.standardOutput.write(Data("child \(child.processIdentifier)\n".utf8))
    while true { sleep(60) }
}

// MARK: - write

func runWriter() {
    guard arguments.count >= 4 else { fail("write needs <directory> <log>", code: 64) }
    var options: [String: String] = [:]
    for argument in arguments.dropFirst(4) {
        let parts = argument.split(separator: "=", maxSplits: 1)
        guard parts.count == 2 else { fail("bad option \(argument)", code: 64) }
        options[String(parts[0])] = String(parts[1])
    }
    func number(_ name: String, _ fallback: Int) -> Int { options[name].flatMap(Int.init) ?? fallback }
    let seed = UInt64(number("seed", 1))
    let prefix = options["prefix"] ?? "key"
    let keyCount = number("keys", 40)
    let iterations = number("iterations", .max)
    let removeEvery = number("removeEvery", 0)
    let maxSize = number("maxSize", 12_000)

    var configuration = DiskStore.Configuration()
    configuration.durability = options["durability"] == "durable" ? .durable : .fast
    configuration.inlineThreshold = 2_048
    configuration.compression = .gzip(level: 1)
    configuration.countLimit = number("countLimit", .max)
    configuration.policy = options["policy"] == "s3fifo" ? .s3fifo : .lru
    configuration.logHandler = nil

    let store: DiskStore
    do {
        store = try DiskStore(directory: URL(fileURLWithPath: arguments[2]), configuration: configuration)
    } catch {
        fail("cannot open store: \(error)", code: 70)
    }

    let log = open(arguments[3], O_WRONLY | O_APPEND | O_CREAT, 0o600)
    guard log >= 0 else { fail("cannot open log", code: 71) }
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
        let key = "\(prefix)\(index)"
        let isRemove = removeEvery > 0 && random.next() % UInt64(removeEvery) == 0
        do {
            if isRemove {
                record("begin \(key) 0")
                try store.removeValue(forKey: key)
                record("done \(key) 0")
            } else {
                generation[index] += 1
                let gen = Int(seed % 100_000) * 1_000_000 + generation[index]
                let payload = CrashPayload.make(key: key, generation: gen, size: Int(random.next() % UInt64(maxSize + 1)))
                record("begin \(key) \(gen)")
                try store.setValue(payload, forKey: key)
                record("done \(key) \(gen)")
            }
        } catch {
            fail("operation on \(key) failed: \(error)", code: 72)
        }
        done += 1
    }
    if options["close"] != "0" { store.close() }
    exit(0)
}

// MARK: - full-disk

func runFullDisk() {
    guard arguments.count >= 4, let limit = rlim_t(arguments[3]) else { fail("full-disk needs <dir> <bytes>", code: 64) }
    let directory = URL(fileURLWithPath: arguments[2])
    signal(SIGXFSZ, SIG_IGN)

    func setFileSizeLimit(_ bytes: rlim_t) {
        var limits = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limits)
        limits.rlim_cur = min(bytes, limits.rlim_max)
        guard setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limits) == 0 else { fail("setrlimit failed", code: 73) }
    }
    func check(_ name: String, _ condition: Bool, _ detail: @autoclosure () -> String = "") {
        print("check \(name) \(condition ? "ok" : "FAIL \(detail())")")
    }

    var configuration = DiskStore.Configuration()
    configuration.inlineThreshold = 16 * 1024
    configuration.logHandler = nil
    let store: DiskStore
    do {
        store = try DiskStore(directory: directory, configuration: configuration)
    } catch {
        fail("cannot open store: \(error)", code: 70)
    }
    /// What each key must read back as (nil: absent).
    var expected: [String: Data] = [:]

    func verifyConsistency(_ phase: String) {
        do {
            let keys = try store.keys()
            check("\(phase).keys-match-expected", Set(keys) == Set(expected.keys),
                  "keys \(keys.count) expected \(expected.count)")
            var size = 0
            for key in keys { size += try store.attributes(forKey: key)?.size ?? 0 }
            check("\(phase).totals-exact", store.totalCount == keys.count && store.totalSize == size,
                  "totals \(store.totalCount)/\(store.totalSize), recount \(keys.count)/\(size)")
            for (key, value) in expected {
                let read = try store.value(forKey: key)
                check("\(phase).value-exact", read == value, "\(key) read \(read?.count ?? -1) bytes")
            }
            let tmp = (try? FileManager.default.contentsOfDirectory(atPath: directory.path + "/tmp")) ?? []
            check("\(phase).tmp-empty", tmp.isEmpty, "\(tmp)")
        } catch {
            check("\(phase).readable", false, "\(error)")
        }
    }

    setFileSizeLimit(limit)

    // 1. Blobs: values that fit are written; one larger than the limit fails cleanly, also as
    //    an overwrite, which must leave the previous value.
    for index in 0..<3 {
        let value = CrashPayload.make(key: "blob\(index)", generation: index + 1, size: Int(limit) / 4)
        do {
            try store.setValue(value, forKey: "blob\(index)")
            expected["blob\(index)"] = value
        } catch {
            check("blob.small-write", false, "\(error)")
        }
    }
    for key in ["blob-new", "blob0"] {
        do {
            try store.setValue(CrashPayload.make(key: key, generation: 99, size: Int(limit) * 2), forKey: key)
            check("blob.oversized-write-throws", false, "no error for \(key)")
        } catch let error as StorageError {
            print("error blob \(error)")
            if error.code == .io { check("blob.oversized-write-throws", true) } else {
                check("blob.oversized-write-throws", false, "\(error)")
            }
        } catch {
            check("blob.oversized-write-throws", false, "\(error)")
        }
    }
    verifyConsistency("blob")

    // 2. Index rows: inline values to new keys until the index (database or WAL) cannot grow.
    var indexFailure: (any Error)?
    for index in 0..<10_000 {
        let key = "row\(index)"
        let value = CrashPayload.make(key: key, generation: 1, size: 8_000)
        do {
            try store.setValue(value, forKey: key, isCompressible: false)
            expected[key] = value
        } catch {
            indexFailure = error
            break
        }
    }
    check("index.write-throws", indexFailure is StorageError, "\(String(describing: indexFailure))")
    print("error index \(indexFailure.map { "\($0)" } ?? "none")")
    // An overwrite that cannot be stored keeps the previous value.
    do {
        try store.setValue(CrashPayload.make(key: "row0", generation: 2, size: 15_000), forKey: "row0", isCompressible: false)
        expected["row0"] = CrashPayload.make(key: "row0", generation: 2, size: 15_000)
        print("note index overwrite succeeded")
    } catch {
        print("note index overwrite failed: \(error)")
    }
    verifyConsistency("index")

    // 3. Space freed: every kind of write works again.
    setFileSizeLimit(rlim_t.max) // RLIM_INFINITY
    do {
        for (key, size) in [("after-blob", Int(limit) * 2), ("after-row", 100), ("blob0", 50_000)] {
            let value = CrashPayload.make(key: key, generation: 3, size: size)
            try store.setValue(value, forKey: key)
            expected[key] = value
        }
        check("freed.writes-succeed", true)
    } catch {
        check("freed.writes-succeed", false, "\(error)")
    }
    verifyConsistency("freed")
    store.close()
    exit(0)
}
