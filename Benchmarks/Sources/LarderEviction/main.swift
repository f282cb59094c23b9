// LarderEviction: how well MemoryStore's LRU keeps the hot set, how fast it evicts, and how the
// stores scale.
//
//   LarderEviction [hit-ratio] [keys=100000 requests=1000000 out=results]
//       Replays synthetic traces (Zipf 0.8/1.0/1.2, Zipf with periodic one-pass scans, a moving
//       working set; seeded) through MemoryStore (countLimit = cache size, overflowTrimRatio 0)
//       and through ReferenceLRU at cache sizes of 0.1%, 1%, 10% and 50% of the key space.
//       Hit counts must be equal: a mismatch is printed loudly and the exit status is 1.
//       Writes <out>/eviction.csv; Scripts/plot_eviction.py draws <out>/eviction-hit-ratio.png.
//
//   LarderEviction scaling [sizes=1000,10000,100000,1000000 memory-max=1000000 disk-max=1000000 out=results]
//       Fill, get and set throughput at 1k..1M entries for MemoryStore and DiskStore, and the
//       memory tier's resident bytes per entry (/proc/self/statm), each size in a fresh child
//       process. Writes <out>/scaling.csv.
import BenchmarkSupport
import Foundation
import Larder

let arguments = Arguments()
let outDirectory = URL(fileURLWithPath: arguments.string("out", default: "results"))

func writeCSV(_ name: String, header: String, rows: [String]) {
    try? FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
    let url = outDirectory.appendingPathComponent(name)
    do {
        try (([header] + rows).joined(separator: "\n") + "\n").write(to: url, atomically: true, encoding: .utf8)
    } catch {
        fail("cannot write \(url.path): \(error)")
    }
    FileHandle.standardError.write(Data("wrote \(url.path)\n".utf8))
}

// MARK: - Hit ratio

struct ReplayResult {
    var hits = 0
    var evictions = 0
    var seconds = 0.0
}

/// Get; on a miss, insert. The same loop for both caches.
func replayMemoryStore(_ trace: Trace, capacity: Int) -> ReplayResult {
    let store = try! MemoryStore<Int, Int>(
        configuration: .init(countLimit: capacity, costLimit: .max, overflowTrimRatio: 0))
    var hits = 0
    let seconds = measure {
        for key in trace.requests {
            if store.value(forKey: key) != nil {
                hits += 1
            } else {
                store.setValue(key, forKey: key)
            }
        }
    }
    let statistics = store.statistics
    return ReplayResult(hits: hits, evictions: statistics.countEvictions, seconds: seconds)
}

func replayReference(_ trace: Trace, capacity: Int) -> ReplayResult {
    var lru = ReferenceLRU(capacity: capacity)
    var hits = 0
    let seconds = measure {
        for key in trace.requests {
            if lru.get(key) {
                hits += 1
            } else {
                lru.insert(key)
            }
        }
    }
    return ReplayResult(hits: hits, evictions: lru.evictions, seconds: seconds)
}

func runHitRatio() {
    let keys = arguments.int("keys", default: 100_000)
    let requests = arguments.int("requests", default: 1_000_000)
    let traces = [
        Trace.zipf(alpha: 0.8, keySpace: keys, length: requests, seed: 1),
        Trace.zipf(alpha: 1.0, keySpace: keys, length: requests, seed: 2),
        Trace.zipf(alpha: 1.2, keySpace: keys, length: requests, seed: 3),
        Trace.zipfWithScans(alpha: 1.0, keySpace: keys, length: requests, period: requests / 20,
                            scanLength: keys / 5, seed: 4),
        Trace.workingSetShift(alpha: 1.0, keySpace: keys, length: requests, phases: 4, seed: 5),
    ]
    let fractions = [0.001, 0.01, 0.1, 0.5]

    var rows: [String] = []
    var mismatches = 0
    print("trace\tcache\tcache_size\thit_ratio\tmemorystore_req/s\treference_req/s\tevictions")
    for trace in traces {
        for fraction in fractions {
            let capacity = max(1, Int(Double(keys) * fraction))
            let reference = replayReference(trace, capacity: capacity)
            let store = replayMemoryStore(trace, capacity: capacity)
            if store.hits != reference.hits || store.evictions != reference.evictions {
                mismatches += 1
                FileHandle.standardError.write(Data("""
                    !!!!!!!! MISMATCH: \(trace.name) at cache size \(capacity): MemoryStore \(store.hits) hits \
                    and \(store.evictions) evictions, reference LRU \(reference.hits) hits and \
                    \(reference.evictions) evictions !!!!!!!!\n
                    """.utf8))
            }
            let n = Double(trace.requests.count)
            let ratio = Double(reference.hits) / n
            let line = [trace.name, "\(fraction * 100)%", "\(capacity)", String(format: "%.4f", ratio),
                        String(format: "%.0f", n / store.seconds), String(format: "%.0f", n / reference.seconds),
                        "\(store.evictions)"]
            print(line.joined(separator: "\t"))
            rows.append([trace.name, "\(fraction)", "\(capacity)", "\(trace.requests.count)", "\(reference.hits)",
                         "\(store.hits)", String(format: "%.6f", ratio), String(format: "%.0f", n / store.seconds),
                         String(format: "%.0f", n / reference.seconds), "\(store.evictions)",
                         String(format: "%.0f", Double(store.evictions) / store.seconds)].joined(separator: ","))
        }
    }
    writeCSV("eviction.csv",
             header: "trace,cache_fraction,cache_size,requests,reference_hits,memorystore_hits,hit_ratio,"
                 + "memorystore_requests_per_s,reference_requests_per_s,evictions,memorystore_evictions_per_s",
             rows: rows)
    if mismatches > 0 {
        fail("\(mismatches) hit-ratio mismatches between MemoryStore and the reference LRU")
    }
    FileHandle.standardError.write(Data("MemoryStore matches the reference LRU on every trace and size.\n".utf8))
}

// MARK: - Scaling

/// One store at one size, in this process: prints `store,n,fill/s,get/s,set/s,rss_bytes_per_entry`.
func runScalingOne() throws {
    let kind = arguments.string("store", default: "memory")
    let n = arguments.int("n", default: 1000)
    let m = min(n, 20_000)
    let keys = (0..<n).map { "scaling-key-\($0)" }
    let newKeys = (0..<m).map { "scaling-new-\($0)" }
    let value = Workload.randomBytes(100)
    var fill = 0.0, get = 0.0, set = 0.0, perEntry = 0.0

    switch kind {
    case "memory":
        let before = residentBytes()
        let store = try MemoryStore<String, Data>(configuration: .init(costLimit: .max))
        fill = measure { for key in keys { store.setValue(value, forKey: key) } }
        perEntry = Double(residentBytes() - before) / Double(n)
        get = measure {
            for i in 0..<m where store.value(forKey: keys[Workload.readIndex(i, n)]) == nil { fail("miss") }
        }
        set = measure { for key in newKeys { store.setValue(value, forKey: key) } }
        guard store.totalCount == n + m else { fail("memory: \(store.totalCount) entries") }
    case "disk":
        let directory = makeTemporaryDirectory("scaling")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try DiskStore(directory: directory, configuration: .init(sizeLimit: 1 << 40))
        fill = try measure { for key in keys { try store.setValue(value, forKey: key) } }
        get = try measure {
            for i in 0..<m where try store.value(forKey: keys[Workload.readIndex(i, n)]) == nil { fail("miss") }
        }
        set = try measure { for key in newKeys { try store.setValue(value, forKey: key) } }
        guard store.totalCount == n + m else { fail("disk: \(store.totalCount) entries") }
        store.close()
    default:
        fail("unknown store \(kind)")
    }
    print([kind, "\(n)", String(format: "%.0f", Double(n) / fill), String(format: "%.0f", Double(m) / get),
           String(format: "%.0f", Double(m) / set), kind == "memory" ? String(format: "%.1f", perEntry) : ""].joined(separator: ","))
}

func runScaling() throws {
    let sizes = arguments.string("sizes", default: "1000,10000,100000,1000000").split(separator: ",").compactMap { Int($0) }
    let diskMax = arguments.int("disk-max", default: 1_000_000)
    let memoryMax = arguments.int("memory-max", default: 1_000_000)
    let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        ?? CommandLine.arguments[0]
    var rows: [String] = []
    print("store\tentries\tfill/s\tget/s\tset/s\trss bytes/entry")
    for kind in ["memory", "disk"] {
        for n in sizes where n <= (kind == "memory" ? memoryMax : diskMax) {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: executable)
            child.arguments = ["scaling-one", "store=\(kind)", "n=\(n)"]
            let pipe = Pipe()
            child.standardOutput = pipe
            try child.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            child.waitUntilExit()
            guard child.terminationStatus == 0, let line = output.split(separator: "\n").last else {
                fail("scaling-one store=\(kind) n=\(n) failed")
            }
            rows.append(String(line))
            print(line.replacingOccurrences(of: ",", with: "\t"))
        }
    }
    writeCSV("scaling.csv", header: "store,entries,fill_per_s,get_per_s,set_per_s,rss_bytes_per_entry", rows: rows)
}

do {
    if arguments.has("scaling-one") {
        try runScalingOne()
    } else if arguments.has("scaling") {
        try runScaling()
    } else {
        runHitRatio()
    }
} catch {
    fail("\(error)")
}
