// LarderCompare: Larder's side of Benchmarks/compare.sh.
//
// Prints `case<TAB>contender<TAB>value<TAB>unit` lines for the disk workload (DiskStore), the
// memory tier (MemoryStore against Dictionary + NSLock and NSCache), Storage<String, _> on both, the codecs and the open
// time of prepared stores. compare.sh passes the same `key=value` counts to baseline.c and
// diskcache_runner.py.
//
//   LarderCompare prepare-open opendir=/tmp/x           build the 1k/10k/100k stores once
//   LarderCompare dir=/tmp/y opendir=/tmp/x n100=20000 n4k=10000 n100k=1000 n1m=200 \
//                 ncodec=300 ndigest=500000 nmem=2000000 memcap=10000 [cases=disk,memory,codec,open; policy: only the disk policy cases, warmpasses=4 measured passes of warm re-reads, policychunks=8 turns per pass between the two stores (0: one store after the other), warmrank=0 to leave the warm-up's reads unranked (as before); threads: only the two-thread reads, on one store and then on two stores of their own, each phase threadpasses=1 times over its keys, threadrank=0 to leave the reads logged before a phase unranked (as before finding 22); mixed: reads and writes interleaved, mixreads=256 mixrounds=2000 mixpolicy=lru|s3fifo; memchunks=16 turns the W-TinyLFU and LRU stores take over their hits (0: one after the other)]
import BenchmarkSupport
import Foundation

let arguments = Arguments()

do {
    if arguments.has("prepare-open") {
        let root = URL(fileURLWithPath: arguments.string("opendir", default: "/tmp/larder-compare-open"))
        try prepareOpenStores(root: root)
        exit(0)
    }

    let cases = Set(arguments.string("cases", default: "disk,memory,codec,open").split(separator: ",").map(String.init))
    let root = URL(fileURLWithPath: arguments.string("dir", default: "/tmp/larder-compare"))
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)

    if cases.contains("memory") {
        let workload = MemoryWorkload(
            capacity: arguments.int("memcap", default: 10_000),
            operations: arguments.int("nmem", default: 2_000_000),
            policyChunks: arguments.int("memchunks", default: 16))
        try runMemoryStoreCases(workload)
        runMemoryPeerCases(workload)
    }
    if cases.contains("codec") { try runCodecCases(arguments) }
    if cases.contains("disk") { try runDiskCases(arguments, root: root) }
    if cases.contains("threads") { try runParallelReadCases(arguments, root: root) }
    if cases.contains("mixed") { try runMixedCases(arguments, root: root) }
    if cases.contains("disk") || cases.contains("policy") { try runDiskPolicyCase(arguments, root: root) }
    if cases.contains("open"), let openRoot = arguments.values["opendir"] {
        try runOpenCases(root: URL(fileURLWithPath: openRoot), repeats: arguments.int("openrepeats", default: 5))
    }
} catch {
    fail("\(error)")
}
