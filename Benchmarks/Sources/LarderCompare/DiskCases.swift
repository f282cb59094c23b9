import BenchmarkSupport
import Foundation
import Larder

/// A disk-tier contender: anything that stores bytes under string keys. A new contender only
/// needs an entry in `diskContenders`; report.py shows the `larder` and `storage` names.
protocol DiskContender {
    var name: String { get }
    func set(_ data: Data, forKey key: String) throws
    func get(_ key: String) throws -> Data?
    func close()
}

/// `DiskStore` with its defaults, except a 1 GiB size limit (diskcache's default) so that no
/// eviction happens while the set phase fills the store.
final class DiskStoreContender: DiskContender {
    let name = "larder"
    let store: DiskStore

    init(directory: URL, policy: EvictionPolicy = .lru) throws {
        var configuration = DiskStore.Configuration()
        configuration.sizeLimit = 1 << 30
        configuration.policy = policy
        store = try DiskStore(directory: directory, configuration: configuration)
    }

    func set(_ data: Data, forKey key: String) throws { try store.setValue(data, forKey: key) }
    func get(_ key: String) throws -> Data? { try store.value(forKey: key) }
    func close() { store.close() }
}

/// `Storage<String, Data>` with `defaultTiers = .disk`: the generic layer's cost over
/// `DiskStore` (key mapping, transformer, stripe lock), same disk configuration.
final class StorageContender: DiskContender {
    let name = "storage"
    let storage: Storage<String, Data>

    init(directory: URL) throws {
        var configuration = Storage<String, Data>.Configuration(directory: directory, defaultTiers: .disk)
        configuration.disk.sizeLimit = 1 << 30
        storage = try Storage(configuration: configuration, transformer: .data)
    }

    func set(_ data: Data, forKey key: String) throws { try storage.setValue(data, forKey: key) }
    func get(_ key: String) throws -> Data? { try storage.value(forKey: key) }
    func close() { storage.disk?.close() }
}

/// The contenders the compare run measures, each given a fresh directory.
let diskContenders: [(name: String, make: @Sendable (URL) throws -> any DiskContender)] = [
    ("larder", { try DiskStoreContender(directory: $0) }),
    ("storage", { try StorageContender(directory: $0) }),
]

/// The disk workload of Benchmarks/README.md: for each value size, `n` sets of fresh keys, `n`
/// hits in a scattered order, and (for 100 B) `n` misses; every case on a fresh store.
func runDiskCases(_ arguments: Arguments, root: URL) throws {
    for (name, make) in diskContenders {
        for (bytes, label, countKey) in Workload.sizes {
            let n = arguments.int(countKey, default: 1000)
            let directory = root.appendingPathComponent("\(name)-\(label)")
            try? FileManager.default.removeItem(at: directory)
            let store = try make(directory)

            let base = Workload.randomBytes(bytes)
            let keys = (0..<n).map { Workload.key("k", label, $0) }
            let values = (0..<n).map { Workload.value(base: base, index: $0) }
            // Earlier cases' dirty pages (up to 150 MB) are written back before, not during, the
            // timed writes: otherwise whoever runs second pays for whoever ran first.
            sync()
            warmPageCache(in: root, bytes: n * bytes)
            let seconds = try measure {
                for i in 0..<n { try store.set(values[i], forKey: keys[i]) }
            }
            report("disk.set(\(label))", name, ops: n, seconds: seconds)

            let order = (0..<n).map { keys[Workload.readIndex($0, n)] }
            let hitSeconds = try measure {
                for key in order {
                    guard let value = try store.get(key), value.count == bytes else {
                        fail("\(name): miss or wrong size for \(key)")
                    }
                    consume(value)
                }
            }
            report("disk.get-hit(\(label))", name, ops: n, seconds: hitSeconds)

            if name == "larder", bytes <= 4_096, let disk = store as? DiskStoreContender {
                try runParallelReads(disk.store, order: order, bytes: bytes, label: label)
            }

            if bytes == 100 {
                let misses = (0..<n).map { Workload.key("miss", label, $0) }
                let missSeconds = try measure {
                    for key in misses {
                        if try store.get(key) != nil { fail("\(name): unexpected hit") }
                    }
                }
                report("disk.get-miss", name, ops: n, seconds: missSeconds)
            }
            store.close()
            try? FileManager.default.removeItem(at: directory)
        }
    }
}

/// The disk get-hit of 100 B values under `.s3fifo` against `.lru` (#18): for each policy a
/// fresh store (1 GiB limit, no eviction) gets `n` sets, then `n` hits in the scattered order of
/// the workload. Reported as the case `disk.get-hit(100B, s3fifo)`, contenders `larder` (the
/// `.s3fifo` store) and `disk-lru`; and again with the reads ranked on the reading thread
/// (`ranksReadsInBackground = false`), as `disk.get-hit(100B, s3fifo, ranked inline)`, where
/// the time includes what each policy writes per read. Every one of those hits is the first
/// read of its entry. `disk.get-hit(100B, s3fifo, warm)` measures re-reads instead: three
/// unmeasured passes over the keys first (an `.s3fifo` counter saturates at 3), their reads
/// ranked, then the measured passes, reads ranked on the reading thread. Where reads are ranked
/// on the reading thread, each store's time ends with ranking what its measured reads left in
/// the log.
///
/// Both stores are filled (and warmed) first; then their measured reads take turns, the keys
/// of each pass cut into `policychunks` chunks (default 8), each read from one store and then
/// from the other (which store goes first alternates), and each contender's time is the sum of
/// its chunks. Measured one store after the other, the two sat in different moods of the shared
/// host: the same contender ran at about 240k or 370k reads/s from run to run, so one ratio
/// could read 0.79 or 1.6. `policychunks=0` measures them one after the other, as before.
func runDiskPolicyCase(_ arguments: Arguments, root: URL) throws {
    let n = arguments.int("n100", default: 1000)
    let chunks = max(0, arguments.int("policychunks", default: 8))
    let base = Workload.randomBytes(100)
    let keys = (0..<n).map { Workload.key("k", "100B", $0) }
    let values = (0..<n).map { Workload.value(base: base, index: $0) }
    let order = (0..<n).map { keys[Workload.readIndex($0, n)] }
    for inBackground in [true, false] {
        let label = inBackground ? "disk.get-hit(100B, s3fifo)" : "disk.get-hit(100B, s3fifo, ranked inline)"
        try runDiskPolicyCase(
            label, inBackground: inBackground, chunks: chunks, keys: keys, values: values, order: order, root: root)
    }
    // Warm re-reads are measured over several passes: one pass of a few thousand unlogged
    // reads lasts tens of milliseconds, too short to be steady on a shared machine.
    try runDiskPolicyCase(
        "disk.get-hit(100B, s3fifo, warm)", inBackground: false, warmUpPasses: 3,
        rankWarmUp: arguments.int("warmrank", default: 1) != 0, measuredPasses: arguments.int("warmpasses", default: 4),
        chunks: chunks, keys: keys, values: values, order: order, root: root)
}

private func runDiskPolicyCase(
    _ label: String, inBackground: Bool, warmUpPasses: Int = 0, rankWarmUp: Bool = true, measuredPasses: Int = 1,
    chunks: Int, keys: [String], values: [Data], order: [String], root: URL
) throws {
    let n = keys.count
    let contenders = [("disk-lru", EvictionPolicy.lru), ("larder", .s3fifo)]
    var stores: [DiskStore] = []
    for (name, policy) in contenders {
        let directory = root.appendingPathComponent("policy-\(name)")
        try? FileManager.default.removeItem(at: directory)
        let store = try DiskStore(directory: directory) {
            $0.sizeLimit = 1 << 30
            $0.policy = policy
            $0.ranksReadsInBackground = inBackground
        }
        for i in 0..<n { try store.setValue(values[i], forKey: keys[i]) }
        for _ in 0..<warmUpPasses {
            for key in order where try store.value(forKey: key) == nil { fail("\(name): miss for \(key)") }
        }
        // The warm-up's last reads are ranked before the measurement (a trim that removes
        // nothing): until then an `.s3fifo` counter read three times may still read 2, and the
        // measured reads found a third of their counters unsaturated and logged again.
        if warmUpPasses > 0 && rankWarmUp { try store.trim(toCount: .max) }
        stores.append(store)
    }
    var seconds = try measureInTurns(count: n, chunks: chunks, passes: measuredPasses) { contender, items in
        let store = stores[contender]
        for key in order[items] {
            guard let value = try store.value(forKey: key), value.count == 100 else {
                fail("\(contenders[contender].0): miss for \(key)")
            }
            consume(value)
        }
    }
    // Reads ranked on the reading thread: each store's time includes ranking what its measured
    // reads left in the log, so that neither policy's bookkeeping falls outside its window.
    if !inBackground {
        for index in stores.indices { seconds[index] += try measure { try stores[index].trim(toCount: .max) } }
    }
    for (index, (name, _)) in contenders.enumerated() {
        report(label, name, ops: n * measuredPasses, seconds: seconds[index])
        stores[index].close()
        try? FileManager.default.removeItem(at: root.appendingPathComponent("policy-\(name)"))
    }
}

/// Reads on two threads at once against one thread, on the same store and keys: `n` gets on
/// one thread, then `n` gets on each of two threads (scattered orders offset from each other).
/// Reported as the case `disk.get-hit(<size>, 2 threads)`, contenders `larder` (both threads'
/// ops/s together) and `1thread`.
func runParallelReads(_ store: DiskStore, order: [String], bytes: Int, label: String, passes: Int = 1) throws {
    try runParallelReads([store, store], order: order, bytes: bytes, label: label, passes: passes)
}

/// ``runParallelReads(_:order:bytes:label:passes:)`` where thread `i` reads `stores[i]` (one thread:
/// `stores[0]`); with two different stores the case is `disk.get-hit(<size>, 2 threads, 2 stores)`.
/// Each phase reads its keys `passes` times (a longer window, with more rankings in it).
func runParallelReads(_ stores: [DiskStore], order: [String], bytes: Int, label: String, passes: Int = 1) throws {
    let n = order.count
    let separate = stores[0] !== stores[1]
    let name = separate ? "\(label), 2 threads, 2 stores" : "\(label), 2 threads"
    @Sendable func readAll(offset: Int, store: DiskStore) {
        for step in 0..<n {
            let key = order[(step + offset) % n]
            guard let value = try? store.value(forKey: key), value.count == bytes else { fail("parallel read of \(key)") }
            consume(value)
        }
    }
    // Each phase starts with every store's read log ranked (a trim that removes nothing ranks
    // it, untimed), so that each phase pays for the rankings of its own reads and no other's:
    // before, the reads of the setup and of the one-thread phase were still logged when the
    // two-thread phase began, and their ranking fell inside it (finding 22).
    // `threadrank=0` leaves the log as it was (the measurement before finding 22), for comparison.
    func rankLoggedReads() {
        guard Arguments().int("threadrank", default: 1) != 0 else { return }
        for store in stores { try? store.trim(toCount: .max) }
    }
    // Cores busy (process CPU time over wall time) in each phase: one reading thread may keep
    // more than one core busy, because its reads are ranked on a background thread.
    rankLoggedReads()
    var cpu = processCPUSeconds()
    let one = measure { for _ in 0..<passes { readAll(offset: 0, store: stores[0]) } }
    let oneCPU = processCPUSeconds() - cpu
    rankLoggedReads()
    cpu = processCPUSeconds()
    let two = measure {
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for _ in 0..<passes { readAll(offset: thread * n / 2, store: stores[thread]) }
        }
    }
    let twoCPU = processCPUSeconds() - cpu
    report("disk.get-hit(\(name))", "1thread", ops: n * passes, seconds: one)
    report("disk.get-hit(\(name))", "larder", ops: 2 * n * passes, seconds: two)
    report("disk.get-hit(\(name), cores busy)", "1thread", value: oneCPU / one, unit: "cores")
    report("disk.get-hit(\(name), cores busy)", "2threads", value: twoCPU / two, unit: "cores")
}

/// Only the two-thread reads (`cases=threads`): for each of 100 B and 4 KiB, `n` values set and
/// read once in a scattered order, then ``runParallelReads(_:order:bytes:label:passes:)`` with
/// `threadpasses` passes (default 1, as in the full run).
func runParallelReadCases(_ arguments: Arguments, root: URL) throws {
    let passes = max(1, arguments.int("threadpasses", default: 1))
    for (bytes, label, countKey) in Workload.sizes where bytes <= 4_096 {
        let n = arguments.int(countKey, default: 1000)
        let base = Workload.randomBytes(bytes)
        let keys = (0..<n).map { Workload.key("k", label, $0) }
        let order = (0..<n).map { keys[Workload.readIndex($0, n)] }
        /// A store in `root/name` holding the `n` values, each read once.
        func filledStore(_ name: String) throws -> (contender: DiskStoreContender, directory: URL) {
            let directory = root.appendingPathComponent(name)
            try? FileManager.default.removeItem(at: directory)
            let contender = try DiskStoreContender(directory: directory)
            for i in 0..<n { try contender.set(Workload.value(base: base, index: i), forKey: keys[i]) }
            for key in order where try contender.get(key) == nil { fail("threads: miss for \(key)") }
            return (contender, directory)
        }
        let first = try filledStore("threads-\(label)")
        try runParallelReads(first.contender.store, order: order, bytes: bytes, label: label, passes: passes)
        // The same two threads, each reading a store of its own (a second copy of the keys in
        // another directory): what two readers scale to when they share nothing in Larder.
        let second = try filledStore("threads-\(label)-other")
        try runParallelReads(
            [first.contender.store, second.contender.store], order: order, bytes: bytes, label: label, passes: passes)
        for made in [second, first] {
            made.contender.close()
            try? FileManager.default.removeItem(at: made.directory)
        }
    }
}

/// Entry counts of the open-time cases.
let openSizes: [(count: Int, label: String)] = [(1_000, "1k"), (10_000, "10k"), (100_000, "100k")]

/// Builds stores of 1k, 10k and 100k entries of 100 B under `root` (once per compare run).
func prepareOpenStores(root: URL) throws {
    let base = Workload.randomBytes(100)
    for (count, label) in openSizes {
        let directory = root.appendingPathComponent("open-\(label)")
        try? FileManager.default.removeItem(at: directory)
        let store = try DiskStore(directory: directory)
        for i in 0..<count {
            try store.setValue(Workload.value(base: base, index: i), forKey: Workload.key("open", label, i))
        }
        guard store.totalCount == count else { fail("open-\(label): \(store.totalCount) entries, expected \(count)") }
        store.close()
    }
}

/// Time to open a prepared store and read its totals, then close it: the median of `repeats`.
func runOpenCases(root: URL, repeats: Int) throws {
    for (count, label) in openSizes {
        let directory = root.appendingPathComponent("open-\(label)")
        var samples: [Double] = []
        for _ in 0..<repeats {
            var total = 0
            let seconds = try measure {
                let store = try DiskStore(directory: directory)
                total = store.totalCount
                _ = try store.value(forKey: Workload.key("open", label, count / 2))
                store.close()
            }
            guard total == count else { fail("open-\(label): \(total) entries, expected \(count)") }
            samples.append(seconds)
        }
        report("disk.open(\(label))", "larder", value: median(samples) * 1000, unit: "ms")
    }
}

/// A mixed load (`cases=mixed`): on a store of `n100` entries of 100 B, rounds of `mixreads`
/// reads in a scattered order followed by one overwrite, `mixrounds` rounds, under the policy
/// `mixpolicy` (`lru`, the default, or `s3fifo`). Reports the reads' and the writes' rates
/// separately (a write that ranks the reads logged before it inside its own transaction pays
/// for them, so the log's batch size moves cost between the two).
func runMixedCases(_ arguments: Arguments, root: URL) throws {
    let n = arguments.int("n100", default: 1000)
    let readsPerWrite = arguments.int("mixreads", default: 256)
    let rounds = arguments.int("mixrounds", default: 2_000)
    let policyName = arguments.string("mixpolicy", default: "lru")
    guard let policy = ["lru": EvictionPolicy.lru, "s3fifo": .s3fifo][policyName] else {
        fail("mixpolicy must be lru or s3fifo, not \(policyName)")
    }
    let directory = root.appendingPathComponent("mixed")
    try? FileManager.default.removeItem(at: directory)
    let contender = try DiskStoreContender(directory: directory, policy: policy)
    let base = Workload.randomBytes(100)
    let keys = (0..<n).map { Workload.key("k", "mixed", $0) }
    for i in 0..<n { try contender.set(Workload.value(base: base, index: i), forKey: keys[i]) }
    let order = (0..<n).map { keys[Workload.readIndex($0, n)] }
    var readSeconds = 0.0, writeSeconds = 0.0, step = 0
    for round in 0..<rounds {
        readSeconds += try measure {
            for _ in 0..<readsPerWrite {
                guard try contender.get(order[step % n]) != nil else { fail("mixed: miss") }
                step += 1
            }
        }
        let value = Workload.value(base: base, index: round)
        writeSeconds += try measure { try contender.set(value, forKey: keys[(round * 7_919) % n]) }
    }
    let label = "disk.mixed(\(readsPerWrite) reads, 1 write\(policy == .lru ? "" : ", " + policyName))"
    report(label, "reads", ops: rounds * readsPerWrite, seconds: readSeconds)
    report(label, "writes", ops: rounds, seconds: writeSeconds)
    contender.close()
    try? FileManager.default.removeItem(at: directory)
}

/// Writes `bytes` (at most 512 MiB) to a scratch file in `directory` and deletes it, as
/// baseline.c's `warm_page_cache` does before each timed run of writes: on this project's VMs the
/// host backs guest memory lazily and takes freed memory back after a few seconds, so without
/// it whichever contender's writes land on memory the host must back again runs up to ten times
/// slower (Benchmarks/README.md, finding 13).
func warmPageCache(in directory: URL, bytes: Int) {
    let path = directory.appendingPathComponent("warm-up").path
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else { fail("cannot create \(path)") }
    let chunk = [UInt8](repeating: 0, count: 1 << 20)
    var done = 0
    while done < min(bytes, 512 << 20) {
        guard chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == chunk.count else {
            fail("cannot write \(path)")
        }
        done += chunk.count
    }
    close(descriptor)
    unlink(path)
}
