// LarderGuard: one operation, a fixed number of times, inside `callgrindMeasuredRegion` so that
// callgrind (`--toggle-collect='*callgrindMeasuredRegion*'`) counts only the operations, not the setup.
//
//   LarderGuard <operation> <iterations> <directory>
//
// Budgeted operations (100 B values, inline): disk-get-hit, disk-get-hit-s3fifo (the same under
// `.s3fifo`), disk-get-hit-s3fifo-hot (hits on `.s3fifo` entries whose counters are saturated,
// which log nothing), storage-get-hit, storage-get-miss and storage-set (Storage over the disk
// tier), disk-get-miss, disk-set, memory-hit, memory-hit-wtinylfu (hits under `.wTinyLFU`),
// memory-insert (an insert that evicts), storage-memory-hit and storage-memory-insert (the same
// two through `Storage` without byte tiers), storage-memory-hit-coherent (storage-memory-hit
// with a disk tier whose directory memory follows), storage-memory-hit-metrics (storage-memory-hit
// with `StorageMetrics` reporting it and `OperationMetrics` observing its loads). Profiling aids, not budgeted: disk-get-hit-100k
// (100 KiB values in blob files) and disk-get-hit-4k (4 KiB values inline, 8,000 of them).
// Setup is the same every run: fixed keys and values, a fresh directory,
// SWIFT_DETERMINISTIC_HASHING=1 set by the script.
import Foundation
import Larder
import LarderMetrics

let arguments = CommandLine.arguments
guard arguments.count == 4, let iterations = Int(arguments[2]), iterations > 0 else {
    FileHandle.standardError.write(Data("usage: LarderGuard <operation> <iterations> <directory>\n".utf8))
    exit(2)
}
let operation = arguments[1]
let directory = URL(fileURLWithPath: arguments[3])
let residents = 1_000

func value(_ index: Int) -> Data {
    var bytes = [UInt8](repeating: 0x5A, count: 100)
    withUnsafeBytes(of: UInt64(index).littleEndian) { for (offset, byte) in $0.enumerated() { bytes[offset] = byte } }
    return Data(bytes)
}

func key(_ prefix: String, _ index: Int) -> String { "\(prefix)-\(index)" }

final class Box: Sendable {}

/// `Storage` needs a codec even without byte tiers; these operations never call it.
let boxTransformer = Transformer<Box>(encode: { _ in Data() }, decode: { _ in Box() }, isCompressible: false)

/// The prepared state of one operation and the closure that runs it once per index.
nonisolated(unsafe) var body: (Int) throws -> Void = { _ in }
nonisolated(unsafe) var checks: () throws -> Void = {}

/// An empty `DiskStore` in a fresh `directory`, quiet, configured by `configure`.
func openDiskStore(_ configure: (inout DiskStore.Configuration) -> Void) throws -> DiskStore {
    try? FileManager.default.removeItem(at: directory)
    var configuration = DiskStore.Configuration()
    configuration.logHandler = nil
    configure(&configuration)
    return try DiskStore(directory: directory, configuration: configuration)
}

/// One instant for the disk stores' setup and reads: what a read does must not depend on how
/// fast callgrind runs (whether a read is recent enough to go unlogged under `.s3fifo`, whether
/// the log's oldest read is old enough to rank it, 2 s after it, inside the measured reads).
let fixedInstant = Date(timeIntervalSince1970: 1_800_000_000)

func makeDiskStore(policy: EvictionPolicy = .lru) throws -> DiskStore {
    let store = try openDiskStore { configuration in
        configuration.policy = policy
        configuration.now = { fixedInstant }
        // Ranked on the reading thread: the count then includes each read's share of its
        // batch's ranking, which on Larder's I/O queue would run outside the measured thread.
        configuration.ranksReadsInBackground = false
    }
    for index in 0..<residents { try store.setValue(value(index), forKey: key("k", index)) }
    return store
}

switch operation {
case "disk-get-hit":
    let store = try makeDiskStore()
    body = { index in
        guard try store.value(forKey: key("k", index * 7_919 % residents))?.count == 100 else { fatalError("miss") }
    }
case "disk-get-hit-s3fifo":
    let store = try makeDiskStore(policy: .s3fifo)
    body = { index in
        guard try store.value(forKey: key("k", index * 7_919 % residents))?.count == 100 else { fatalError("miss") }
    }
case "disk-get-hit-s3fifo-hot":
    // Hits on entries already read three times under `.s3fifo` (their counters saturated and
    // their last use recent): such reads are counted and not logged, so they write nothing.
    let store = try makeDiskStore(policy: .s3fifo)
    // 16,384 reads, every key sixteen times and more, then a trim that removes nothing but
    // ranks the logged reads first: every counter saturated, nothing left logged.
    for read in 0..<16_384 {
        guard try store.value(forKey: key("k", read % residents)) != nil else { fatalError("miss") }
    }
    try store.trim(toCount: residents)
    body = { index in
        guard try store.value(forKey: key("k", index * 7_919 % residents))?.count == 100 else { fatalError("miss") }
    }
case "storage-get-hit", "storage-get-miss", "storage-set":
    // Storage<String, Data> over the disk tier alone (the compare run's `storage` contender):
    // the generic layer's cost over disk-get-hit and disk-get-miss.
    try? FileManager.default.removeItem(at: directory)
    var configuration = Storage<String, Data>.Configuration(directory: directory, defaultTiers: .disk)
    configuration.disk.logHandler = nil
    configuration.disk.ranksReadsInBackground = false
    configuration.now = { fixedInstant }
    let storage = try Storage(configuration: configuration, transformer: .data)
    for index in 0..<residents { try storage.setValue(value(index), forKey: key("k", index)) }
    if operation == "storage-set" {
        let values = (0..<iterations).map(value)
        let keys = (0..<iterations).map { key("new", $0) }
        body = { index in try storage.setValue(values[index], forKey: keys[index]) }
        checks = { guard storage.disk?.totalCount == residents + iterations else { fatalError("count") } }
    } else if operation == "storage-get-hit" {
        body = { index in
            guard try storage.value(forKey: key("k", index * 7_919 % residents))?.count == 100 else { fatalError("miss") }
        }
    } else {
        body = { index in
            guard try storage.value(forKey: key("absent", index)) == nil else { fatalError("hit") }
        }
    }
case "disk-get-hit-100k":
    // Not in budgets.json: a profiling aid (`perf record`) for reads of blob files, whose
    // time is mostly the kernel's copy, which callgrind does not count.
    let store = try openDiskStore { $0.sizeLimit = 1 << 30 }
    // Incompressible-looking bytes, the first two made unique per value.
    var bytes = (0..<102_400).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
    for index in 0..<residents {
        bytes[0] = UInt8(truncatingIfNeeded: index)
        bytes[1] = UInt8(truncatingIfNeeded: index >> 8)
        try store.setValue(Data(bytes), forKey: key("k", index))
    }
    sync()  // written back before the reads, not during them
    body = { index in
        guard try store.value(forKey: key("k", index * 7_919 % residents))?.count == 102_400 else { fatalError("miss") }
    }
case "disk-get-hit-4k":
    // Not in budgets.json: a profiling aid for inline values of 4 KiB (the compare run's
    // `disk.get-hit(4KiB)`), 8,000 of them so the index outgrows SQLite's page cache.
    let store = try openDiskStore {
        $0.sizeLimit = 1 << 30
        $0.ranksReadsInBackground = false
    }
    let count = 8_000
    // Incompressible bytes (xorshift), as the compare run's random values.
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    for index in 0..<count {
        let bytes = (0..<4_096).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        try store.setValue(Data(bytes), forKey: key("k", index))
    }
    body = { index in
        guard try store.value(forKey: key("k", index * 7_919 % count))?.count == 4_096 else { fatalError("miss") }
    }
case "disk-get-miss":
    let store = try makeDiskStore()
    body = { index in
        guard try store.value(forKey: key("absent", index)) == nil else { fatalError("hit") }
    }
case "disk-set":
    let store = try makeDiskStore()
    let values = (0..<iterations).map(value)
    let keys = (0..<iterations).map { key("new", $0) }
    body = { index in try store.setValue(values[index], forKey: keys[index]) }
    checks = { guard store.totalCount == residents + iterations else { fatalError("count") } }
case "memory-hit":
    let store = try MemoryStore<String, Box>(configuration: .init(countLimit: residents))
    let keys = (0..<residents).map { key("memory-key", $0) }
    let box = Box()
    for name in keys { store.setValue(box, forKey: name) }
    body = { index in
        guard store.value(forKey: keys[index * 7_919 % residents]) != nil else { fatalError("miss") }
    }
case "memory-hit-wtinylfu":
    // `.wTinyLFU` hits, set up as the compare run's `memory.get-hit(wTinyLFU)`: the entries
    // overflow the window once, into main, where a hit counts in the sketch and moves between
    // probation and protected.
    let limit = residents + residents / 100 + 2
    let store = try MemoryStore<String, Box>(configuration: .init(countLimit: limit, policy: .wTinyLFU))
    let keys = (0..<residents).map { key("memory-key", $0) }
    let box = Box()
    for name in keys { store.setValue(box, forKey: name) }
    for index in 0...(limit - residents) { store.setValue(box, forKey: key("filler", index)) }
    body = { index in _ = store.value(forKey: keys[index * 7_919 % residents]) }
case "memory-insert":
    let store = try MemoryStore<String, Box>(configuration: .init(countLimit: residents, overflowTrimRatio: 0))
    let keys = (0..<(2 * residents)).map { key("memory-key", $0) }
    let box = Box()
    for index in 0..<residents { store.setValue(box, forKey: keys[index]) }
    var next = residents
    body = { _ in
        store.setValue(box, forKey: keys[next % keys.count])
        next += 1
    }
case "storage-memory-hit":
    // memory-hit through `Storage<String, Box>` without a disk tier: the generic layer's cost.
    let storage = try Storage<String, Box>(
        configuration: .init(memory: .init(countLimit: residents)), transformer: boxTransformer)
    let keys = (0..<residents).map { key("memory-key", $0) }
    let box = Box()
    for name in keys { try storage.setValue(box, forKey: name) }
    body = { index in
        guard try storage.value(forKey: keys[index * 7_919 % residents]) != nil else { fatalError("miss") }
    }
case "storage-memory-hit-coherent":
    // storage-memory-hit with a disk tier whose directory memory follows (the default): each
    // hit first checks the wal-index for commits by other stores (there are none here).
    try? FileManager.default.removeItem(at: directory)
    var configuration = Storage<String, Box>.Configuration(memory: .init(countLimit: residents), directory: directory)
    configuration.disk.logHandler = nil
    configuration.disk.ranksReadsInBackground = false
    configuration.now = { fixedInstant }
    let storage = try Storage(
        configuration: configuration,
        transformer: Transformer<Box>(encode: { _ in Data([1]) }, decode: { _ in Box() }, isCompressible: false))
    let keys = (0..<residents).map { key("memory-key", $0) }
    let box = Box()
    for name in keys { try storage.setValue(box, forKey: name) }
    // The first hit after the writes catches up with their change rows (all this store's own).
    guard try storage.value(forKey: keys[0]) != nil else { fatalError("miss") }
    body = { index in
        guard try storage.value(forKey: keys[index * 7_919 % residents]) != nil else { fatalError("miss") }
    }
    checks = { guard storage.statistics[.memory].hits >= iterations else { fatalError("not memory hits") } }
case "storage-memory-hit-metrics":
    // storage-memory-hit with metrics on (trait `Metrics`): a reporter that samples the
    // statistics and an observer of loads. Neither is on the hit path, which must cost the same.
    var configuration = Storage<String, Box>.Configuration(memory: .init(countLimit: residents))
    configuration.observer = OperationMetrics(label: "guard")
    let storage = try Storage<String, Box>(configuration: configuration, transformer: boxTransformer)
    let metrics = StorageMetrics(storage: storage, label: "guard")
    let keys = (0..<residents).map { key("memory-key", $0) }
    let box = Box()
    for name in keys { try storage.setValue(box, forKey: name) }
    metrics.report()
    body = { index in
        guard try storage.value(forKey: keys[index * 7_919 % residents]) != nil else { fatalError("miss") }
    }
    checks = { metrics.report() }
case "storage-memory-insert":
    // memory-insert through `Storage<String, Box>` without a disk tier.
    let storage = try Storage<String, Box>(
        configuration: .init(memory: .init(countLimit: residents, overflowTrimRatio: 0)), transformer: boxTransformer)
    let keys = (0..<(2 * residents)).map { key("memory-key", $0) }
    let box = Box()
    for index in 0..<residents { try storage.setValue(box, forKey: keys[index]) }
    var next = residents
    body = { _ in
        try storage.setValue(box, forKey: keys[next % keys.count])
        next += 1
    }
default:
    FileHandle.standardError.write(Data("LarderGuard: unknown operation \(operation)\n".utf8))
    exit(2)
}

/// The measured region: callgrind collects only while this function is on the stack (the run
/// script toggles on `*callgrindMeasuredRegion*`, which matches its mangled name).
@inline(never)
func callgrindMeasuredRegion(_ iterations: Int) {
    do {
        for index in 0..<iterations { try body(index) }
    } catch {
        fatalError("\(error)")
    }
}

callgrindMeasuredRegion(iterations)
try checks()
try? FileManager.default.removeItem(at: directory)
