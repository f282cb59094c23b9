#if Hummingbird
import Foundation
import Hummingbird
import HummingbirdTesting
import Larder
import Logging
import LarderHummingbird
import LarderTestSupport
import ServiceLifecycle
import Testing

/// A clock that moves only when a test advances it.
final class SettableClock: Sendable {
    private let date = Locked(Date(timeIntervalSince1970: 1_700_000_000))
    var now: @Sendable () -> Date { { self.date.withLock { $0 } } }
    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

struct Session: Codable, Equatable, Sendable {
    var user: String
}

@Suite(.timeLimit(.minutes(10)))
struct LarderPersistDriverTests {
    let directory: TemporaryDirectory
    let clock = SettableClock()

    init() throws {
        directory = try TemporaryDirectory("larder-hummingbird")
    }

    func makeDriver(_ configuration: LarderPersistDriver.Configuration = .init()) throws -> LarderPersistDriver {
        try LarderPersistDriver(directory: directory.url, configuration: configuration) { $0.now = clock.now }
    }

    /// The routes of Hummingbird's own persist tests, over `persist`.
    func makeRouter(_ persist: some PersistDriver) -> Router<BasicRequestContext> {
        let router = Router()
        router.put("/persist/:tag") { request, context -> HTTPResponse.Status in
            let buffer = try await request.body.collect(upTo: .max)
            try await persist.set(key: try context.parameters.require("tag"), value: String(buffer: buffer))
            return .ok
        }
        router.put("/persist/:tag/:time") { request, context -> HTTPResponse.Status in
            guard let time = context.parameters.get("time", as: Int.self) else { throw HTTPError(.badRequest) }
            let buffer = try await request.body.collect(upTo: .max)
            try await persist.set(
                key: try context.parameters.require("tag"), value: String(buffer: buffer), expires: .seconds(time))
            return .ok
        }
        router.put("/create/:tag") { request, context -> HTTPResponse.Status in
            let buffer = try await request.body.collect(upTo: .max)
            do {
                try await persist.create(key: try context.parameters.require("tag"), value: String(buffer: buffer))
            } catch let error as PersistError where error == .duplicate {
                throw HTTPError(.conflict)
            }
            return .ok
        }
        router.get("/persist/:tag") { _, context -> String? in
            try await persist.get(key: try context.parameters.require("tag"), as: String.self)
        }
        router.get("/persist/:tag/ttl") { _, context -> String? in
            try await persist.getWithTTL(key: try context.parameters.require("tag"), as: String.self)?
                .ttl.map { String($0.components.seconds) }
        }
        router.delete("/persist/:tag") { _, context -> HTTPResponse.Status in
            try await persist.remove(key: try context.parameters.require("tag"))
            return .noContent
        }
        return router
    }

    func put(_ client: some TestClientProtocol, _ uri: String, _ body: String) async throws -> HTTPResponse.Status {
        try await client.execute(uri: uri, method: .put, body: ByteBuffer(string: body)) { $0.status }
    }

    func get(_ client: some TestClientProtocol, _ uri: String) async throws -> String? {
        try await client.execute(uri: uri, method: .get) { response in
            response.status == .noContent ? nil : String(buffer: response.body)
        }
    }

    // MARK: - Hummingbird's persist behaviours through a real application

    @Test func setThenGetAndSetTwice() async throws {
        let persist = try makeDriver()
        let app = Application(router: makeRouter(persist), services: [persist])
        try await app.test(.router) { client async throws in
            #expect(try await put(client, "/persist/a", "first") == .ok)
            #expect(try await get(client, "/persist/a") == "first")
            #expect(try await put(client, "/persist/a", "second") == .ok)
            #expect(try await get(client, "/persist/a") == "second")
            #expect(try await get(client, "/persist/missing") == nil)
        }
    }

    @Test func createThenGetAndASecondCreateIsAConflict() async throws {
        let persist = try makeDriver()
        let app = Application(router: makeRouter(persist), services: [persist])
        try await app.test(.router) { client async throws in
            #expect(try await put(client, "/create/a", "Persist") == .ok)
            #expect(try await get(client, "/persist/a") == "Persist")
            #expect(try await put(client, "/create/a", "Again") == .conflict)
            #expect(try await get(client, "/persist/a") == "Persist")
        }
    }

    @Test func expiredValuesAreGoneAndLiveOnesStay() async throws {
        let persist = try makeDriver()
        let app = Application(router: makeRouter(persist), services: [persist])
        try await app.test(.router) { client async throws in
            #expect(try await put(client, "/persist/short/1", "ThisIsTest1") == .ok)
            #expect(try await put(client, "/persist/long/10", "ThisIsTest2") == .ok)
            clock.advance(by: 1)
            #expect(try await get(client, "/persist/short") == nil)
            #expect(try await get(client, "/persist/long") == "ThisIsTest2")
            // An expired key takes a new value (Hummingbird's testExpireAndAdd) and a create.
            #expect(try await put(client, "/persist/short/10", "again") == .ok)
            #expect(try await get(client, "/persist/short") == "again")
            clock.advance(by: 9)
            #expect(try await get(client, "/persist/long") == nil)
            #expect(try await put(client, "/create/long", "created") == .ok)
            #expect(try await get(client, "/persist/long") == "created")
        }
    }

    @Test func ttlIsReportedAndANilExpiryKeepsIt() async throws {
        let persist = try makeDriver()
        let app = Application(router: makeRouter(persist), services: [persist])
        try await app.test(.router) { client async throws in
            #expect(try await put(client, "/persist/t/10", "v1") == .ok)
            #expect(try await get(client, "/persist/t/ttl") == "10")
            // When 4 s pass and the value is set with no expiry, Then it keeps its 6 s left.
            clock.advance(by: 4)
            #expect(try await put(client, "/persist/t", "v2") == .ok)
            #expect(try await get(client, "/persist/t/ttl") == "6")
            #expect(try await get(client, "/persist/t") == "v2")
            clock.advance(by: 6)
            #expect(try await get(client, "/persist/t") == nil)
            // A key set without expiry has no TTL, and setting it again keeps none.
            #expect(try await put(client, "/persist/n", "v") == .ok)
            #expect(try await put(client, "/persist/n", "w") == .ok)
            #expect(try await get(client, "/persist/n/ttl") == nil)
            clock.advance(by: 1e6)
            #expect(try await get(client, "/persist/n") == "w")
        }
    }

    @Test func codableValuesRoundTripAndAWrongTypeThrowsInvalidConversion() async throws {
        let persist = try makeDriver()
        let router = makeRouter(persist)
        router.put("/codable/:tag") { request, context -> HTTPResponse.Status in
            let buffer = try await request.body.collect(upTo: .max)
            try await persist.set(key: try context.parameters.require("tag"), value: Session(user: String(buffer: buffer)))
            return .ok
        }
        router.get("/codable/:tag") { _, context -> String? in
            try await persist.get(key: try context.parameters.require("tag"), as: Session.self)?.user
        }
        router.get("/invalid/:tag") { _, context -> String? in
            do {
                return try await persist.get(key: try context.parameters.require("tag"), as: String.self)
            } catch let error as PersistError where error == .invalidConversion {
                throw HTTPError(.badRequest)
            }
        }
        let app = Application(router: router, services: [persist])
        try await app.test(.router) { client async throws in
            #expect(try await put(client, "/codable/s", "ada") == .ok)
            #expect(try await get(client, "/codable/s") == "ada")
            try await client.execute(uri: "/invalid/s", method: .get) { #expect($0.status == .badRequest) }
        }
        await #expect(throws: PersistError.invalidConversion) {
            try await persist.getWithTTL(key: "s", as: Int.self)
        }
    }

    /// An immutable class, so that a test can tell the stored object from a decoded copy.
    final class Profile: Codable, Sendable {
        let name: String
        let visits: Int
        init(name: String, visits: Int) { (self.name, self.visits) = (name, visits) }
    }

    /// The same fields under another type: decodable from a `Profile`'s JSON.
    struct ProfileView: Codable, Equatable, Sendable {
        var name: String
        var visits: Int
    }

    @Test func aMemoryHitReturnsTheStoredObjectAndOtherTypesDecodeTheJSON() async throws {
        let persist = try makeDriver()
        let profile = Profile(name: "ada", visits: 3)
        try await persist.set(key: "p", value: profile, expires: .seconds(60))

        // Given the value in memory, Then a read as its own type is the object itself.
        let read = try #require(try await persist.get(key: "p", as: Profile.self))
        #expect(read === profile)
        // A read as another type decodes the JSON, and a wrong type still throws.
        #expect(try await persist.get(key: "p", as: ProfileView.self) == ProfileView(name: "ada", visits: 3))
        await #expect(throws: PersistError.invalidConversion) { try await persist.get(key: "p", as: [String].self) }

        // Given the memory tier emptied, Then the value comes from disk as JSON, decoded once.
        _ = try await persist.storage.removeAll(tiers: .memory)
        let fromDisk = try #require(try await persist.get(key: "p", as: Profile.self))
        #expect(fromDisk !== profile)
        #expect(fromDisk.name == "ada" && fromDisk.visits == 3)
        #expect(try await persist.get(key: "p", as: Profile.self) === fromDisk)
        let json = try #require(try await persist.storage.value(forKey: "p", tiers: .disk)).json
        #expect(try JSONDecoder().decode(ProfileView.self, from: json) == ProfileView(name: "ada", visits: 3))
    }

    @Test func removeDeletesTheValue() async throws {
        let persist = try makeDriver()
        let app = Application(router: makeRouter(persist), services: [persist])
        try await app.test(.router) { client async throws in
            #expect(try await put(client, "/persist/r", "ThisIsTest1") == .ok)
            try await client.execute(uri: "/persist/r", method: .delete) { #expect($0.status == .noContent) }
            #expect(try await get(client, "/persist/r") == nil)
            #expect(try await persist.storage.value(forKey: "r", tiers: .disk) == nil)
        }
    }

    // MARK: - Atomic create

    @Test func createRacingFromEightTasksHasExactlyOneWinner() async throws {
        let persist = try makeDriver()
        for round in 0..<20 {
            let key = "race-\(round)"
            let winners = try await withThrowingTaskGroup(of: Int?.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        do {
                            try await persist.create(key: key, value: task, expires: .seconds(60))
                            return task
                        } catch let error as PersistError where error == .duplicate {
                            return nil
                        }
                    }
                }
                return try await group.reduce(into: [Int]()) { if let task = $1 { $0.append(task) } }
            }
            #expect(winners.count == 1)
            #expect(try await persist.get(key: key, as: Int.self) == winners.first)
        }
        try await persist.shutdown()
    }

    @Test func createRacingFromTwoProcessesOnOneDirectoryHasExactlyOneWinnerPerKey() async throws {
        let count = 200
        let startFile = directory.url.appendingPathComponent("start").path
        let helper = try HummingbirdHelper.executableURL
        let outputs = try await withChildProcesses { scope in
            let children = try (0..<2).map { id in
                try scope.start(helper, arguments: [directory.url.path, startFile, String(count), "p\(id)"])
            }
            for child in children {
                #expect(await child.waitForOutputLine(prefix: "ready", timeout: .seconds(300)) != nil)
            }
            #expect(FileManager.default.createFile(atPath: startFile, contents: Data()))
            for child in children {
                #expect(await child.waitForExit(timeout: .seconds(120)))
                #expect(child.exitedCleanly, "\(child.standardError)")
            }
            return children.map(\.standardOutput)
        }
        let wins = outputs.map { output in
            Set(output.split(separator: "\n").filter { $0.hasPrefix("won ") }.compactMap { Int($0.dropFirst(4)) })
        }
        #expect(wins[0].isDisjoint(with: wins[1]))
        #expect(wins[0].union(wins[1]) == Set(0..<count))
        // The stored value is the winner's.
        let persist = try makeDriver()
        for index in [0, count / 2, count - 1] {
            let winner = wins[0].contains(index) ? "p0" : "p1"
            #expect(try await persist.get(key: "race-\(index)", as: String.self) == winner)
        }
        try await persist.shutdown()
    }

    @Test func twoAppProcessesOnOneDirectoryShowEachOthersChangesAtOnce() async throws {
        // Given two Hummingbird apps (processes) whose sessions live in one directory
        // When sessions are created, read, removed, created again and overwritten through
        // one app and read through the other, Then every response shows the new state.
        let mismatches = try await SharedDirectoryApps.run(
            try HummingbirdHelper.executableURL, arguments: ["serve", directory.url.path], withCreate: true)
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    // MARK: - Service lifecycle and restart

    @Test func gracefulShutdownClosesTheStoreAndARestartKeepsTheValues() async throws {
        let persist = try makeDriver()
        let app = Application(router: makeRouter(persist), services: [persist])
        try await app.test(.router) { client async throws in
            #expect(try await put(client, "/persist/kept", "on disk") == .ok)
            #expect(try await put(client, "/persist/timed/60", "lived") == .ok)
        }
        // Given the application stopped, Then the service closed the storage.
        await #expect(throws: StorageError.self) { try await persist.storage.value(forKey: "kept", tiers: .disk) }
        // When a new application opens the same directory, Then the values and TTLs are there.
        clock.advance(by: 30)
        let reopened = try makeDriver()
        let again = Application(router: makeRouter(reopened), services: [reopened])
        try await again.test(.router) { client async throws in
            #expect(try await get(client, "/persist/kept") == "on disk")
            #expect(try await get(client, "/persist/timed/ttl") == "30")
            clock.advance(by: 30)
            #expect(try await get(client, "/persist/timed") == nil)
        }
    }

    @Test func theServiceSweepsExpiredValuesAndStopsOnGracefulShutdown() async throws {
        let persist = try makeDriver(.init(tidyInterval: .milliseconds(10)))
        try await persist.set(key: "old", value: "x", expires: .seconds(1))
        try await persist.set(key: "kept", value: "y", expires: .seconds(100))
        clock.advance(by: 2)
        let group = ServiceGroup(
            configuration: .init(services: [persist], gracefulShutdownSignals: [], logger: Logger(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // When the sweeper runs, Then the expired row leaves the disk index (waiting as long
            // as the suite's time limit allows: a loaded run can hold the sweep back).
            while try await persist.storage.keys(withPrefix: "", tiers: .disk).contains("old") {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await persist.storage.keys(withPrefix: "", tiers: .disk) == ["kept"])
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await #expect(throws: StorageError.self) { try await persist.storage.value(forKey: "kept", tiers: .disk) }
    }

    @Test func aMemoryOnlyDriverWorksWithoutADirectory() async throws {
        let persist = try LarderPersistDriver(directory: nil) { $0.now = clock.now }
        try await persist.create(key: "k", value: 1, expires: nil)
        await #expect(throws: PersistError.duplicate) { try await persist.create(key: "k", value: 2, expires: nil) }
        #expect(try await persist.get(key: "k", as: Int.self) == 1)
    }
}

/// The `LarderHummingbirdHelper` executable SwiftPM builds beside the test bundle.
enum HummingbirdHelper {
    static var executableURL: URL {
        get throws {
            let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
            return URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("LarderHummingbirdHelper")
        }
    }
}
#endif
