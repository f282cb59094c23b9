import Foundation
import Synchronization
import LarderTestSupport
import Testing
@testable import Larder

/// Limits changed on a live store: a lowered limit trims at once, atomically with respect to
/// other calls, and later writes obey the new limits.
@Suite(.timeLimit(.minutes(10)))
struct RuntimeLimitsTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("runtime-limits")
    }

    @Test(arguments: [EvictionPolicy.lru, .s3fifo, .wTinyLFU])
    func loweringMemoryLimitsTrimsAtOnceAndLaterWritesObeyThem(policy: EvictionPolicy) throws {
        let store = try MemoryStore<Int, Data> { $0.policy = policy }
        for key in 0..<100 { store.setValue(Data(count: 100), forKey: key) }
        #expect(store.totalCount == 100)

        try store.setLimits(countLimit: 40)
        #expect(store.totalCount == 40)
        #expect(store.countLimit == 40)
        if policy == .lru {
            #expect(Set(store.keys()) == Set(60..<100), "the least recently used went first")
        }
        try store.setLimits(costLimit: 1_000)
        #expect(store.totalCount == 10 && store.totalCost == 1_000)
        for key in 100..<200 { store.setValue(Data(count: 100), forKey: key) }
        #expect(store.totalCost <= 1_000 && store.totalCount <= 10)
        #expect(!store.setValue(Data(count: 1_001), forKey: -1), "the entry cost limit follows the cost limit")

        // Raising them lets the store grow again.
        try store.setLimits(countLimit: 1_000, costLimit: .max)
        for key in 200..<500 { store.setValue(Data(count: 100), forKey: key) }
        #expect(store.totalCount == 310)
        #expect(throws: StorageError.self) { try store.setLimits(countLimit: -1) }
        #expect(store.countLimit == 1_000, "a refused change changes nothing")
    }

    @Test func loweringDiskLimitsTrimsAtOnceAndLaterWritesObeyThem() throws {
        let store = try DiskStore(directory: folder.url.appendingPathComponent("disk")) { $0.logHandler = nil }
        for key in 0..<100 { try store.setValue(Data(repeating: 1, count: 1_000), forKey: "k\(key)") }
        _ = try store.value(forKey: "k0")  // k0 becomes the most recently used

        try store.setLimits(countLimit: 30)
        #expect(store.totalCount == 30)
        #expect(try store.value(forKey: "k0") != nil, "the most recently used stays")
        #expect(try store.value(forKey: "k1") == nil)
        try store.setLimits(sizeLimit: 10_000)
        #expect(store.totalSize <= 10_000)
        #expect(store.countLimit == 30 && store.sizeLimit == 10_000)
        for key in 100..<200 { try store.setValue(Data(repeating: 1, count: 1_000), forKey: "k\(key)") }
        #expect(store.totalSize <= 10_000)
        #expect(throws: StorageError.self) { try store.setValue(Data(repeating: 2, count: 10_001), forKey: "big") }
        #expect(throws: StorageError.self) { try store.setLimits(sizeLimit: -5) }
        #expect(store.sizeLimit == 10_000)

        // A limit of zero empties the store and accepts writes without keeping them.
        try store.setLimits(countLimit: 0)
        #expect(store.totalCount == 0)
        try store.setValue(Data("x".utf8), forKey: "x")
        #expect(try store.value(forKey: "x") == nil)
    }

    @Test func aLimitLoweredDuringConcurrentWritesHoldsWhenItReturns() throws {
        // Writers keep writing while the limits drop; once setLimits returns, no total exceeds
        // its new limit by more than the writes still in flight, and after they finish the
        // limits hold exactly.
        let memory = try MemoryStore<Int, Data>()
        let disk = try DiskStore(directory: folder.url.appendingPathComponent("concurrent")) { $0.logHandler = nil }
        // Writers on threads of their own, and waits that hold this thread, not an await: an
        // await's resumption needs a thread of the cooperative pool (two on a two-core
        // machine), which the rest of a full parallel run may hold for minutes, and writers
        // left running that long would take both cores from everything else. Each writer also
        // stops by itself after a bounded number of writes.
        let stop = Atomic<Bool>(false)
        let failures = Locked([String]())
        let group = DispatchGroup()
        for writer in 0..<2 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var key = writer * 1_000_000
                while !stop.load(ordering: .relaxed), key < writer * 1_000_000 + 200_000 {
                    memory.setValue(Data(count: 10), forKey: key)
                    do {
                        try disk.setValue(Data(repeating: 1, count: 10), forKey: "k\(key)")
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                    key += 1
                }
            }
        }
        Thread.sleep(forTimeInterval: 0.2)
        try memory.setLimits(countLimit: 50)
        try disk.setLimits(countLimit: 50)
        Thread.sleep(forTimeInterval: 0.2)
        stop.store(true, ordering: .relaxed)
        group.wait()
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(memory.totalCount <= 50)
        #expect(disk.totalCount <= 50)
        #expect(try disk.keys().count == disk.totalCount)
    }

    @Test func storageTiersTakeNewLimitsAndKeepReportingEvictions() async throws {
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("storage"))
        configuration.logHandler = nil
        let storage = try Storage(configuration: configuration, transformer: .string)
        for key in 0..<20 { try await storage.setValue("v", forKey: "k\(key)") }
        let events = storage.events()
        try storage.memory.setLimits(countLimit: 5)
        try #require(storage.disk).setLimits(countLimit: 10)
        var evicted: [StorageTier: Int] = [:]
        for await event in events where event.kind == .evicted {
            evicted[event.tier, default: 0] += 1
            if evicted.values.reduce(0, +) == 25 { break }
        }
        #expect(evicted == [.memory: 15, .disk: 10])
        #expect(storage.statistics[.disk].totalCount == 10)
    }
}
